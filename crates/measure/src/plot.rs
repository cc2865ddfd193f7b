//! Line plots as SVG (hand-written, like `sim cache`'s) and PNG (the same
//! SVG rasterised with resvg; see the crate README for why).

use std::path::Path;

/// One line: a label and its points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A plot's axes and lines.
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

const COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f",
];

/// A round axis maximum and tick step (1, 2 or 5 × 10^k) above `max`.
fn nice_axis(max: f64) -> (f64, f64) {
    // At most 8 ticks.
    let raw = (max / 8.0).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.0}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl Plot {
    /// The SVG document.
    pub fn svg(&self) -> String {
        let (w, h) = (760.0, 440.0);
        let (l, r, t, b) = (70.0, 190.0, 40.0, 55.0);
        let pts = self.series.iter().flat_map(|s| s.points.iter());
        let tx = |x: f64| if self.log_x { x.max(1e-12).log2() } else { x };
        let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                x0 = x0.min(tx(x));
                x1 = x1.max(tx(x));
                y1 = y1.max(y);
            }
        }
        if x0 > x1 {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 - x0 < 1e-9 {
            x0 -= 0.5;
            x1 += 0.5;
        }
        let (y1, ystep) = nice_axis(if y1 <= 0.0 { 1.0 } else { y1 * 1.02 });
        let px = |x: f64| l + (tx(x) - x0) / (x1 - x0) * (w - l - r);
        let py = |y: f64| h - b - y / y1 * (h - t - b);
        let mut s = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, sans-serif" font-size="12">
<rect width="{w}" height="{h}" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>
"#,
            (w - r + l) / 2.0,
            esc(&self.title)
        );
        // Axes and ticks.
        s.push_str(&format!(
            r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>
"#,
            h - b,
            w - r,
            h - b,
            h - b
        ));
        let ticks = (y1 / ystep).round() as usize;
        for i in 0..=ticks {
            let y = ystep * i as f64;
            s.push_str(&format!(
                r##"<line x1="{l}" y1="{0}" x2="{1}" y2="{0}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{4}</text>
"##,
                py(y),
                w - r,
                l - 6.0,
                py(y) + 4.0,
                fmt_tick(y)
            ));
        }
        let mut xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(|a, b| a.total_cmp(b));
        xs.dedup();
        if xs.len() > 12 {
            let step = xs.len().div_ceil(12);
            xs = xs.into_iter().step_by(step).collect();
        }
        for x in xs {
            s.push_str(&format!(
                r#"<text x="{}" y="{}" text-anchor="middle">{}</text>
"#,
                px(x),
                h - b + 16.0,
                fmt_tick(x)
            ));
        }
        s.push_str(&format!(
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>
<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>
"#,
            (w - r + l) / 2.0,
            h - 12.0,
            esc(&self.x_label),
            (h - b + t) / 2.0,
            esc(&self.y_label)
        ));
        for (i, se) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            // Past the palette, lines are dashed.
            let dash = if i >= COLOURS.len() {
                r#" stroke-dasharray="6,3""#
            } else {
                ""
            };
            let path: Vec<String> = se
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            s.push_str(&format!(
                r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>
"#,
                path.join(" ")
            ));
            for p in &path {
                let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                s.push_str(&format!(
                    r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>
"#
                ));
            }
            let ly = t + 10.0 + 18.0 * i as f64;
            s.push_str(&format!(
                r#"<line x1="{0}" y1="{ly}" x2="{1}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{2}" y="{3}">{4}</text>
"#,
                w - r + 12.0,
                w - r + 34.0,
                w - r + 40.0,
                ly + 4.0,
                esc(&se.label)
            ));
        }
        s.push_str("</svg>\n");
        s
    }

    /// Writes `stem.svg` and `stem.png` in `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> anyhow::Result<()> {
        let svg = self.svg();
        std::fs::write(dir.join(format!("{stem}.svg")), &svg)?;
        std::fs::write(dir.join(format!("{stem}.png")), svg_to_png(&svg)?)?;
        Ok(())
    }
}

/// Rasterises an SVG (system fonts, e.g. Debian's fonts-dejavu-core) to
/// PNG bytes.
pub fn svg_to_png(svg: &str) -> anyhow::Result<Vec<u8>> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = usvg::Tree::from_str(svg, &opt)?;
    let size = tree.size().to_int_size();
    let mut pm = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| anyhow::anyhow!("empty plot"))?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pm.as_mut());
    Ok(pm.encode_png()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ends_on_a_round_tick() {
        for (max, want) in [
            (102.0, (120.0, 20.0)),
            (0.62, (0.7, 0.1)),
            (41.0, (50.0, 10.0)),
        ] {
            let got = nice_axis(max);
            assert!(
                (got.0 - want.0).abs() < 1e-9 && (got.1 - want.1).abs() < 1e-9,
                "{max}: {got:?}"
            );
        }
    }

    #[test]
    fn plot_has_lines_and_rasterises() {
        let p = Plot {
            title: "t <1>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            series: vec![
                Series {
                    label: "a".into(),
                    points: vec![(1024.0, 1.0), (4096.0, 3.0)],
                },
                Series {
                    label: "b".into(),
                    points: vec![(1024.0, 2.0), (4096.0, f64::NAN)],
                },
            ],
        };
        let svg = p.svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
        let png = svg_to_png(&svg).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(png.len() > 2000);
    }
}
