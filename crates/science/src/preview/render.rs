//! Drawing a [`Field`]: the map (nearest neighbour, north up, west left), a title with
//! the CF `long_name`, a line with the variable, units, time step and level, and a
//! colour bar (viridis) with its range and units; masked values in a neutral grey.
//! Text is drawn with the public-domain 8×8 bitmap font of the `font8x8` crate (ASCII;
//! other characters become `?`, `°` becomes `deg`), so no font file is read at run time.

use super::{Field, Series};

/// Width of the map in pixels (the picture adds a margin on each side).
pub const WIDTH: u32 = 720;
const MARGIN: u32 = 10;
const BAR_H: u32 = 14;
const GREY: [u8; 3] = [150, 150, 150];
const INK: [u8; 3] = [20, 20, 20];
const PAPER: [u8; 3] = [255, 255, 255];

/// Viridis (matplotlib), nine stops.
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// Why a picture could not be encoded.
#[derive(Debug, thiserror::Error)]
#[error("PNG encoding failed: {0}")]
pub struct RenderError(String);

fn colour(t: f64) -> [u8; 3] {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |k: usize| (f64::from(a[k]) + (f64::from(b[k]) - f64::from(a[k])) * f).round() as u8;
    [mix(0), mix(1), mix(2)]
}

struct Canvas {
    w: u32,
    h: u32,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: u32, h: u32) -> Canvas {
        let mut px = Vec::with_capacity((w * h * 3) as usize);
        for _ in 0..w * h {
            px.extend_from_slice(&PAPER);
        }
        Canvas { w, h, px }
    }

    fn set(&mut self, x: u32, y: u32, c: [u8; 3]) {
        if x < self.w && y < self.h {
            let i = ((y * self.w + x) * 3) as usize;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn rect(&mut self, x: u32, y: u32, w: u32, h: u32, c: [u8; 3]) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    fn frame(&mut self, x: u32, y: u32, w: u32, h: u32, c: [u8; 3]) {
        for xx in x.saturating_sub(1)..=x + w {
            self.set(xx, y.saturating_sub(1), c);
            self.set(xx, y + h, c);
        }
        for yy in y.saturating_sub(1)..=y + h {
            self.set(x.saturating_sub(1), yy, c);
            self.set(x + w, yy, c);
        }
    }

    /// Text at (x, y), each font pixel `scale` pixels wide; returns the width drawn.
    fn text(&mut self, x: u32, y: u32, s: &str, scale: u32) -> u32 {
        let mut cx = x;
        for ch in ascii(s).bytes() {
            let glyph = font8x8::legacy::BASIC_LEGACY[usize::from(ch & 0x7f)];
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8u32 {
                    if bits >> col & 1 == 1 {
                        self.rect(cx + col * scale, y + row as u32 * scale, scale, scale, INK);
                    }
                }
            }
            cx += 8 * scale;
        }
        cx - x
    }
}

/// The text as printable ASCII (what the font has).
fn ascii(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            ' '..='~' => out.push(c),
            '°' => out.push_str("deg"),
            '\t' | '\n' | '\r' => out.push(' '),
            _ => out.push('?'),
        }
    }
    out
}

/// A number in at most about ten characters.
pub(crate) fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a != 0.0 && !(1e-3..1e6).contains(&a) {
        return format!("{x:.3e}");
    }
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Splits text into lines of at most `cols` characters, at spaces where it can.
fn wrap(s: &str, cols: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in ascii(s).split(' ') {
        let mut word = word.to_string();
        while word.len() > cols {
            if !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            let rest = word.split_off(cols);
            lines.push(word);
            word = rest;
        }
        if !cur.is_empty() && cur.len() + 1 + word.len() > cols {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&word);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// The map's height for its lat/lon extent (90 to 720 pixels).
fn map_height(f: &Field) -> u32 {
    let span = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (hi - lo).abs()
    };
    let (dy, dx) = (span(&f.lat), span(&f.lon));
    let ratio = if dy.is_finite() && dx.is_finite() && dy > 0.0 && dx > 0.0 {
        dy / dx
    } else {
        f.lat.len() as f64 / f.lon.len().max(1) as f64
    };
    ((f64::from(WIDTH) * ratio).round() as u32).clamp(90, WIDTH)
}

/// The picture of `f` as PNG bytes: `WIDTH + 20` pixels wide; the height follows the
/// map's lat/lon extent and the title's length.
pub fn render(f: &Field) -> Result<Vec<u8>, RenderError> {
    let (ny, nx) = (f.lat.len(), f.lon.len());
    let w = WIDTH + 2 * MARGIN;
    let title = f.long_name.clone().unwrap_or_else(|| f.variable.clone());
    let (tscale, cols) = if ascii(&title).len() <= (WIDTH / 16) as usize {
        (2, (WIDTH / 16) as usize)
    } else {
        (1, (WIDTH / 8) as usize)
    };
    let mut title_lines = wrap(&title, cols);
    title_lines.truncate(3);
    let mut info = format!(
        "{} [{}]",
        f.variable,
        f.units.as_deref().unwrap_or("no units")
    );
    if let Some(t) = &f.time {
        info.push_str(&format!("  time {t}"));
    }
    if let Some((z, u)) = &f.level {
        info.push_str(&format!(
            "  level {} {}",
            num(*z),
            u.as_deref().unwrap_or("")
        ));
    }
    if !f.index.is_empty() {
        let ix: Vec<String> = f
            .dims
            .iter()
            .zip(&f.index)
            .map(|(d, i)| format!("{d}={i}"))
            .collect();
        info.push_str(&format!("  ({})", ix.join(", ")));
    }
    let mut info_lines = wrap(&info, (WIDTH / 8) as usize);
    info_lines.truncate(3);
    let map_h = map_height(f);
    let title_h = title_lines.len() as u32 * (8 * tscale + 4);
    let info_h = info_lines.len() as u32 * 12;
    let top = MARGIN + title_h + info_h + 4;
    let bar_y = top + map_h + 22;
    let h = bar_y + BAR_H + 4 + 12 + MARGIN;
    let mut c = Canvas::new(w, h);

    let mut y = MARGIN;
    for l in &title_lines {
        c.text(MARGIN, y, l, tscale);
        y += 8 * tscale + 4;
    }
    for l in &info_lines {
        c.text(MARGIN, y, l, 1);
        y += 12;
    }

    let finite = f.values.iter().copied().filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let any = lo <= hi;
    let masked = f.values.iter().any(|v| !v.is_finite());
    let north_up = ny > 1 && f.lat[0] < f.lat[ny - 1];
    let west_left = !(nx > 1 && f.lon[0] > f.lon[nx - 1]);
    for r in 0..map_h {
        let mut yi = (u64::from(r) * ny as u64 / u64::from(map_h)) as usize;
        if north_up {
            yi = ny - 1 - yi;
        }
        for col in 0..WIDTH {
            let mut xi = (u64::from(col) * nx as u64 / u64::from(WIDTH)) as usize;
            if !west_left {
                xi = nx - 1 - xi;
            }
            let v = f.values[yi * nx + xi];
            let px = if !v.is_finite() {
                GREY
            } else if hi > lo {
                colour((v - lo) / (hi - lo))
            } else {
                colour(0.5)
            };
            c.set(MARGIN + col, top + r, px);
        }
    }
    c.frame(MARGIN, top, WIDTH, map_h, INK);
    // The extent under the map.
    let ext = |v: &[f64]| {
        format!(
            "{}..{}",
            num(v.first().copied().unwrap_or(f64::NAN)),
            num(v.last().copied().unwrap_or(f64::NAN))
        )
    };
    let mut extent = format!("lat {}  lon {}", ext(&f.lat), ext(&f.lon));
    if masked {
        extent.push_str("   grey: no data (masked)");
    }
    c.text(MARGIN, top + map_h + 6, &extent, 1);

    // The colour bar.
    for col in 0..WIDTH {
        let px = if any {
            colour(f64::from(col) / f64::from(WIDTH - 1))
        } else {
            GREY
        };
        c.rect(MARGIN + col, bar_y, 1, BAR_H, px);
    }
    c.frame(MARGIN, bar_y, WIDTH, BAR_H, INK);
    let ly = bar_y + BAR_H + 4;
    if any {
        c.text(MARGIN, ly, &num(lo), 1);
        let hs = num(hi);
        c.text(MARGIN + WIDTH - 8 * hs.len() as u32, ly, &hs, 1);
    } else {
        c.text(MARGIN, ly, "no data: every value is masked", 1);
    }
    let units = ascii(f.units.as_deref().unwrap_or(""));
    if !units.is_empty() {
        let uw = 8 * units.len() as u32;
        c.text(MARGIN + (WIDTH.saturating_sub(uw)) / 2, ly, &units, 1);
    }

    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| RenderError(e.to_string()))?;
        wr.write_image_data(&c.px)
            .map_err(|e| RenderError(e.to_string()))?;
    }
    Ok(out)
}

/// Height of a time-series picture (its width is the map picture's, `WIDTH + 20`).
pub const SERIES_HEIGHT: u32 = 400;

impl Canvas {
    /// A line from (x0, y0) to (x1, y1), one pixel wide (Bresenham).
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: [u8; 3]) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            if let (Ok(px), Ok(py)) = (u32::try_from(x), u32::try_from(y)) {
                self.set(px, py, c);
            }
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }
}

/// The line plot of a series as PNG bytes, `WIDTH + 20` × [`SERIES_HEIGHT`] pixels: the
/// CF `long_name` as title, a line with the variable, units, place and level, the
/// values' range on the left, the first and last dates under the plot; masked steps
/// leave gaps (a lone value between gaps is a dot).
pub fn render_series(s: &Series) -> Result<Vec<u8>, RenderError> {
    let w = WIDTH + 2 * MARGIN;
    let h = SERIES_HEIGHT;
    let mut c = Canvas::new(w, h);
    let title = s.long_name.clone().unwrap_or_else(|| s.variable.clone());
    let (tscale, cols) = if ascii(&title).len() <= (WIDTH / 16) as usize {
        (2, (WIDTH / 16) as usize)
    } else {
        (1, (WIDTH / 8) as usize)
    };
    let title = wrap(&title, cols).into_iter().next().unwrap_or_default();
    c.text(MARGIN, MARGIN, &title, tscale);
    let mut info = format!(
        "{} [{}]  ",
        s.variable,
        s.units.as_deref().unwrap_or("no units")
    );
    match (s.grid_point, s.bbox) {
        (Some([y, x]), _) => info.push_str(&format!("at lat {} lon {}", num(y), num(x))),
        (_, Some([a, b, cc, d])) => info.push_str(&format!(
            "mean over {},{},{},{} ({} points, cos-lat weighted)",
            num(a),
            num(b),
            num(cc),
            num(d),
            s.points
        )),
        _ => {}
    }
    if let Some((z, u)) = &s.level {
        info.push_str(&format!(
            "  level {} {}",
            num(*z),
            u.as_deref().unwrap_or("")
        ));
    }
    let info = wrap(&info, (WIDTH / 8) as usize)
        .into_iter()
        .next()
        .unwrap_or_default();
    let info_y = MARGIN + 8 * tscale + 6;
    c.text(MARGIN, info_y, &info, 1);
    let left = MARGIN + 8 * 10 + 4;
    let top = info_y + 22;
    let (pw, ph) = (w - MARGIN - left, h - top - 30);
    c.frame(left, top, pw, ph, INK);
    let (lo, hi) = s
        .values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    let n = s.values.len();
    if lo <= hi {
        c.text(MARGIN, top, &num(hi), 1);
        c.text(MARGIN, top + ph - 8, &num(lo), 1);
        let span = if hi > lo { hi - lo } else { 1.0 };
        let at = |i: usize, v: f64| -> (i64, i64) {
            let x = if n > 1 {
                i as f64 / (n - 1) as f64
            } else {
                0.5
            };
            let y = if hi > lo { (v - lo) / span } else { 0.5 };
            (
                i64::from(left) + (x * f64::from(pw - 1)).round() as i64,
                i64::from(top + ph - 1) - (y * f64::from(ph - 1)).round() as i64,
            )
        };
        let colour = VIRIDIS[2];
        let mut prev: Option<(i64, i64)> = None;
        for (i, &v) in s.values.iter().enumerate() {
            if !v.is_finite() {
                prev = None;
                continue;
            }
            let p = at(i, v);
            c.line(prev.unwrap_or(p), p, colour);
            prev = Some(p);
        }
    } else {
        c.text(left + 8, top + ph / 2, "no data: every value is masked", 1);
    }
    let date = |d: Option<&Option<String>>| -> String {
        d.and_then(|x| x.as_deref())
            .map(|x| x.get(..10).unwrap_or(x).to_string())
            .unwrap_or_default()
    };
    let (first, last) = (date(s.dates.first()), date(s.dates.last()));
    c.text(left, top + ph + 6, &first, 1);
    c.text(
        (left + pw).saturating_sub(8 * ascii(&last).len() as u32),
        top + ph + 6,
        &last,
        1,
    );
    let steps = format!("{n} steps");
    c.text(
        left + (pw.saturating_sub(8 * steps.len() as u32)) / 2,
        top + ph + 6,
        &steps,
        1,
    );
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| RenderError(e.to_string()))?;
        wr.write_image_data(&c.px)
            .map_err(|e| RenderError(e.to_string()))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_pictures_have_the_stated_size_with_gaps_and_without_data() {
        let mut s = Series {
            variable: "tas".into(),
            long_name: Some("Near-Surface Air Temperature".into()),
            units: Some("K".into()),
            method: "point".into(),
            grid_point: Some([45.0, 10.0]),
            bbox: None,
            points: 1,
            level: None,
            dates: vec![Some("1850-01-16T12:00:00".into()); 5],
            values: vec![270.0, f64::NAN, 280.0, 281.0, f64::NAN],
        };
        for values in [s.values.clone(), vec![f64::NAN; 5], vec![3.0; 5], vec![]] {
            s.values = values;
            let png = render_series(&s).unwrap();
            let r = png::Decoder::new(std::io::Cursor::new(png))
                .read_info()
                .unwrap();
            assert_eq!(
                (r.info().width, r.info().height),
                (WIDTH + 2 * MARGIN, SERIES_HEIGHT)
            );
        }
    }

    fn field(values: Vec<f64>) -> Field {
        Field {
            variable: "tas".into(),
            long_name: Some("Near-Surface Air Temperature".into()),
            units: Some("K".into()),
            dims: vec!["time".into(), "lat".into(), "lon".into()],
            index: vec![0],
            time: Some("1850-01-16T12:00:00".into()),
            level: None,
            lat: vec![-45.0, 45.0],
            lon: vec![0.0, 90.0, 180.0, 270.0],
            values,
        }
    }

    #[test]
    fn png_has_the_stated_size_and_text_fits() {
        let png = render(&field(vec![1.0, 2.0, f64::NAN, 4.0, 5.0, 6.0, 7.0, 8.0])).unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(png));
        let r = dec.read_info().unwrap();
        assert_eq!(r.info().width, WIDTH + 2 * MARGIN);
        assert!(r.info().height > 90);
    }

    #[test]
    fn all_masked_and_constant_fields_render() {
        render(&field(vec![f64::NAN; 8])).unwrap();
        render(&field(vec![3.0; 8])).unwrap();
    }

    #[test]
    fn numbers_and_wrapping() {
        assert_eq!(num(273.15), "273.15");
        assert_eq!(num(1e20), "1.000e20");
        assert_eq!(num(-0.0), "0");
        assert_eq!(wrap("a bb ccc", 4), vec!["a bb", "ccc"]);
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(ascii("20°C é"), "20degC ?");
        assert_eq!(colour(0.0), VIRIDIS[0]);
        assert_eq!(colour(1.0), VIRIDIS[8]);
    }
}
