//! Runs every fuzz oracle over the committed seed corpus and any saved
//! regression inputs (fuzz/corpus, fuzz/regressions) on stable Rust, so a
//! decoder change that breaks on a known input fails `cargo test`.

use std::path::Path;

use granary_packet::fuzzing;

fn each_input(target: &str, f: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for sub in ["corpus", "regressions"] {
        let dir = root.join(sub).join(target);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let bytes = std::fs::read(e.path()).unwrap();
            f(&bytes);
            // Truncations and a corruption of each valid packet too.
            for cut in [1, bytes.len() / 2, bytes.len().saturating_sub(1)] {
                f(&bytes[..cut.min(bytes.len())]);
            }
            if !bytes.is_empty() {
                let mut m = bytes.clone();
                let i = m.len() / 3;
                m[i] ^= 0xFF;
                f(&m);
            }
            n += 1;
        }
    }
    n
}

#[test]
fn corpus_regressions() {
    let mut total = 0;
    for (t, f) in [
        ("tlv", fuzzing::tlv as fn(&[u8])),
        ("name", fuzzing::name),
        ("uri", fuzzing::uri),
        ("interest", fuzzing::interest),
        ("data", fuzzing::data),
        ("lp", fuzzing::lp),
    ] {
        let n = each_input(t, f);
        assert!(n > 0, "no corpus for {t}: run fuzz/make-seed-corpus.py");
        total += n;
    }
    eprintln!("{total} corpus inputs (x5 variants) decoded without panic");
}
