//! The DAP2 text responses: the DDS (whole or constrained), the DAS, the `Error`
//! body, the HTML form page and the ASCII values.

use std::fmt::Write;

use super::ce::{Pick, Slab};
use super::model::{quote, Attr, DapError, Model};
use super::read::Column;

/// A name as a DAP2 identifier: bytes other than letters, digits and `_-+!~*'`
/// written `%XX`.
pub fn id(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name.as_bytes() {
        if b.is_ascii_alphanumeric() || b"_-+!~*'".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn decl(out: &mut String, indent: usize, dtype: &str, name: &str, dims: &[(&str, u64)]) {
    let _ = write!(out, "{:indent$}{dtype} {}", "", id(name));
    for (d, n) in dims {
        let _ = write!(out, "[{} = {n}]", id(d));
    }
    out.push_str(";\n");
}

/// A member's declaration: its name, DAP type name and (dimension, length)s.
pub type Decl<'a> = (&'a str, &'static str, Vec<(&'a str, u64)>);

/// The declaration of each member a pick sends, in order.
pub fn members<'a>(model: &'a Model, p: &'a Pick) -> Vec<Decl<'a>> {
    let v = &model.vars[p.var];
    let mut out = Vec::new();
    if let Some(s) = &p.array {
        let dims = v
            .dims
            .iter()
            .zip(s)
            .map(|((d, _), s)| (d.as_str(), s.count))
            .collect();
        out.push((v.name.as_str(), v.dtype().name(), dims));
    }
    if let Some(maps) = &v.maps {
        for (k, s) in p.maps.iter().enumerate() {
            let (Some(s), Some(&m)) = (s, maps.get(k)) else {
                continue;
            };
            let m = &model.vars[m];
            let d = m.dims.first().map_or(m.name.as_str(), |d| d.0.as_str());
            out.push((m.name.as_str(), m.dtype().name(), vec![(d, s.count)]));
        }
    }
    out
}

/// The DDS of the picks (all of them: the file's DDS).
pub fn dds(model: &Model, picks: &[Pick]) -> String {
    let mut out = String::from("Dataset {\n");
    for p in picks {
        let v = &model.vars[p.var];
        let ms = members(model, p);
        if v.maps.is_none() {
            for (name, t, dims) in &ms {
                decl(&mut out, 4, t, name, dims);
            }
        } else if p.is_grid(model) {
            out.push_str("    Grid {\n      ARRAY:\n");
            if let Some((name, t, dims)) = ms.first() {
                decl(&mut out, 8, t, name, dims);
            }
            out.push_str("      MAPS:\n");
            for (name, t, dims) in ms.iter().skip(1) {
                decl(&mut out, 8, t, name, dims);
            }
            let _ = writeln!(out, "    }} {};", id(&v.name));
        } else {
            out.push_str("    Structure {\n");
            for (name, t, dims) in &ms {
                decl(&mut out, 8, t, name, dims);
            }
            let _ = writeln!(out, "    }} {};", id(&v.name));
        }
    }
    // The dataset's name keeps its dots (`tas_….nc`), as THREDDS writes it.
    let _ = writeln!(out, "}} {};", id(&model.name).replace("%2E", "."));
    out
}

/// An attribute's name in the DAS: only what would break the DAS's syntax
/// (space, controls, `"{};,%`, non-ASCII) written `%XX`; dots are kept, as in
/// `DODS_EXTRA.Unlimited_Dimension` of a file once saved from OPeNDAP, since
/// libnetcdf does not undo escapes in attribute names.
pub fn attr_id(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name.as_bytes() {
        if b.is_ascii_graphic() && !b"\"{};,%".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn table(out: &mut String, indent: usize, name: &str, attrs: &[(String, Attr)]) {
    let _ = writeln!(out, "{:indent$}{} {{", "", id(name));
    for (k, a) in attrs {
        match a {
            Attr::Values(t, vals) => {
                let _ = writeln!(
                    out,
                    "{:w$}{} {} {};",
                    "",
                    t.name(),
                    attr_id(k),
                    vals.join(", "),
                    w = indent + 4
                );
            }
            Attr::Table(inner) => table(out, indent + 4, k, inner),
        }
    }
    let _ = writeln!(out, "{:indent$}}}", "");
}

/// The DAS: each variable's attributes, `NC_GLOBAL`, the unlimited dimension
/// (`DODS_EXTRA`) and the dimensions no variable uses (`EXTRA_DIMENSION`), as
/// THREDDS writes them.
pub fn das(model: &Model) -> String {
    let mut out = String::from("Attributes {\n");
    for v in &model.vars {
        table(&mut out, 4, &v.name, &v.attrs);
    }
    table(&mut out, 4, "NC_GLOBAL", &model.global);
    if let Some(u) = &model.unlimited {
        table(
            &mut out,
            4,
            "DODS_EXTRA",
            &[(
                "Unlimited_Dimension".into(),
                Attr::Values(super::model::DapType::String, vec![quote(u)]),
            )],
        );
    }
    if !model.extra_dims.is_empty() {
        let dims: Vec<(String, Attr)> = model
            .extra_dims
            .iter()
            .map(|(d, n)| {
                (
                    d.clone(),
                    Attr::Values(super::model::DapType::Int32, vec![n.to_string()]),
                )
            })
            .collect();
        table(&mut out, 4, "EXTRA_DIMENSION", &dims);
    }
    out.push_str("}\n");
    out
}

/// The DAP2 error body.
pub fn error(e: &DapError) -> String {
    error_with(e.status(), &e.to_string())
}

/// A DAP2 error body of any code.
pub fn error_with(code: u16, message: &str) -> String {
    format!(
        "Error {{\n    code = {code};\n    message = {};\n}};\n",
        quote(message)
    )
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page a browser (or a client's probe) gets at `<url>.html`: the dataset's
/// variables, its DDS and DAS, and how to ask for values.
pub fn html(model: &Model, url: &str) -> String {
    let all: Vec<Pick> = super::ce::resolve(model, "").unwrap_or_default();
    let mut vars = String::new();
    for v in &model.vars {
        let dims: Vec<String> = v.dims.iter().map(|(d, n)| format!("{d} = {n}")).collect();
        let _ = writeln!(
            vars,
            "<li><code>{} {}[{}]</code></li>",
            v.dtype().name(),
            html_escape(&v.name),
            html_escape(&dims.join("]["))
        );
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>OPeNDAP: {name}</title></head>\n<body>\n<h1>OPeNDAP dataset {name}</h1>\n<p>Data URL: <code>{url}</code>. Open it with netCDF4, xarray or pydap; append <code>.dds</code>, <code>.das</code>, <code>.dods?var[start:stride:stop]</code> or <code>.ascii?…</code>.</p>\n<h2>Variables</h2>\n<ul>\n{vars}</ul>\n<h2>DDS</h2>\n<pre>{dds}</pre>\n<h2>DAS</h2>\n<pre>{das}</pre>\n</body></html>\n",
        name = html_escape(&model.name),
        url = html_escape(url),
        dds = html_escape(&dds(model, &all)),
        das = html_escape(&das(model)),
    )
}

/// Appends one member's values as the ASCII response writes them: its name and
/// shape, then a line per row (the leading indices, then the last dimension's
/// values).
pub fn ascii_member(out: &mut String, path: &str, dims: &[u64], c: &Column) {
    out.push_str(path);
    for n in dims {
        let _ = write!(out, "[{n}]");
    }
    out.push('\n');
    if dims.is_empty() {
        if !c.is_empty() {
            let _ = writeln!(out, "{}", c.text(0));
        }
        return;
    }
    let row = dims.last().copied().unwrap_or(1).max(1) as usize;
    let lead = &dims[..dims.len() - 1];
    for (r, start) in (0..c.len()).step_by(row).enumerate() {
        let mut rest = r as u64;
        let mut idx = vec![0u64; lead.len()];
        for k in (0..lead.len()).rev() {
            idx[k] = rest % lead[k].max(1);
            rest /= lead[k].max(1);
        }
        for i in idx {
            let _ = write!(out, "[{i}]");
        }
        let vals: Vec<String> = (start..(start + row).min(c.len()))
            .map(|i| c.text(i))
            .collect();
        if !lead.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&vals.join(", "));
        out.push('\n');
    }
    out.push('\n');
}

/// The counts of a hyperslab.
pub fn counts(s: &[Slab]) -> Vec<u64> {
    s.iter().map(|s| s.count).collect()
}
