//! Scrubbing: re-hashing stored versions against the hashes taken at
//! ingest and their manifests (`granary repo scrub`, and the daemon's
//! background scrub at a bounded rate). A version found damaged gets a
//! damage record (`granary_store::integrity`); one found clean again (after
//! a repair) loses it.

use granary_store::integrity::{BadSegment, Verified};
use granary_store::{Entry, Store};
use serde::Serialize;

/// What scrubbing one version found.
#[derive(Debug, Clone, Serialize)]
pub struct VersionReport {
    /// Object name.
    pub name: String,
    /// Version.
    pub version: u64,
    /// Data file.
    pub path: String,
    /// Segments checked.
    pub segments: u64,
    /// Bytes read and hashed.
    pub bytes: u64,
    /// Segments whose bytes do not match.
    pub bad: Vec<BadSegment>,
    /// Other problems (file size, manifest files).
    pub problems: Vec<String>,
    /// Segments restored from another node (`--repair-from`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<u64>,
    /// The version had no serve-time check file (stores from before
    /// decision 0095) and this scrub wrote it, the version being clean.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub crc_written: bool,
}

impl VersionReport {
    /// One damaged segment, for a log line or a report:
    /// `NAME/v=V segment S bytes A..B (PATH): SHA-256 X, Y at ingest`.
    pub fn describe(&self, b: &BadSegment) -> String {
        format!(
            "{}/v={} segment {} bytes {}..{} ({}): SHA-256 {}, {} at ingest",
            self.name,
            self.version,
            b.segment,
            b.offset,
            b.offset + b.len,
            self.path,
            b.found,
            b.expected
        )
    }

    /// True when nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.bad.is_empty() && self.problems.is_empty()
    }
}

/// Re-hashes `e` on `threads` threads (progress in bytes), checks its
/// manifest files against its hashes, and records the outcome: damaged →
/// `@<v>.damaged` (merged), clean → the record is removed.
pub fn scrub_version(
    store: &Store,
    e: &Entry,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<VersionReport, String> {
    // A version whose files cannot even be checked (a short `.offsets`, a
    // data file of the wrong size, an unreadable hash list) is damaged
    // like one whose bytes differ: recorded, reported, and the scrub goes
    // on to the next version.
    let Verified {
        segments,
        bytes,
        bad,
        mut problems,
        crc_written,
    } = match store.verify(e, threads, progress) {
        Ok(v) => v,
        Err(x) => Verified {
            problems: vec![format!("cannot be checked: {x}")],
            ..Verified::default()
        },
    };
    problems.extend(crate::manifest::check_stored(store, e));
    let report = VersionReport {
        name: e.meta.name.clone(),
        version: e.meta.version,
        path: e.path.display().to_string(),
        segments,
        bytes,
        bad,
        problems,
        repaired: Vec::new(),
        crc_written,
    };
    record(store, e, &report)?;
    Ok(report)
}

/// Writes the damage record of `e` from `report` (or removes it when the
/// version is clean). A scrub replaces the record: what it lists is what
/// is wrong now.
pub fn record(store: &Store, e: &Entry, report: &VersionReport) -> Result<(), String> {
    let bad: Vec<BadSegment> = report
        .bad
        .iter()
        .filter(|b| !report.repaired.contains(&b.segment))
        .cloned()
        .collect();
    // One atomic replacement: the version is never seen without a record
    // while it is damaged (its segments would be served meanwhile).
    store
        .replace_damage(e, &bad, &report.problems, "scrub")
        .map_err(|x| x.to_string())?;
    Ok(())
}

/// Scrubs in the background at no more than `bytes_per_sec`, forever: every
/// stored version in name order, then again after `pause`. Damage is
/// logged and recorded; the pass's totals are logged at info level.
pub fn background(store: &Store, bytes_per_sec: u64, pause: std::time::Duration) {
    let bytes_per_sec = bytes_per_sec.max(1);
    loop {
        let t = std::time::Instant::now();
        let (mut versions, mut bytes, mut damaged) = (0u64, 0u64, 0u64);
        let list = match store.list(&granary_packet::Name::new()) {
            Ok(l) => l,
            Err(x) => {
                tracing::warn!("background scrub: cannot list the repository: {x}");
                Vec::new()
            }
        };
        for m in list {
            let Ok(n) = m.name() else { continue };
            let Ok(e) = store.get(&n, Some(m.version)) else {
                continue; // removed meanwhile
            };
            // Rate: sleep after each 8 MiB batch so the average stays
            // under the bound.
            let started = std::time::Instant::now();
            let done = std::sync::atomic::AtomicU64::new(0);
            let pace = |n: u64| {
                let total = done.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
                let due = std::time::Duration::from_secs_f64(total as f64 / bytes_per_sec as f64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            };
            match scrub_version(store, &e, 1, &pace) {
                Ok(r) => {
                    versions += 1;
                    bytes += r.bytes;
                    if !r.is_clean() {
                        damaged += 1;
                        for b in &r.bad {
                            tracing::error!("scrub: {}; version marked damaged", r.describe(b));
                        }
                        for p in &r.problems {
                            tracing::error!("scrub: {} v={}: {p}", r.name, r.version);
                        }
                    }
                }
                Err(x) => tracing::warn!("scrub: {} v={}: {x}", m.name, m.version),
            }
        }
        tracing::info!(
            "background scrub: {versions} version(s), {:.1} MB in {:.0} s, {damaged} damaged",
            bytes as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
        std::thread::sleep(pause);
    }
}
