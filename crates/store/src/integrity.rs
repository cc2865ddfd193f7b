//! Integrity of stored versions: the per-segment check against the hashes
//! taken at ingest (`@<v>.hashes`), damage records (`@<v>.damaged`, JSON,
//! moved by rename and removed with the version like every file beside
//! it), and the whole-version re-hash that `granary repo scrub` runs.
//!
//! A version is *damaged* when its data file no longer matches the hashes
//! taken when it was published: something outside the repository changed
//! the file (the repository itself never rewrites a published file; `put`
//! makes a new version, `mv` renames, `rm` removes). The record names each
//! bad segment (number, byte offset, length, expected and found SHA-256),
//! so an operator can see what is wrong and `scrub --repair-from` knows
//! what to fetch.

use std::fs;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use granary_packet::Name;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{extra_path, hashes_path, write_atomic, Entry, Error, Result, Store};

/// Suffix of a version's damage record: `@<v>.damaged`.
pub const DAMAGED: &str = "damaged";

/// One segment whose bytes no longer match the hash taken at ingest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadSegment {
    /// Segment number (`seg=`).
    pub segment: u64,
    /// Byte offset of its first byte in the file.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// SHA-256 taken at ingest (hex).
    pub expected: String,
    /// SHA-256 of the bytes now on disk (hex), or why they could not be
    /// read.
    pub found: String,
}

/// A version's damage record (`@<v>.damaged`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// Bad segments known so far, by segment number.
    pub segments: Vec<BadSegment>,
    /// Problems that are not one segment's (a file of the wrong size, a
    /// hashes file that does not match the manifest, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// When damage was first detected (ms since the Unix epoch).
    pub detected_ms: u64,
    /// What detected it: `serve` (a segment about to be sent) or `scrub`.
    pub by: String,
}

/// What re-hashing one version found.
#[derive(Debug, Clone, Default)]
pub struct Verified {
    /// Segments checked.
    pub segments: u64,
    /// Bytes read and hashed.
    pub bytes: u64,
    /// Segments that do not match.
    pub bad: Vec<BadSegment>,
    /// Other problems (see [`Damage::problems`]).
    pub problems: Vec<String>,
    /// The version had no serve-time check file (`@<v>.crc32`, decision
    /// 0095: stores published before it) and, being clean, got one from
    /// this pass: its segments are served with one CRC-32 from now on
    /// instead of a second SHA-256.
    pub crc_written: bool,
}

impl Verified {
    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.bad.is_empty() && self.problems.is_empty()
    }
}

/// The segments the damage record of the version whose data file is
/// `data` names, sorted (none without a record; an unreadable record
/// names none, and is reported by `damage`/scrub).
pub(crate) fn damaged_segments(data: &std::path::Path) -> Box<[u64]> {
    let Ok(raw) = fs::read(extra_path(data, DAMAGED)) else {
        return Box::default();
    };
    let Ok(d) = serde_json::from_slice::<Damage>(&raw) else {
        return Box::default();
    };
    let mut s: Vec<u64> = d.segments.iter().map(|b| b.segment).collect();
    s.sort_unstable();
    s.dedup();
    s.into_boxed_slice()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Bytes read per scrub batch (a whole number of segments).
const BATCH: u64 = 8 << 20;

impl Store {
    /// Checks `content`, about to be served as segment `seg` of `e`,
    /// against the hash taken at ingest. `Ok(None)`: it matches.
    ///
    /// A version with a `.crc32` file (taken at ingest, beside the hashes)
    /// is checked by its CRC-32: an accidental change (rot, a torn or
    /// misdirected write, a truncation) is caught as surely in practice, at
    /// a fraction of a SHA-256's cost. Only a mismatch (or no CRC) re-hashes,
    /// and the SHA-256 decides: a damaged `.crc32` file never withholds good
    /// bytes. Deliberate changes are not what this check is for: whoever can
    /// rewrite the data file can rewrite `.hashes` too; the consumer's check
    /// against the signed manifest catches those.
    pub fn check_segment(&self, e: &Entry, seg: u64, content: &[u8]) -> Result<Option<BadSegment>> {
        if let Some(f) = &e.crcs {
            let mut c = [0u8; 4];
            let read = match &e.file {
                Some(d) => d.read_side(
                    crate::Side::Crcs,
                    f,
                    &mut c,
                    seg * 4,
                    e.meta.segments() * 4,
                    e.meta.size,
                ),
                None => f.read_exact_at(&mut c, seg * 4),
            };
            if read.is_ok() && u32::from_le_bytes(c) == crc32fast::hash(content) {
                return Ok(None);
            }
        }
        let want = self.segment_hash(e, seg)?;
        let got: [u8; 32] = Sha256::digest(content).into();
        if got == want {
            return Ok(None);
        }
        let (offset, len) = self.segment_range(e, seg)?;
        Ok(Some(BadSegment {
            segment: seg,
            offset,
            len,
            expected: hex::encode(want),
            found: hex::encode(got),
        }))
    }

    /// True when segment `seg` of `e` is recorded as damaged: it is never
    /// served (in any signing mode) until a scrub finds it good again
    /// (`granary repo scrub --repair-from` repairs it and clears the
    /// record). For an entry from a lookup this is the record as read with
    /// the lookup (no file access: a record written since is seen when the
    /// entry is looked up again — within [`crate::CACHE_TTL`], or at once
    /// after [`Store::forget`], which recording damage here does); for
    /// any other entry the record is read.
    pub fn withheld(&self, e: &Entry, seg: u64) -> bool {
        match &e.file {
            Some(f) => f.withholds(seg),
            None => damaged_segments(&e.path).binary_search(&seg).is_ok(),
        }
    }

    /// True when `e` has a damage record.
    pub fn is_damaged(&self, e: &Entry) -> bool {
        extra_path(&e.path, DAMAGED).exists()
    }

    /// `e`'s damage record, if any (an unreadable record counts as one
    /// with a problem).
    pub fn damage(&self, e: &Entry) -> Option<Damage> {
        let p = extra_path(&e.path, DAMAGED);
        let raw = fs::read(&p).ok()?;
        Some(serde_json::from_slice(&raw).unwrap_or_else(|x| Damage {
            problems: vec![format!("{}: unreadable damage record: {x}", p.display())],
            ..Default::default()
        }))
    }

    /// Records damage to `e` (merged with what was recorded before;
    /// written atomically and durably). Returns the record.
    pub fn mark_damaged(
        &self,
        e: &Entry,
        bad: &[BadSegment],
        problems: &[String],
        by: &str,
    ) -> Result<Damage> {
        let mut d = self.damage(e).unwrap_or_else(|| Damage {
            detected_ms: now_ms(),
            by: by.to_string(),
            ..Default::default()
        });
        for b in bad {
            match d.segments.iter_mut().find(|x| x.segment == b.segment) {
                Some(x) => *x = b.clone(),
                None => d.segments.push(b.clone()),
            }
        }
        d.segments.sort_by_key(|b| b.segment);
        for p in problems {
            if !d.problems.contains(p) {
                d.problems.push(p.clone());
            }
        }
        self.write_damage(e, &d)?;
        Ok(d)
    }

    /// Replaces `e`'s damage record with one of exactly `bad` and
    /// `problems` (what a scrub found wrong now), or removes it when both
    /// are empty; in one atomic step, so a reader never sees the version
    /// without a record while it is damaged. Returns the record written.
    pub fn replace_damage(
        &self,
        e: &Entry,
        bad: &[BadSegment],
        problems: &[String],
        by: &str,
    ) -> Result<Option<Damage>> {
        if bad.is_empty() && problems.is_empty() {
            self.clear_damaged(e)?;
            return Ok(None);
        }
        let mut segments = bad.to_vec();
        segments.sort_by_key(|b| b.segment);
        segments.dedup_by_key(|b| b.segment);
        let d = Damage {
            segments,
            problems: problems.to_vec(),
            detected_ms: self.damage(e).map_or_else(now_ms, |old| old.detected_ms),
            by: by.to_string(),
        };
        self.write_damage(e, &d)?;
        Ok(Some(d))
    }

    fn write_damage(&self, e: &Entry, d: &Damage) -> Result<()> {
        let json = serde_json::to_vec_pretty(d).map_err(|x| Error::Corrupt(x.to_string()))?;
        write_atomic(&extra_path(&e.path, DAMAGED), &json)?;
        // Cached lookups carry the record as it was: read it again.
        self.forget();
        Ok(())
    }

    /// Removes `e`'s damage record (after a scrub found it clean again).
    pub fn clear_damaged(&self, e: &Entry) -> Result<()> {
        let p = extra_path(&e.path, DAMAGED);
        match fs::remove_file(&p) {
            Ok(()) => {
                self.forget();
                Ok(())
            }
            Err(x) if x.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(x) => Err(Error::io(&p)(x)),
        }
    }

    /// The newest version of `name` without a damage record; the newest
    /// version when every one is damaged (what discovery points at: a
    /// damaged version is still served, except for its bad segments).
    pub fn latest_good(&self, name: &Name) -> Result<Arc<Entry>> {
        let latest = self.get_shared(name, None)?;
        if !self.is_damaged(&latest) {
            return Ok(latest);
        }
        for v in self.versions(name)?.into_iter().rev() {
            if v == latest.meta.version {
                continue;
            }
            if let Ok(e) = self.get_shared(name, Some(v)) {
                if !self.is_damaged(&e) {
                    return Ok(e);
                }
            }
        }
        Ok(latest)
    }

    /// Re-hashes every segment of `e` against `@<v>.hashes`, on `threads`
    /// threads, in batches of 8 MiB read with one `pread` each; `progress`
    /// gets the bytes of each batch done.
    pub fn verify(
        &self,
        e: &Entry,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Verified> {
        let mut out = Verified::default();
        let spans = self.segment_spans(e)?;
        let hp = hashes_path(&e.path);
        let hashes = match fs::read(&hp) {
            Ok(h) => h,
            Err(x) => {
                out.problems.push(format!(
                    "{}: {x}: the segments cannot be checked",
                    hp.display()
                ));
                return Ok(out);
            }
        };
        if hashes.len() != spans.len() * 32 {
            out.problems.push(format!(
                "{}: {} bytes for {} segments",
                hp.display(),
                hashes.len(),
                spans.len()
            ));
            return Ok(out);
        }
        let file = fs::File::open(&e.path).map_err(Error::io(&e.path))?;
        let disk = file.metadata().map_err(Error::io(&e.path))?.len();
        if disk != e.meta.size {
            out.problems.push(format!(
                "{}: {disk} bytes on disk, {} published",
                e.path.display(),
                e.meta.size
            ));
        }
        // Batches of whole segments, about BATCH bytes each.
        let mut batches = Vec::new();
        let mut first = 0usize;
        while first < spans.len() {
            let start = spans[first].0;
            let mut end = first + 1;
            while end < spans.len() && spans[end].0 + spans[end].1 as u64 - start <= BATCH {
                end += 1;
            }
            batches.push((first, end));
            first = end;
        }
        let next = AtomicUsize::new(0);
        let threads = threads.clamp(1, 64);
        // A version without its `.crc32` (published before decision 0095)
        // gets the CRC-32s of the bytes this pass reads, written only if
        // every segment matches its SHA-256: a backfill never vouches for
        // bytes the hashes do not.
        let backfill = e.crcs.is_none() && !self.is_staged(e);
        let crcs: Vec<std::sync::atomic::AtomicU32> = if backfill {
            (0..spans.len())
                .map(|_| std::sync::atomic::AtomicU32::new(0))
                .collect()
        } else {
            Vec::new()
        };
        let results: Vec<Vec<BadSegment>> = std::thread::scope(|sc| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    sc.spawn(|| {
                        let mut bad = Vec::new();
                        let mut buf = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&(a, b)) = batches.get(i) else { break };
                            let start = spans[a].0;
                            let end = spans[b - 1].0 + spans[b - 1].1 as u64;
                            buf.resize((end - start) as usize, 0);
                            let read = file.read_exact_at(&mut buf, start);
                            for (s, &(off, len)) in spans.iter().enumerate().take(b).skip(a) {
                                let want = &hashes[s * 32..s * 32 + 32];
                                let found = match &read {
                                    Ok(()) => {
                                        let from = (off - start) as usize;
                                        let seg = &buf[from..from + len as usize];
                                        let got: [u8; 32] = Sha256::digest(seg).into();
                                        if got[..] == *want {
                                            if let Some(c) = crcs.get(s) {
                                                c.store(crc32fast::hash(seg), Ordering::Relaxed);
                                            }
                                            continue;
                                        }
                                        hex::encode(got)
                                    }
                                    Err(x) => format!("unreadable: {x}"),
                                };
                                bad.push(BadSegment {
                                    segment: s as u64,
                                    offset: off,
                                    len: len as u64,
                                    expected: hex::encode(want),
                                    found,
                                });
                            }
                            progress(end - start);
                        }
                        bad
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_default())
                .collect()
        });
        out.bad = results.into_iter().flatten().collect();
        out.bad.sort_by_key(|b| b.segment);
        out.segments = spans.len() as u64;
        out.bytes = spans.last().map_or(0, |(o, l)| o + *l as u64);
        if backfill && out.is_clean() {
            let bytes: Vec<u8> = crcs
                .iter()
                .flat_map(|c| c.load(Ordering::Relaxed).to_le_bytes())
                .collect();
            // A store that cannot take the file (read-only) is still
            // verified; it keeps serving with the SHA-256 check.
            if self.write_extra(e, crate::CRC_SUFFIX, &bytes).is_ok() {
                out.crc_written = true;
                self.forget();
            }
        }
        Ok(out)
    }

    /// Writes good bytes back over segment `seg` of `e` (repair): refused
    /// unless `bytes` have the segment's length and the SHA-256 taken at
    /// ingest. Synced before it returns.
    pub fn repair_segment(&self, e: &Entry, seg: u64, bytes: &[u8]) -> Result<()> {
        let (offset, len) = self.segment_range(e, seg)?;
        if bytes.len() as u64 != len {
            return Err(Error::Corrupt(format!(
                "segment {seg}: {} bytes offered, {len} expected",
                bytes.len()
            )));
        }
        let want = self.segment_hash(e, seg)?;
        let got: [u8; 32] = Sha256::digest(bytes).into();
        if got != want {
            return Err(Error::Corrupt(format!(
                "segment {seg}: offered bytes have SHA-256 {}, the version's is {}",
                hex::encode(got),
                hex::encode(want)
            )));
        }
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&e.path)
            .map_err(Error::io(&e.path))?;
        f.write_all_at(bytes, offset).map_err(Error::io(&e.path))?;
        f.sync_data().map_err(Error::io(&e.path))?;
        self.forget();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Chunking, KnownSegments, PutOptions};

    fn put(store: &Store, name: &str, data: &[u8], chunking: Option<Chunking>) -> Entry {
        static V: AtomicUsize = AtomicUsize::new(1);
        let n = Name::from_uri(name).unwrap();
        let opts = PutOptions {
            chunking,
            index: false,
            version: Some(V.fetch_add(1, Ordering::Relaxed) as u64),
            ..Default::default()
        };
        let e = store.put(&n, data, &opts, |_| {}).unwrap();
        store.forget();
        store.get(&n, Some(e.meta.version)).unwrap()
    }

    /// `e` as a store from before decision 0095 has it: its `.crc32`
    /// removed, looked up again (no CRC file open).
    fn without_crc(store: &Store, e: &Entry) -> Entry {
        fs::remove_file(crate::extra_path(&e.path, crate::CRC_SUFFIX)).unwrap();
        store.forget();
        let old = store
            .get(&e.meta.name().unwrap(), Some(e.meta.version))
            .unwrap();
        assert!(old.crcs.is_none());
        old
    }

    fn tamper(e: &Entry, at: u64) {
        let f = fs::OpenOptions::new().write(true).open(&e.path).unwrap();
        let mut b = [0u8; 4];
        f.read_exact_at(&mut b, at).unwrap_or(());
        for x in &mut b {
            *x ^= 0x5a;
        }
        f.write_all_at(&b, at).unwrap();
    }

    #[test]
    fn verify_finds_the_exact_segment_and_repair_restores_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = crate::chunking::noise(3 << 20, 7);
        for chunking in [None, Some("fastcdc:1024:4096:8192".parse().unwrap())] {
            let e = put(&store, "/t/file", &data, chunking);
            let clean = store.verify(&e, 2, &|_| {}).unwrap();
            assert!(clean.is_clean(), "{clean:?}");
            assert_eq!(clean.bytes, data.len() as u64);
            tamper(&e, 100_000);
            let v = store.verify(&e, 2, &|_| {}).unwrap();
            assert_eq!(v.bad.len(), 1, "{v:?}");
            let b = &v.bad[0];
            assert!(b.offset <= 100_000 && 100_000 < b.offset + b.len);
            assert_eq!(
                store.segment_range(&e, b.segment).unwrap(),
                (b.offset, b.len)
            );
            // The serve-time check agrees.
            let mut buf = Vec::new();
            store.read_segment(&e, b.segment, &mut buf).unwrap();
            assert_eq!(
                store.check_segment(&e, b.segment, &buf).unwrap().as_ref(),
                Some(b)
            );
            // Repair: wrong bytes refused, the right ones restore the file.
            assert!(store.repair_segment(&e, b.segment, &buf).is_err());
            let good = &data[b.offset as usize..(b.offset + b.len) as usize];
            store.repair_segment(&e, b.segment, good).unwrap();
            assert!(store.verify(&e, 1, &|_| {}).unwrap().is_clean());
            assert_eq!(fs::read(&e.path).unwrap(), data);
            store.remove(&e.meta.name().unwrap(), None).unwrap();
        }
    }

    #[test]
    fn serve_check_reads_the_crc_and_the_sha256_decides_a_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = crate::chunking::noise(200_000, 11);
        let e = put(&store, "/t/crc", &data, Some("fastcdc".parse().unwrap()));
        let crc_file = crate::extra_path(&e.path, crate::CRC_SUFFIX);
        let n = e.meta.segments();
        // Written at ingest: one CRC-32 per segment, opened by lookups.
        assert_eq!(fs::metadata(&crc_file).unwrap().len(), 4 * n);
        assert!(e.crcs.is_some());
        let seg = |k: u64| {
            let mut b = Vec::new();
            store.read_segment(&e, k, &mut b).unwrap();
            b
        };
        for k in 0..n {
            assert_eq!(store.check_segment(&e, k, &seg(k)).unwrap(), None);
        }
        // Bytes that differ from the ingest's are refused, with the SHA-256s
        // in the report.
        let mut bad = seg(1);
        bad[10] ^= 1;
        let r = store.check_segment(&e, 1, &bad).unwrap().unwrap();
        assert_eq!(r.segment, 1);
        assert_ne!(r.expected, r.found);
        assert_eq!(r.expected.len(), 64);
        // A damaged .crc32 never withholds good bytes: the SHA-256 decides.
        let f = fs::OpenOptions::new().write(true).open(&crc_file).unwrap();
        f.write_all_at(&[0xff; 8], 0).unwrap();
        assert_eq!(store.check_segment(&e, 0, &seg(0)).unwrap(), None);
        assert!(store.check_segment(&e, 0, &bad).unwrap().is_some());
        // A version without one (published before it existed) is re-hashed.
        let old = without_crc(&store, &e);
        assert_eq!(store.check_segment(&old, 2, &seg(2)).unwrap(), None);
        assert!(store.check_segment(&old, 1, &bad).unwrap().is_some());
    }

    #[test]
    fn put_file_takes_a_source_it_is_given_and_copies_any_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("repo")).unwrap();
        let data = crate::chunking::noise(500_000, 21);
        for (k, take) in [(1u64, false), (2, true)] {
            let src = dir.path().join(format!("src{k}"));
            fs::write(&src, &data).unwrap();
            let opts = PutOptions {
                version: Some(k),
                take_source: take,
                ..Default::default()
            };
            let n = Name::from_uri("/t/take").unwrap();
            let (e, _) = store.put_file(&n, &src, &opts, |_| {}).unwrap();
            // Taken: moved in, so gone from where it was; otherwise kept.
            assert_eq!(src.exists(), !take, "take_source={take}");
            assert_eq!(fs::read(&e.path).unwrap(), data);
            assert!(store.verify(&e, 1, &|_| {}).unwrap().is_clean());
        }
    }

    #[test]
    fn known_segments_are_recorded_as_an_ingest_would_and_checked_against_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("repo")).unwrap();
        let data = crate::chunking::noise(700_000, 33);
        let cdc: Chunking = "fastcdc:1024:4096:8192".parse().unwrap();
        let n = Name::from_uri("/t/known").unwrap();
        let src = dir.path().join("src");
        fs::write(&src, &data).unwrap();
        let plain = PutOptions {
            version: Some(1),
            chunking: Some(cdc),
            ..Default::default()
        };
        let (e1, _) = store.put_file(&n, &src, &plain, |_| {}).unwrap();
        let side = |e: &Entry, suffix: &str| fs::read(crate::extra_path(&e.path, suffix)).unwrap();
        let hashes = side(&e1, "hashes");
        let offsets: Vec<u64> = side(&e1, "offsets")
            .chunks(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let known = KnownSegments {
            lengths: offsets.windows(2).map(|w| (w[1] - w[0]) as u32).collect(),
            hashes: hashes.chunks(32).map(|h| h.try_into().unwrap()).collect(),
            crcs: offsets
                .windows(2)
                .map(|w| crc32fast::hash(&data[w[0] as usize..w[1] as usize]))
                .collect(),
        };
        assert!(known.lengths.len() > 40);
        let take = |version: u64, bytes: &[u8], known: KnownSegments| {
            fs::write(&src, bytes).unwrap();
            let opts = PutOptions {
                version: Some(version),
                chunking: Some(cdc),
                take_source: true,
                known_segments: Some(std::sync::Arc::new(known)),
                ..Default::default()
            };
            store.put_file(&n, &src, &opts, |_| {}).map(|(e, _)| e)
        };
        // The same side files as a full ingest's, and a clean version.
        let e2 = take(2, &data, known.clone()).unwrap();
        for suffix in ["hashes", "offsets", crate::CRC_SUFFIX] {
            assert_eq!(side(&e1, suffix), side(&e2, suffix), "{suffix}");
        }
        assert!(store.verify(&e2, 1, &|_| {}).unwrap().is_clean());
        // A file longer or shorter than its segments is not published.
        for bytes in [&data[..data.len() - 1], &[&data[..], b"x"].concat()[..]] {
            let err = take(3, bytes, known.clone()).unwrap_err().to_string();
            assert!(err.contains("not the segments it was fetched as"), "{err}");
            assert!(store.get(&n, Some(3)).is_err());
        }
        // Bytes that are not those fetched (same length): refused by their
        // CRC-32, nothing published.
        let mut bad = data.clone();
        bad[100] ^= 1;
        let err = take(4, &bad, known.clone()).unwrap_err().to_string();
        assert!(err.contains("segment 0") && err.contains("CRC-32"), "{err}");
        assert!(store.get(&n, Some(4)).is_err());
        // Without every CRC-32 the known segments are not used: a full
        // ingest, which finds its own hashes.
        let partial = KnownSegments {
            crcs: known.crcs[1..].to_vec(),
            ..known
        };
        let e5 = take(5, &data, partial).unwrap();
        assert_eq!(side(&e1, "hashes"), side(&e5, "hashes"));
    }

    #[test]
    fn chunks_reads_many_by_hash_and_skips_what_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = crate::chunking::noise(40_000, 3);
        let b = crate::chunking::noise(40_000, 4);
        let seg = |d: &[u8], k: usize| d[k * 4096..((k + 1) * 4096).min(d.len())].to_vec();
        let h = |x: &[u8]| <[u8; 32]>::from(Sha256::digest(x));
        let opts = |v| PutOptions {
            version: Some(v),
            segment_size: 4096,
            ..Default::default()
        };
        let (na, nb) = (
            Name::from_uri("/t/a").unwrap(),
            Name::from_uri("/t/b").unwrap(),
        );
        store.put(&na, &a[..], &opts(1), |_| {}).unwrap();
        let eb = store.put(&nb, &b[..], &opts(1), |_| {}).unwrap();
        // a's segments 0..10, b's 2, something never stored.
        let mut want: Vec<[u8; 32]> = (0..10).map(|k| h(&seg(&a, k))).collect();
        want.push(h(&seg(&b, 2)));
        want.push([7; 32]);
        let mut got = Vec::new();
        store.chunks(&want, |i, bytes| got.push((i, bytes)));
        assert_eq!(got.len(), 11);
        for (i, bytes) in &got {
            assert_eq!(h(bytes), want[*i], "chunk {i}");
        }
        // b's file gone: its chunk is not given, a's still are.
        fs::remove_file(&eb.path).unwrap();
        let mut got = Vec::new();
        store.chunks(&want, |i, _| got.push(i));
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        assert_eq!(store.has_chunks(&want[10..11]), vec![false]);
    }

    #[test]
    fn verify_backfills_the_crc_file_of_a_clean_version_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = crate::chunking::noise(300_000, 5);
        for (name, chunking) in [
            ("/t/fixed", None),
            ("/t/cdc", Some("fastcdc:1024:4096:8192".parse().unwrap())),
            ("/t/empty", None),
        ] {
            let bytes = if name == "/t/empty" {
                &data[..0]
            } else {
                &data[..]
            };
            let e = put(&store, name, bytes, chunking);
            let crc_file = crate::extra_path(&e.path, crate::CRC_SUFFIX);
            let at_ingest = fs::read(&crc_file).unwrap();
            // As a store from before decision 0095: no .crc32.
            let old = without_crc(&store, &e);
            let v = store.verify(&old, 2, &|_| {}).unwrap();
            assert!(v.is_clean() && v.crc_written, "{name}: {v:?}");
            // The very file ingest would have written, and lookups use it.
            assert_eq!(fs::read(&crc_file).unwrap(), at_ingest, "{name}");
            let now = store
                .get(&e.meta.name().unwrap(), Some(e.meta.version))
                .unwrap();
            assert!(now.crcs.is_some());
            // A version that has one is left alone.
            assert!(!store.verify(&now, 1, &|_| {}).unwrap().crc_written);
        }
        // A damaged version gets none: the CRC would vouch for bad bytes.
        let e = put(&store, "/t/bad", &data, None);
        let crc_file = crate::extra_path(&e.path, crate::CRC_SUFFIX);
        let old = without_crc(&store, &e);
        tamper(&old, 5_000);
        let v = store.verify(&old, 2, &|_| {}).unwrap();
        assert_eq!(v.bad.len(), 1);
        assert!(!v.crc_written);
        assert!(!crc_file.exists());
    }

    #[test]
    fn recorded_segments_are_withheld_by_lookups_until_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let n = Name::from_uri("/t/w").unwrap();
        let e = put(&store, "/t/w", &crate::chunking::noise(40_000, 3), None);
        let v = Some(e.meta.version);
        let looked = store.get_shared(&n, v).unwrap();
        assert!(!store.withheld(&looked, 2));
        let bad = store
            .check_segment(&e, 2, b"not these bytes")
            .unwrap()
            .unwrap();
        store
            .mark_damaged(&e, std::slice::from_ref(&bad), &[], "scrub")
            .unwrap();
        // A new lookup carries the record; so does an entry not looked up.
        let looked = store.get_shared(&n, v).unwrap();
        assert!(store.withheld(&looked, 2));
        assert!(!store.withheld(&looked, 1) && !store.withheld(&looked, 3));
        let bare = Entry {
            file: None,
            ..e.clone()
        };
        assert!(store.withheld(&bare, 2));
        // An entry looked up before the record keeps its snapshot.
        assert!(!store.withheld(&e, 2));
        // Written by another process: seen once the cache is forgotten.
        let other = Store::open(dir.path()).unwrap();
        other.replace_damage(&e, &[], &[], "scrub").unwrap();
        store.forget();
        assert!(!store.withheld(&store.get_shared(&n, v).unwrap(), 2));
        other.replace_damage(&e, &[bad], &[], "scrub").unwrap();
        std::thread::sleep(crate::CACHE_TTL);
        assert!(store.withheld(&store.get_shared(&n, v).unwrap(), 2));
    }

    #[test]
    fn damage_records_follow_the_version_and_discovery_skips_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let n = Name::from_uri("/t/d").unwrap();
        let old = put(&store, "/t/d", b"old bytes", None);
        let new = put(&store, "/t/d", b"new bytes", None);
        assert_ne!(old.meta.version, new.meta.version);
        assert_eq!(
            store.latest_good(&n).unwrap().meta.version,
            new.meta.version
        );
        let bad = store.check_segment(&new, 0, b"xew bytes").unwrap().unwrap();
        let d = store
            .mark_damaged(&new, std::slice::from_ref(&bad), &[], "serve")
            .unwrap();
        assert_eq!(d.segments, vec![bad]);
        assert_eq!(
            store.latest_good(&n).unwrap().meta.version,
            old.meta.version
        );
        // Rename carries the record; every version damaged → the newest.
        let m = Name::from_uri("/t/e").unwrap();
        store.rename(&n, &m).unwrap();
        let moved = store.get(&m, Some(new.meta.version)).unwrap();
        assert!(store.damage(&moved).is_some());
        let old_moved = store.get(&m, Some(old.meta.version)).unwrap();
        store
            .mark_damaged(&old_moved, &[], &["x".into()], "scrub")
            .unwrap();
        assert_eq!(
            store.latest_good(&m).unwrap().meta.version,
            new.meta.version
        );
        store.clear_damaged(&moved).unwrap();
        assert!(!store.is_damaged(&moved));
        // Removal takes the record along.
        store.remove(&m, None).unwrap();
        assert!(!extra_path(&old_moved.path, DAMAGED).exists());
    }
}
