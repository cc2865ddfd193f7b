//! How a file is cut into segments: fixed size, FastCDC (v2020, the
//! `fastcdc` crate's cut function) or a Rabin fingerprint over a 31-byte
//! window (as carepo uses). Content-defined schemes cut where the content
//! says, so an insertion near the start of a file moves only the chunks it
//! touches; the rest keep their bytes and their hashes.
//!
//! Every scheme is a pure function of the bytes from the chunk's start: the
//! ingest loop hands [`Cutter::cut`] at least `max` bytes (or everything
//! left at the end of the input) and gets the chunk's length back, so
//! chunking runs in the same streaming pass as copying and hashing, in
//! constant memory.

use std::fmt;
use std::str::FromStr;

/// Largest chunk (segment) a content-defined scheme may produce: a Data
/// with this much content and a typical name fits the 8800-byte limit.
pub const MAX_CHUNK: u32 = 8192;

/// A chunking scheme and its parameters; written as `fixed:<bytes>`,
/// `fastcdc:<min>:<avg>:<max>` or `rabin:<min>:<avg>:<max>` (the form kept
/// in [`crate::FileMeta::chunking`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunking {
    /// Every segment has the same size (the last may be shorter).
    Fixed(u32),
    /// FastCDC 2020 (gear hash, normalized chunking level 1).
    FastCdc {
        /// Smallest chunk (except the last).
        min: u32,
        /// Target average.
        avg: u32,
        /// Largest chunk.
        max: u32,
    },
    /// Rabin fingerprint over a 31-byte window; a boundary where
    /// `fingerprint mod avg == avg - 1`, not before `min`, at `max` at the latest.
    Rabin {
        /// Smallest chunk (except the last).
        min: u32,
        /// Target average.
        avg: u32,
        /// Largest chunk.
        max: u32,
    },
}

/// Default content-defined sizes: 3 KiB / 5 KiB / 8 KiB (about 6 KiB on
/// average on random data). The 8 KiB ceiling keeps every Data under the
/// 8800-byte packet limit of python-ndn, NDNts and NFD; against 1/4/8 KiB
/// (4.8 KiB on average) it makes a quarter fewer packets for nearly the same
/// sharing between similar files (`granary dedup`: 47.95% against 48.44% on
/// a file with four insertions). A 4 KiB floor (4/6/8) cut packets by a
/// third but many chunks then end at the 8 KiB ceiling, a cut that does not
/// resynchronise after an insertion: 36% on the same pair (bench/RESULTS.md,
/// "Defaults").
pub const DEFAULT_CDC: (u32, u32, u32) = (3072, 5120, 8192);

impl Default for Chunking {
    fn default() -> Self {
        Chunking::Fixed(crate::DEFAULT_SEGMENT_SIZE)
    }
}

impl Chunking {
    /// FastCDC with the default sizes.
    pub fn fastcdc() -> Chunking {
        let (min, avg, max) = DEFAULT_CDC;
        Chunking::FastCdc { min, avg, max }
    }

    /// Rabin with the default sizes.
    pub fn rabin() -> Chunking {
        let (min, avg, max) = DEFAULT_CDC;
        Chunking::Rabin { min, avg, max }
    }

    /// A scheme by kind (`fixed`, `fastcdc`, `rabin`) and sizes; `None`
    /// sizes take the defaults (for `fixed`, `max` or else `avg` is the
    /// segment size). Checked with [`Chunking::validate`].
    pub fn from_parts(
        kind: &str,
        min: Option<u32>,
        avg: Option<u32>,
        max: Option<u32>,
    ) -> Result<Chunking, String> {
        let (dmin, davg, dmax) = DEFAULT_CDC;
        let c = match kind {
            "fixed" => Chunking::Fixed(max.or(avg).unwrap_or(crate::DEFAULT_SEGMENT_SIZE)),
            "fastcdc" => Chunking::FastCdc {
                min: min.unwrap_or(dmin),
                avg: avg.unwrap_or(davg),
                max: max.unwrap_or(dmax),
            },
            "rabin" => Chunking::Rabin {
                min: min.unwrap_or(dmin),
                avg: avg.unwrap_or(davg),
                max: max.unwrap_or(dmax),
            },
            other => {
                return Err(format!(
                    "unknown chunking {other:?} (fixed, fastcdc, rabin)"
                ))
            }
        };
        c.validate()?;
        Ok(c)
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Chunking::Fixed(s) if (1..=1 << 20).contains(&s) => Ok(()),
            Chunking::Fixed(s) => Err(format!("segment size {s} is not in 1..=1048576")),
            Chunking::FastCdc { min, avg, max } | Chunking::Rabin { min, avg, max } => {
                if !(64 <= min && min < avg && avg < max && max <= MAX_CHUNK) {
                    return Err(format!(
                        "chunk sizes need 64 <= min < avg < max <= {MAX_CHUNK} (got {min}/{avg}/{max})"
                    ));
                }
                if !(256..=1 << 22).contains(&avg) {
                    return Err(format!("average chunk size {avg} is not in 256..=4194304"));
                }
                Ok(())
            }
        }
    }

    /// True for fixed-size segments.
    pub fn is_fixed(&self) -> bool {
        matches!(self, Chunking::Fixed(_))
    }

    /// The largest segment this scheme produces.
    pub fn max_len(&self) -> u32 {
        match *self {
            Chunking::Fixed(s) => s,
            Chunking::FastCdc { max, .. } | Chunking::Rabin { max, .. } => max,
        }
    }

    /// A cutter for this scheme (precomputed tables and masks).
    pub fn cutter(&self) -> Cutter {
        match *self {
            Chunking::Fixed(s) => Cutter::Fixed(s as usize),
            Chunking::FastCdc { min, avg, max } => {
                let (mask_s, mask_l) = fastcdc::v2020::select_masks(
                    avg as usize,
                    fastcdc::v2020::Normalization::Level1,
                );
                Cutter::FastCdc {
                    min: min as usize,
                    avg: avg as usize,
                    max: max as usize,
                    mask_s,
                    mask_l,
                }
            }
            Chunking::Rabin { min, avg, max } => Cutter::Rabin {
                min: min as usize,
                avg: avg as u64,
                max: max as usize,
                tables: rabin_tables(),
            },
        }
    }
}

impl fmt::Display for Chunking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Chunking::Fixed(s) => write!(f, "fixed:{s}"),
            Chunking::FastCdc { min, avg, max } => write!(f, "fastcdc:{min}:{avg}:{max}"),
            Chunking::Rabin { min, avg, max } => write!(f, "rabin:{min}:{avg}:{max}"),
        }
    }
}

impl FromStr for Chunking {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |i: usize| -> Result<Option<u32>, String> {
            parts
                .get(i)
                .map(|p| p.parse::<u32>().map_err(|_| format!("bad chunking {s:?}")))
                .transpose()
        };
        match (parts[0], parts.len()) {
            ("fixed", 1) => Chunking::from_parts("fixed", None, None, None),
            ("fixed", 2) => Chunking::from_parts("fixed", None, None, num(1)?),
            (k @ ("fastcdc" | "rabin"), 1) => Chunking::from_parts(k, None, None, None),
            (k @ ("fastcdc" | "rabin"), 4) => Chunking::from_parts(k, num(1)?, num(2)?, num(3)?),
            _ => Err(format!(
                "bad chunking {s:?} (fixed[:SIZE], fastcdc[:MIN:AVG:MAX], rabin[:MIN:AVG:MAX])"
            )),
        }
    }
}

/// A ready-to-run chunker.
#[derive(Debug, Clone)]
pub enum Cutter {
    /// Fixed size.
    Fixed(usize),
    /// FastCDC 2020.
    FastCdc {
        /// Minimum.
        min: usize,
        /// Average.
        avg: usize,
        /// Maximum.
        max: usize,
        /// Strict mask (below the average).
        mask_s: u64,
        /// Relaxed mask (above the average).
        mask_l: u64,
    },
    /// Rabin, 31-byte window.
    Rabin {
        /// Minimum.
        min: usize,
        /// Average (the modulus).
        avg: u64,
        /// Maximum.
        max: usize,
        /// Shift-out and window-removal tables.
        tables: std::sync::Arc<RabinTables>,
    },
}

impl Cutter {
    /// The most bytes [`Cutter::cut`] may need to see.
    pub fn max(&self) -> usize {
        match self {
            Cutter::Fixed(s) => *s,
            Cutter::FastCdc { max, .. } | Cutter::Rabin { max, .. } => *max,
        }
    }

    /// Length of the chunk starting at `data[0]`. `data` holds at least
    /// [`Cutter::max`] bytes, or every byte left in the input. Never 0
    /// unless `data` is empty.
    pub fn cut(&self, data: &[u8]) -> usize {
        match self {
            Cutter::Fixed(s) => data.len().min(*s),
            Cutter::FastCdc {
                min,
                avg,
                max,
                mask_s,
                mask_l,
            } => {
                let (_, n) = fastcdc::v2020::cut(
                    data,
                    *min,
                    *avg,
                    *max,
                    *mask_s,
                    *mask_l,
                    mask_s << 1,
                    mask_l << 1,
                );
                n.clamp(data.len().min(1), data.len())
            }
            Cutter::Rabin {
                min,
                avg,
                max,
                tables,
            } => rabin_cut(tables, data, *min, *avg, *max),
        }
    }

    /// Every chunk length of an in-memory buffer (for analysis and tests).
    pub fn chunks(&self, data: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < data.len() {
            let n = self.cut(&data[pos..]);
            out.push(n);
            pos += n;
        }
        out
    }
}

/// Cuts everything `reader` gives into chunks, streaming (a buffer of
/// 1 MiB plus one chunk), calling `each` with every chunk in order.
/// Returns the byte count.
pub fn for_each_chunk(
    mut reader: impl std::io::Read,
    cutter: &Cutter,
    mut each: impl FnMut(&[u8]),
) -> std::io::Result<u64> {
    let max = cutter.max();
    let cap = ((1usize << 20) / max).max(1) * max + max;
    let mut buf = vec![0u8; cap];
    let (mut filled, mut total, mut eof) = (0usize, 0u64, false);
    loop {
        while !eof && filled < cap {
            match reader.read(&mut buf[filled..]) {
                Ok(0) => eof = true,
                Ok(n) => {
                    filled += n;
                    total += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut pos = 0;
        while pos < filled && (eof || filled - pos >= max) {
            let n = cutter.cut(&buf[pos..filled]);
            each(&buf[pos..pos + n]);
            pos += n;
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
        if eof && filled == 0 {
            return Ok(total);
        }
    }
}

// --- Rabin fingerprint -------------------------------------------------
//
// The fingerprint of a byte string is the string read as a polynomial over
// GF(2) (8 coefficients per byte), reduced modulo an irreducible polynomial
// P of degree 53 (the one LBFS published). Appending a byte b maps f to
// f·x^8 + b mod P; the 8 bits that overflow degree 53 are reduced with a
// 256-entry table. Rolling over a window of W = 31 bytes: when byte b_out
// leaves, its term b_out·x^(8W) mod P is XORed out with a second table. The
// fingerprint then depends only on the last 31 bytes, so chunk boundaries
// depend only on local content: an insertion shifts boundaries only near it.
// Degree 53 keeps every intermediate value inside a u64.

/// Bytes in the rolling window.
pub const RABIN_WINDOW: usize = 31;
const POLY: u64 = 0x003D_A335_8B4D_C173;
const DEG: u32 = 53;

/// Precomputed tables of the Rabin fingerprint.
#[derive(Debug)]
pub struct RabinTables {
    /// `shift[h]` = `h·x^53 mod P` for the top byte `h` shifted out.
    shift: [u64; 256],
    /// `out[b]` = `b·x^(8·31) mod P`, the term of a byte leaving the window.
    out: [u64; 256],
}

/// `x mod P` for a polynomial `x` of degree < 64.
fn poly_mod(mut x: u64) -> u64 {
    for bit in (DEG..64).rev() {
        if x & (1 << bit) != 0 {
            x ^= POLY << (bit - DEG);
        }
    }
    x
}

fn rabin_tables() -> std::sync::Arc<RabinTables> {
    static T: std::sync::OnceLock<std::sync::Arc<RabinTables>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut shift = [0u64; 256];
        for (h, s) in shift.iter_mut().enumerate() {
            // h·x^53 has degree < 61: reduce it.
            *s = poly_mod((h as u64) << DEG);
        }
        let mut t = RabinTables {
            shift,
            out: [0; 256],
        };
        for b in 0..256usize {
            let mut f = b as u64;
            for _ in 0..RABIN_WINDOW {
                f = append(&t, f, 0);
            }
            t.out[b] = f;
        }
        std::sync::Arc::new(t)
    })
    .clone()
}

#[inline(always)]
fn append(t: &RabinTables, f: u64, b: u8) -> u64 {
    let top = (f >> (DEG - 8)) as usize;
    (((f << 8) | b as u64) & ((1u64 << DEG) - 1)) ^ t.shift[top]
}

/// The fingerprint of `window` (the last [`RABIN_WINDOW`] bytes seen), from scratch.
pub fn rabin_fingerprint(window: &[u8]) -> u64 {
    let t = rabin_tables();
    window.iter().fold(0, |f, &b| append(&t, f, b))
}

fn rabin_cut(t: &RabinTables, data: &[u8], min: usize, avg: u64, max: usize) -> usize {
    let (min, avg) = (min.max(1), avg.max(2));
    let end = data.len().min(max.max(min));
    if end <= min {
        return end;
    }
    // The window ending at byte i (inclusive) decides a cut after byte i;
    // the first candidate is a chunk of `min` bytes.
    let start = min - RABIN_WINDOW.min(min);
    let mut f = 0u64;
    for &b in &data[start..min] {
        f = append(t, f, b);
    }
    // `f mod avg == avg - 1`; a mask when avg is a power of two (the usual
    // case), a division otherwise.
    if avg.is_power_of_two() {
        let m = avg - 1;
        if f & m == m {
            return min;
        }
        if min >= RABIN_WINDOW {
            let (ins, outs) = (
                &data[min..end],
                &data[min - RABIN_WINDOW..end - RABIN_WINDOW],
            );
            for (k, (&b, &o)) in ins.iter().zip(outs).enumerate() {
                f = append(t, f, b) ^ t.out[o as usize];
                if f & m == m {
                    return min + k + 1;
                }
            }
            return end;
        }
    } else if f % avg == avg - 1 {
        return min;
    }
    for i in min..end {
        f = append(t, f, data[i]);
        if i >= RABIN_WINDOW {
            f ^= t.out[data[i - RABIN_WINDOW] as usize];
        }
        if f % avg == avg - 1 {
            return i + 1;
        }
    }
    end
}

/// Deterministic pseudo-random bytes (`fastrand` seeded with `seed`):
/// content that does not repeat by accident, so chunk boundaries fall as in
/// real data. For tests, benchmarks and examples of chunking; one generator
/// for all.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    fastrand::Rng::with_seed(seed).fill(&mut v);
    v
}

/// Writes [`noise`]`(len, seed)` to the file at `path` (created or
/// truncated), streaming in 1 MiB blocks: large test and benchmark files
/// without holding them in memory.
pub fn write_noise(path: &std::path::Path, len: u64, seed: u64) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut rng = fastrand::Rng::with_seed(seed);
    // Whole multiples of 8 bytes per block: `fill` draws 8 bytes at a time,
    // so the blocks continue one stream, exactly as `noise` draws it.
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill(&mut buf[..n]);
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_noise_streams_what_noise_returns() {
        let dir = std::env::temp_dir().join(format!("granary-noise-{}", std::process::id()));
        let len = (1 << 20) + 12_345;
        write_noise(&dir, len as u64, 9).unwrap();
        let got = std::fs::read(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(got, noise(len, 9));
    }

    #[test]
    fn parse_and_print() {
        for s in [
            "fixed:8192",
            "fastcdc:1024:4096:8192",
            "rabin:2048:4096:8192",
        ] {
            assert_eq!(s.parse::<Chunking>().unwrap().to_string(), s);
        }
        assert_eq!("fastcdc".parse::<Chunking>().unwrap(), Chunking::fastcdc());
        for bad in [
            "fastcdc:1:2:3",
            "rabin:4096:1024:8192",
            "fastcdc:1024:4096:9000",
            "fixed:0",
            "zip",
            "fastcdc:1:2",
        ] {
            assert!(bad.parse::<Chunking>().is_err(), "{bad}");
        }
    }

    #[test]
    fn rolling_equals_from_scratch() {
        let t = rabin_tables();
        let data = noise(5000, 7);
        let mut f = 0u64;
        for (i, &b) in data.iter().enumerate() {
            f = append(&t, f, b);
            if i >= RABIN_WINDOW {
                f ^= t.out[data[i - RABIN_WINDOW] as usize];
            }
            if i + 1 >= RABIN_WINDOW {
                assert_eq!(
                    f,
                    rabin_fingerprint(&data[i + 1 - RABIN_WINDOW..=i]),
                    "at {i}"
                );
            }
        }
        // Degree < 53 always.
        assert!(f < 1 << DEG);
    }

    #[test]
    fn sizes_stay_in_bounds_and_cover_the_input() {
        let data = noise(3 << 20, 1);
        for c in [
            Chunking::fastcdc(),
            Chunking::rabin(),
            Chunking::Fixed(8192),
        ] {
            let lens = c.cutter().chunks(&data);
            assert_eq!(lens.iter().sum::<usize>(), data.len());
            let (body, _) = lens.split_at(lens.len() - 1);
            let (min, max) = match c {
                Chunking::Fixed(s) => (s, s),
                Chunking::FastCdc { min, max, .. } | Chunking::Rabin { min, max, .. } => (min, max),
            };
            assert!(body.iter().all(|&l| l >= min as usize && l <= max as usize));
            let avg = data.len() / lens.len();
            // Within a reasonable band around the target for random data.
            assert!((2000..=8192).contains(&avg), "{c}: average {avg}");
        }
    }

    #[test]
    fn streaming_matches_in_memory() {
        let data = noise(5 << 20, 4);
        for c in [
            Chunking::fastcdc(),
            Chunking::rabin(),
            Chunking::Fixed(8000),
        ] {
            let k = c.cutter();
            let mut lens = Vec::new();
            // A reader that returns odd-sized pieces.
            struct Odd<'a>(&'a [u8], usize);
            impl std::io::Read for Odd<'_> {
                fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                    self.1 = self.1 % 7919 + 1;
                    let n = b.len().min(self.0.len()).min(self.1 * 13);
                    b[..n].copy_from_slice(&self.0[..n]);
                    self.0 = &self.0[n..];
                    Ok(n)
                }
            }
            let n = for_each_chunk(Odd(&data, 1), &k, |ch| lens.push(ch.len())).unwrap();
            assert_eq!(n, data.len() as u64);
            assert_eq!(lens, k.chunks(&data), "{c}");
        }
    }

    #[test]
    fn degenerate_input() {
        for c in [Chunking::fastcdc(), Chunking::rabin()] {
            let k = c.cutter();
            assert!(k.chunks(&[]).is_empty());
            assert_eq!(k.chunks(&[9]), vec![1]);
            let zeros = vec![0u8; 100_000];
            assert!(k.chunks(&zeros).iter().all(|&l| l <= 8192));
        }
    }
}
