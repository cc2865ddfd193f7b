//! Embeds every file under `assets/` (the web page) into the binary: writes
//! `$OUT_DIR/assets.rs`, a table of `(URL path, bytes)` built with `include_bytes!`.
//! Files whose name starts with a dot are left out.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let dir = root.join("assets");
    println!("cargo:rerun-if-changed=assets");
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    let mut table = String::from("/// Every file under `assets/`: (URL path, bytes).\n");
    table.push_str("pub const EMBEDDED: &[(&str, &[u8])] = &[\n");
    for f in &files {
        let rel = f.strip_prefix(&dir).expect("under assets");
        let url: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        table.push_str(&format!(
            "    ({:?}, include_bytes!({:?})),\n",
            format!("/{}", url.join("/")),
            f.to_string_lossy()
        ));
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("assets.rs");
    std::fs::write(&out, table).expect("write assets.rs");
}
