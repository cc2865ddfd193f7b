//! Bad and hostile files: each gives an error (or, for invalid UTF-8, a flagged read)
//! within a second and without a large allocation. Peak heap use is measured by a
//! counting global allocator; tests in this binary take a lock so that one read is
//! measured at a time.

use crate::netcdf_support as support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use granary_science::netcdf::{self, Format, Limits, NcError, NcMeta, ReadAt};

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed)
                + (new_size - layout.size());
            PEAK.fetch_max(now, Ordering::Relaxed);
        } else {
            CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Largest extra heap one read of a small hostile file may take.
const MAX_EXTRA_HEAP: usize = 32 << 20;

/// Reads `path`, asserting it was answered on the file's structure (not
/// stopped by the read's time bound, which a loaded machine could reach)
/// with under `MAX_EXTRA_HEAP` more heap.
fn measured_read(path: &Path) -> Result<NcMeta, NcError> {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    let r = netcdf::read(path);
    let took = t.elapsed();
    let extra = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    assert!(
        !matches!(r, Err(NcError::Timeout(_))),
        "{}: only the time bound stopped it ({took:?})",
        path.display()
    );
    assert!(
        extra < MAX_EXTRA_HEAP,
        "{}: peak heap +{extra} bytes",
        path.display()
    );
    r
}

fn expect_err(path: &Path, what: &str) -> NcError {
    match measured_read(path) {
        Ok(m) => panic!("{what}: read succeeded: {:?} {:?}", m.format, m.dims),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            e
        }
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn fixture(dir: &Path, kind: &str) -> Vec<u8> {
    let cdl = support::data_dir().join("tas_360day.cdl");
    let out = dir.join(format!("good.{kind}.nc"));
    support::ncgen(kind, &cdl, &out);
    std::fs::read(out).unwrap()
}

#[test]
fn truncated_files_are_errors() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for kind in support::KINDS {
        let good = fixture(dir.path(), kind);
        let n = good.len();
        let mut cuts = vec![0, 1, 3, 4, 7, 8, 12, 16, 24, 32, 48, 64, 100, 200, 300];
        cuts.extend([
            n / 8,
            n / 4,
            n / 3,
            n / 2,
            2 * n / 3,
            3 * n / 4,
            n - 64,
            n - 8,
            n - 1,
        ]);
        for cut in cuts.into_iter().filter(|&c| c < n) {
            let p = write(dir.path(), "cut.nc", &good[..cut]);
            let e = expect_err(&p, &format!("{kind} cut at {cut} of {n}"));
            if cut < 4 {
                assert!(matches!(e, NcError::NotNetcdf), "{kind} cut {cut}: {e}");
            }
        }
    }
}

#[test]
fn empty_and_garbage_are_errors() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let e = expect_err(&write(dir.path(), "empty.nc", b""), "empty");
    assert!(matches!(e, NcError::NotNetcdf), "{e}");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..40 {
        let len = 16 + (rnd() % 4096) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        let prefix: &[u8] = match round % 5 {
            0 => b"CDF\x01",
            1 => b"CDF\x02",
            2 => b"CDF\x05",
            3 => b"\x89HDF\r\n\x1a\n",
            _ => b"",
        };
        bytes[..prefix.len()].copy_from_slice(prefix);
        let p = write(dir.path(), "garbage.nc", &bytes);
        let e = expect_err(&p, &format!("garbage round {round}"));
        if prefix.is_empty() {
            assert!(matches!(e, NcError::NotNetcdf), "{e}");
        }
    }
}

/// An in-memory file that records the byte ranges the reader asks for.
struct Recording {
    bytes: Vec<u8>,
    asked: Mutex<Vec<(u64, usize)>>,
}

impl ReadAt for Recording {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.asked.lock().unwrap().push((offset, len));
        let s = usize::try_from(offset).unwrap_or(usize::MAX);
        match s.checked_add(len).and_then(|e| self.bytes.get(s..e)) {
            Some(b) => Ok(b.to_vec()),
            None => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// Reads `bytes` through a [`Recording`] source: the result, and for each byte whether
/// the reader asked for it.
fn read_recording(bytes: &[u8]) -> (Result<NcMeta, NcError>, Vec<bool>) {
    let src = Arc::new(Recording {
        bytes: bytes.to_vec(),
        asked: Mutex::new(Vec::new()),
    });
    let r = netcdf::read_from(src.clone(), &Limits::default());
    let mut read = vec![false; bytes.len()];
    for &(offset, len) in src.asked.lock().unwrap().iter() {
        let s = offset as usize;
        read[s..s + len].iter_mut().for_each(|x| *x = true);
    }
    (r, read)
}

/// Results compared through their debug form (a NaN compares equal to itself there).
fn same(a: &NcMeta, b: &NcMeta) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// Flipping any header byte after the signature gives, for every flip, a clean error or
/// a consistent result, never a panic (caught or not). Consistent: a flip in a byte the
/// reader never asked for when reading the intact file reads exactly as the intact file
/// (the reader only sees what it asks for); any other result is the same when read
/// again, and of the format the signature announces.
#[test]
fn flipped_header_bytes_never_crash() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (mut errors, mut reads, mut unread) = (0, 0, 0);
    for kind in support::KINDS {
        let good = fixture(dir.path(), kind);
        let (intact, read) = read_recording(&good);
        let intact = intact.unwrap_or_else(|e| panic!("{kind}: the intact file: {e}"));
        let by_path = measured_read(&write(dir.path(), "intact.nc", &good)).unwrap();
        assert!(
            same(&intact, &by_path),
            "{kind}: by path and in memory differ"
        );
        let announced = netcdf::sniff(&good);
        let span = good.len().min(1200);
        let step = if kind.starts_with("netCDF") { 3 } else { 1 };
        let mut flipped_read = 0;
        for i in (4..span).step_by(step) {
            for mask in [0xff_u8, 0x80] {
                let mut b = good.clone();
                b[i] ^= mask;
                let p = write(dir.path(), "flip.nc", &b);
                let what = format!("{kind}: byte {i} ^ {mask:#04x}");
                let r = std::panic::catch_unwind(|| measured_read(&p)).unwrap_or_else(|_| {
                    panic!("{what}: the read panicked or broke a bound (above)")
                });
                if !read[i] {
                    unread += 1;
                    match &r {
                        Ok(m) if same(m, &intact) => {}
                        other => panic!("{what}, a byte never read, changed the result: {other:?}"),
                    }
                    continue;
                }
                flipped_read += 1;
                match r {
                    Err(NcError::Panic(e)) => panic!("{what}: the parser panicked: {e}"),
                    Err(e) => {
                        assert!(!e.to_string().is_empty(), "{what}: empty error");
                        errors += 1;
                    }
                    Ok(m) => {
                        reads += 1;
                        let again = measured_read(&p)
                            .unwrap_or_else(|e| panic!("{what}: read once, then {e}"));
                        assert!(same(&m, &again), "{what}: two reads differ");
                        let family = match m.format {
                            Format::Netcdf4 | Format::Netcdf4Classic => Format::Netcdf4,
                            f => f,
                        };
                        assert_eq!(Some(family), announced, "{what}: format {:?}", m.format);
                    }
                }
            }
        }
        assert!(
            flipped_read > 0,
            "{kind}: no flipped byte is one the reader reads"
        );
    }
    eprintln!(
        "flipped bytes: {errors} errors, {reads} still readable, {unread} never read (read as intact)"
    );
}

fn be32(v: u32) -> [u8; 4] {
    v.to_be_bytes()
}

#[test]
fn cdf1_header_with_absurd_declarations() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // numrecs 0; one dimension "x" of 2^31-1; a global attribute list claiming 2^30 items.
    let mut h = b"CDF\x01".to_vec();
    h.extend(be32(0));
    h.extend(be32(0x0A)); // NC_DIMENSION
    h.extend(be32(1));
    h.extend(be32(1));
    h.extend(b"x\0\0\0");
    h.extend(be32(0x7fff_ffff));
    h.extend(be32(0x0C)); // NC_ATTRIBUTE
    h.extend(be32(1 << 30));
    h.resize(200, 0);
    let e = expect_err(&write(dir.path(), "absurd.nc", &h), "2^30 attributes");
    assert!(matches!(e, NcError::Malformed(_)), "{e}");

    // One attribute whose value claims 2^31-1 chars.
    let mut h = b"CDF\x01".to_vec();
    h.extend(be32(0));
    h.extend([0; 8]); // no dimensions
    h.extend(be32(0x0C));
    h.extend(be32(1));
    h.extend(be32(1));
    h.extend(b"a\0\0\0");
    h.extend(be32(2)); // NC_CHAR
    h.extend(be32(0x7fff_ffff));
    h.resize(200, 0);
    expect_err(&write(dir.path(), "longattr.nc", &h), "2^31 chars");

    // A variable over the huge dimension, with lat/lon-looking names: not read.
    let mut h = b"CDF\x01".to_vec();
    h.extend(be32(0));
    h.extend(be32(0x0A));
    h.extend(be32(1));
    h.extend(be32(3));
    h.extend(b"lat\0");
    h.extend(be32(0x7fff_ffff));
    h.extend([0; 8]); // no global attributes
    h.extend(be32(0x0B)); // NC_VARIABLE
    h.extend(be32(1));
    h.extend(be32(3));
    h.extend(b"lat\0");
    h.extend(be32(1)); // one dimension
    h.extend(be32(0)); // dim id 0
    h.extend([0; 8]); // no attributes
    h.extend(be32(6)); // NC_DOUBLE
    h.extend(be32(0xffff_fff8)); // vsize
    h.extend(be32(200)); // begin
    h.resize(200, 0);
    expect_err(
        &write(dir.path(), "hugevar.nc", &h),
        "2^31 doubles in 200 bytes",
    );
}

#[test]
fn invalid_utf8_attribute_is_read_lossily_and_flagged() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for kind in ["classic", "64-bit-offset", "cdf5"] {
        let mut b = fixture(dir.path(), kind);
        let needle = b"CMIP-6.2";
        let at = b.windows(needle.len()).position(|w| w == needle).unwrap();
        b[at + 4] = 0xff;
        b[at + 5] = 0xfe;
        let m = measured_read(&write(dir.path(), "utf8.nc", &b)).expect("lossy read");
        let conv = m.global_strings()["Conventions"].clone();
        assert!(conv.contains('\u{FFFD}'), "{conv}");
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains("Conventions") && w.contains("UTF-8")),
            "{:?}",
            m.warnings
        );
    }
}

// ---- HDF5 structure corruption, with checksums recomputed so the parser follows it ----

fn lookup3(b: &[u8]) -> [u8; 4] {
    hdf5_reader::checksum::jenkins_lookup3(b).to_le_bytes()
}

/// Positions of every version-2 object header ("OHDR") and its checksummed chunk end.
fn object_headers(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for start in 0..b.len().saturating_sub(8) {
        if &b[start..start + 4] != b"OHDR" || b[start + 4] != 2 {
            continue;
        }
        let flags = b[start + 5];
        let mut pos = start + 6;
        if flags & 0x20 != 0 {
            pos += 16;
        }
        if flags & 0x10 != 0 {
            pos += 4;
        }
        let width = 1usize << (flags & 3);
        let mut size = 0usize;
        for k in 0..width {
            size |= usize::from(b[pos + k]) << (8 * k);
        }
        let end = pos + width + size;
        if end + 4 <= b.len() {
            out.push((start, end));
        }
    }
    out
}

#[test]
fn hdf5_cycles_and_bad_addresses_are_errors() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for kind in ["netCDF-4", "netCDF-4-classic"] {
        let good = fixture(dir.path(), kind);
        assert_eq!(good[8], 2, "expected a version-2 superblock");
        let root = u64::from_le_bytes(good[36..44].try_into().unwrap());
        let headers = object_headers(&good);
        assert!(headers.len() > 3, "{kind}: object headers {headers:?}");
        let addrs: Vec<u64> = headers.iter().map(|h| h.0 as u64).collect();
        assert!(addrs.contains(&root));

        // 1. Superblock root address moved: to the superblock, into the data, past EOF,
        //    to the last bytes; checksum fixed.
        for bad in [
            0u64,
            8,
            good.len() as u64 / 2,
            good.len() as u64 - 4,
            u64::MAX - 7,
        ] {
            let mut b = good.clone();
            b[36..44].copy_from_slice(&bad.to_le_bytes());
            let sum = lookup3(&b[..44]);
            b[44..48].copy_from_slice(&sum);
            let p = write(dir.path(), "root.nc", &b);
            expect_err(&p, &format!("{kind}: root object header at {bad}"));
        }

        // 2. Cycles: every link in the root group that points at a child object header
        //    is redirected to the root itself (root -> "tas" = root -> ...), one at a time
        //    and all at once; and children pointed at each other.
        let (rs, re) = *headers.iter().find(|h| h.0 as u64 == root).unwrap();
        let mut redirected = 0;
        let mut all = good.clone();
        for i in rs + 4..re - 8 {
            let v = u64::from_le_bytes(good[i..i + 8].try_into().unwrap());
            if v != root && addrs.contains(&v) {
                let mut b = good.clone();
                b[i..i + 8].copy_from_slice(&root.to_le_bytes());
                all[i..i + 8].copy_from_slice(&root.to_le_bytes());
                let sum = lookup3(&b[rs..re]);
                b[re..re + 4].copy_from_slice(&sum);
                let p = write(dir.path(), "cycle.nc", &b);
                // A variable that is really the root group: an error, never a loop.
                match measured_read(&p) {
                    Err(_) => {}
                    Ok(m) => assert!(
                        m.variables.len() < 64,
                        "{kind}: cycle expanded to {} variables",
                        m.variables.len()
                    ),
                }
                redirected += 1;
            }
        }
        assert!(
            redirected >= 3,
            "{kind}: only {redirected} links found to redirect"
        );
        let sum = lookup3(&all[rs..re]);
        all[re..re + 4].copy_from_slice(&sum);
        let p = write(dir.path(), "cycle-all.nc", &all);
        if let Ok(m) = measured_read(&p) {
            assert!(
                m.variables.len() < 64,
                "{kind}: {} variables",
                m.variables.len()
            );
        }

        // 3. The same address corruptions without fixing the checksum: an error.
        let mut b = good.clone();
        b[36..44].copy_from_slice(&0u64.to_le_bytes());
        expect_err(&write(dir.path(), "nosum.nc", &b), "superblock checksum");
    }
}

/// A source that is slow on every read: the deadline stops the read, whatever the
/// parser is doing, and `read_from` returns promptly with a timeout.
struct Slow(Vec<u8>);

impl ReadAt for Slow {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        std::thread::sleep(Duration::from_millis(40));
        let s = offset as usize;
        Ok(self.0[s..s + len].to_vec())
    }
}

#[test]
fn time_bound_stops_a_slow_or_looping_parse() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let good = fixture(dir.path(), "netCDF-4");
    let limits = Limits {
        timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let t = Instant::now();
    let r = netcdf::read_from(Arc::new(Slow(good.clone())), &limits);
    let took = t.elapsed();
    assert!(matches!(r, Err(NcError::Timeout(_))), "{r:?}");
    eprintln!("stopped by the 300 ms bound after {took:?}");
    // The same source with a generous bound reads fine: the bound is what stopped it.
    let ok = netcdf::read_from(
        Arc::new(Slow(good)),
        &Limits {
            timeout: Duration::from_secs(60),
            ..Limits::default()
        },
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn read_budget_is_enforced() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.nc");
    std::fs::write(&p, fixture(dir.path(), "netCDF-4")).unwrap();
    let tight = Limits {
        max_bytes_read: 2000,
        ..Limits::default()
    };
    let r = netcdf::read_with(&p, &tight);
    assert!(matches!(r, Err(NcError::Limit(_))), "{r:?}");
    assert!(netcdf::read(&p).is_ok());
}
