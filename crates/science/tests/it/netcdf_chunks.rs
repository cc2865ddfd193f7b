//! The chunk index (virtual Zarr): real files written by the example writer (netCDF-4,
//! chunked, deflate + shuffle), each chunk decoded back with flate2 and compared with
//! the reader's values; then hostile variants: a truncated file, a chunk B-tree whose
//! signature is broken, chunk addresses past the end of the file, an unknown filter.

use std::io::Read;
use std::path::{Path, PathBuf};

use granary_science::netcdf::{self, chunk_index, ChunkIndex, Limits};

fn example_files(dir: &Path) -> Vec<PathBuf> {
    granary_science::example::write_tree(dir).expect("example tree")
}

fn index(path: &Path) -> ChunkIndex {
    chunk_index(path, &Limits::default()).expect("chunk index")
}

/// Decodes one variable's chunks into the full array (bytes, C order).
fn assemble(bytes: &[u8], ix: &ChunkIndex, name: &str) -> Vec<u8> {
    let v = ix.variable(name).expect("variable");
    let za = v
        .zarray
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: {:?}", v.unavailable));
    let shape: Vec<u64> = serde_json::from_value(za["shape"].clone()).expect("shape");
    let chunks: Vec<u64> = serde_json::from_value(za["chunks"].clone()).expect("chunks");
    let dtype = za["dtype"].as_str().expect("dtype");
    let es: usize = dtype[2..].parse().expect("size");
    let n: u64 = shape.iter().product();
    let mut out = vec![0u8; n as usize * es];
    for c in &v.chunks {
        let raw = &bytes[c.offset as usize..(c.offset + c.length) as usize];
        let mut data = raw.to_vec();
        if !za["compressor"].is_null() {
            assert_eq!(za["compressor"]["id"], "zlib");
            let mut d = Vec::new();
            flate2::read::ZlibDecoder::new(raw)
                .read_to_end(&mut d)
                .expect("zlib");
            data = d;
        }
        if let Some(f) = za["filters"].as_array() {
            assert_eq!(f[0]["id"], "shuffle");
            let k = data.len() / es;
            let mut u = vec![0u8; data.len()];
            for i in 0..k {
                for b in 0..es {
                    u[i * es + b] = data[b * k + i];
                }
            }
            data = u;
        }
        let cn: u64 = chunks.iter().product();
        assert_eq!(data.len() as u64, cn * es as u64, "{name}: chunk size");
        // Scatter the chunk (edge chunks are padded in the file, clipped here).
        for flat in 0..cn {
            let mut rem = flat;
            let mut pos = vec![0u64; chunks.len()];
            for d in (0..chunks.len()).rev() {
                pos[d] = c.index[d] * chunks[d] + rem % chunks[d];
                rem /= chunks[d];
            }
            if pos.iter().zip(&shape).any(|(p, s)| p >= s) {
                continue;
            }
            let at = pos.iter().zip(&shape).fold(0u64, |a, (p, s)| a * s + p);
            let src = flat as usize * es;
            out[at as usize * es..at as usize * es + es].copy_from_slice(&data[src..src + es]);
        }
    }
    out
}

#[test]
fn example_files_round_trip_through_the_chunk_index() {
    let t = tempfile::tempdir().expect("tempdir");
    let files = example_files(t.path());
    assert!(!files.is_empty());
    let mut compressed = 0;
    for f in &files {
        let ix = index(f);
        let bytes = std::fs::read(f).expect("read");
        let meta = netcdf::read(f).expect("meta");
        let file = netcdf_reader::NcFile::open(f).expect("open");
        for v in &meta.variables {
            let vc = ix.variable(&v.name).expect("listed");
            assert!(vc.unavailable.is_none(), "{}: {:?}", v.name, vc.unavailable);
            assert_eq!(vc.zattrs["_ARRAY_DIMENSIONS"], serde_json::json!(v.dims));
            if !vc.zarray.as_ref().expect("zarray")["compressor"].is_null() {
                compressed += 1;
            }
            let got = assemble(&bytes, &ix, &v.name);
            let want: Vec<u8> = match v.dtype.as_str() {
                "float" => file
                    .read_variable_as_f64(&v.name)
                    .expect("values")
                    .iter()
                    .flat_map(|&x| (x as f32).to_le_bytes())
                    .collect(),
                "double" => file
                    .read_variable_as_f64(&v.name)
                    .expect("values")
                    .iter()
                    .flat_map(|&x| x.to_le_bytes())
                    .collect(),
                other => panic!("unexpected type {other}"),
            };
            assert!(
                got == want,
                "{}: {}: decoded chunks differ",
                f.display(),
                v.name
            );
            // The time axis and its bounds carry their values (served inline by a
            // dataset's reference set); the data variables do not.
            let record = meta
                .dims
                .iter()
                .find(|d| d.unlimited)
                .map(|d| d.name.clone());
            if v.name == "time" || v.name == "time_bnds" {
                assert_eq!(record.as_deref(), Some("time"));
                let want = file.read_variable_as_f64(&v.name).expect("values");
                assert_eq!(
                    vc.values.as_deref(),
                    Some(want.iter().copied().collect::<Vec<f64>>().as_slice()),
                    "{}: {}",
                    f.display(),
                    v.name
                );
            } else if v.dims.len() > 2 {
                assert!(vc.values.is_none(), "{}: {} inline", f.display(), v.name);
            }
        }
    }
    assert!(compressed > 0, "no deflated variable in the example files");
}

fn first_example(dir: &Path) -> PathBuf {
    example_files(dir).into_iter().next().expect("a file")
}

/// Every variable either described or "not available: …"; never a panic.
fn no_panic(path: &Path) -> Result<ChunkIndex, String> {
    chunk_index(path, &Limits::default()).map_err(|e| e.to_string())
}

#[test]
fn truncated_files_give_errors_not_panics() {
    let t = tempfile::tempdir().expect("tempdir");
    let f = first_example(t.path());
    let bytes = std::fs::read(&f).expect("read");
    for cut in [8, 100, 1000, bytes.len() / 2, bytes.len() - 1] {
        let p = t.path().join(format!("cut{cut}.nc"));
        std::fs::write(&p, &bytes[..cut]).expect("write");
        match no_panic(&p) {
            Err(e) => assert!(!e.is_empty()),
            Ok(ix) => assert!(
                ix.variables.iter().any(|v| v.unavailable.is_some()),
                "cut at {cut}: every variable described in a truncated file"
            ),
        }
    }
}

#[test]
fn a_broken_chunk_table_makes_the_variable_unavailable() {
    let t = tempfile::tempdir().expect("tempdir");
    let f = first_example(t.path());
    let mut bytes = std::fs::read(&f).expect("read");
    // Every v1 B-tree node ("TREE") of the file: group and chunk trees. Break the
    // chunk trees' level field so that the walk meets an impossible tree.
    let ix = index(&f);
    let chunked = ix
        .variables
        .iter()
        .filter(|v| v.chunks.len() > 1 || !v.zarray.as_ref().expect("z")["compressor"].is_null())
        .count();
    assert!(chunked > 0);
    let mut broke = 0;
    for i in 0..bytes.len().saturating_sub(6) {
        if &bytes[i..i + 4] == b"TREE" && bytes[i + 4] == 1 {
            bytes[i..i + 4].copy_from_slice(b"XXXX");
            broke += 1;
        }
    }
    assert!(broke > 0, "no chunk B-tree in the example file");
    let p = t.path().join("broken.nc");
    std::fs::write(&p, &bytes).expect("write");
    let ix = no_panic(&p).expect("metadata still readable");
    let bad: Vec<_> = ix
        .variables
        .iter()
        .filter_map(|v| v.unavailable.clone())
        .collect();
    assert!(!bad.is_empty(), "a broken B-tree went unnoticed");
    for why in bad {
        assert!(why.starts_with("not available: "), "{why}");
    }
}

#[test]
fn chunk_offsets_past_the_end_of_the_file_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let f = first_example(t.path());
    let ix = index(&f);
    let mut bytes = std::fs::read(&f).expect("read");
    let mut patched = 0;
    for v in &ix.variables {
        for c in &v.chunks {
            let pat = c.offset.to_le_bytes();
            let huge = (bytes.len() as u64 + 1_000_000).to_le_bytes();
            let mut i = 0;
            while i + 8 <= bytes.len() {
                if bytes[i..i + 8] == pat {
                    bytes[i..i + 8].copy_from_slice(&huge);
                    patched += 1;
                }
                i += 1;
            }
        }
    }
    assert!(patched > 0);
    let p = t.path().join("past.nc");
    std::fs::write(&p, &bytes).expect("write");
    match no_panic(&p) {
        Err(e) => assert!(!e.is_empty()),
        Ok(ix) => {
            let why: Vec<String> = ix
                .variables
                .iter()
                .filter_map(|v| v.unavailable.clone())
                .collect();
            assert!(
                why.iter().any(|w| w.contains("past the end")),
                "no variable refused: {why:?}"
            );
        }
    }
}

#[test]
fn an_unknown_filter_makes_the_variable_unavailable() {
    use netcdf_writer::{NcFileBuilder, NcWriteFormat, NcWriteOptions};
    let t = tempfile::tempdir().expect("tempdir");
    let mut b = NcFileBuilder::new();
    let x = b.add_dimension("x", 16).expect("dim");
    let v = b.add_variable::<f32>("v", &[x]).expect("var");
    b.set_variable_chunking(v, [4]).expect("chunking");
    b.set_variable_fletcher32(v, true).expect("fletcher32");
    let w = b.add_variable::<f32>("w", &[x]).expect("var");
    let vals: Vec<f32> = (0..16).map(|i| i as f32).collect();
    b.write_variable(v, &vals).expect("write");
    b.write_variable(w, &vals).expect("write");
    let p = t.path().join("fletcher.nc");
    let (_, bytes) = b
        .to_vec(NcWriteOptions {
            format: NcWriteFormat::Nc4,
        })
        .expect("finish");
    std::fs::write(&p, bytes).expect("write");
    let ix = index(&p);
    let why = ix.variable("v").and_then(|v| v.unavailable.clone());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.starts_with("not available: HDF5 filter 3")),
        "{why:?}"
    );
    assert!(ix.variable("w").is_some_and(|v| v.unavailable.is_none()));
}
