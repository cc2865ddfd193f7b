//! `granary repo scrub`: re-hash stored versions against the hashes taken at
//! ingest and their manifests ([`granary_repo::scrub`]), record damage, and
//! restore bad segments from another node, routed there through the running
//! daemon for the duration of the repair.

use std::path::Path;
use std::time::{Duration, Instant};

use granary_app::{Client, Reply};
use granary_mgmt::{decode_dataset, ControlParameters, FibEntry};
use granary_packet::{Component, InterestFields, Name};
use granary_repo::scrub::scrub_version;
use granary_store::Store;

pub use granary_repo::scrub::VersionReport;

/// What a scrub found (and repaired).
pub struct Scrubbed {
    /// Versions scrubbed.
    pub versions: u64,
    /// Bytes re-hashed.
    pub bytes: u64,
    /// Seconds the re-hashing took.
    pub seconds: f64,
    /// Hashing threads.
    pub threads: usize,
    /// Clean versions whose `.crc32` file was written.
    pub crc_backfilled: u64,
    /// Versions not clean, with what was repaired.
    pub reports: Vec<VersionReport>,
    /// Why the repair failed, in part or whole.
    pub repair_error: Option<String>,
}

impl Scrubbed {
    /// Versions still damaged.
    pub fn damaged(&self) -> usize {
        self.reports
            .iter()
            .filter(|r| !still_damaged(r).is_empty() || !r.problems.is_empty())
            .count()
    }

    /// Segments repaired.
    pub fn repaired(&self) -> usize {
        self.reports.iter().map(|r| r.repaired.len()).sum()
    }

    /// Gigabytes re-hashed per second.
    fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }

    /// `repo scrub --json`'s answer.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "versions": self.versions,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "gb_per_s": self.rate(),
            "threads": self.threads,
            "damaged": self.damaged(),
            "repaired_segments": self.repaired(),
            "crc_files_written": self.crc_backfilled,
            "repair_error": self.repair_error,
            "reports": self.reports,
        })
    }

    /// `repo scrub`'s text: each bad segment (repaired or not) and problem,
    /// the totals, the `.crc32` files written, why a repair failed.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for r in &self.reports {
            for b in &r.bad {
                let fixed = r.repaired.contains(&b.segment);
                let what = if fixed { "REPAIRED" } else { "DAMAGED " };
                out += &format!("{what} {}\n", r.describe(b));
            }
            for p in &r.problems {
                out += &format!("DAMAGED  {}/v={}: {p}\n", r.name, r.version);
            }
        }
        out += &format!(
            "scrubbed {} version(s), {:.2} GB in {:.2} s ({:.2} GB/s, {} thread(s)): {} damaged, {} segment(s) repaired\n",
            self.versions,
            self.bytes as f64 / 1e9,
            self.seconds,
            self.rate(),
            self.threads,
            self.damaged(),
            self.repaired()
        );
        if self.crc_backfilled > 0 {
            out += &format!(
                "wrote the serve-time check file (.crc32) of {} clean version(s) published before it existed: the node now serves them with one CRC-32 per segment instead of a second SHA-256\n",
                self.crc_backfilled
            );
        }
        if let Some(e) = &self.repair_error {
            out += &format!("repair: {e}\n");
        }
        out
    }
}

/// Scrubs every version under `prefix` (default: all) of the data
/// directory's repository with `threads` (default: every core); with
/// `repair_from` (a face URI, a face id or a routed name prefix) restores
/// bad segments from there. `start` is told the bytes to hash, `progress`
/// each part hashed, `scanned` the end of the hashing.
#[allow(clippy::too_many_arguments)]
pub fn scrub(
    data_dir: &Path,
    socket: &Path,
    prefix: Option<&str>,
    threads: Option<usize>,
    repair_from: Option<&str>,
    start: impl FnOnce(u64),
    progress: &(dyn Fn(u64) + Sync),
    scanned: impl FnOnce(),
) -> anyhow::Result<Scrubbed> {
    let store = Store::open(data_dir.join("repo"))?;
    let prefix = match prefix {
        Some(p) => Name::from_uri(p).map_err(|e| anyhow::anyhow!("{p}: {e}"))?,
        None => Name::new(),
    };
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let versions = store.list(&prefix)?;
    start(versions.iter().map(|m| m.size).sum());
    let t = Instant::now();
    let mut reports: Vec<VersionReport> = Vec::new();
    let (mut scrubbed, mut bytes, mut crc_backfilled) = (0u64, 0u64, 0u64);
    for m in &versions {
        let Ok(n) = m.name() else { continue };
        let Ok(e) = store.get(&n, Some(m.version)) else {
            continue; // removed meanwhile
        };
        // One version that cannot be scrubbed or recorded is reported as
        // damaged; the scrub goes on to the rest.
        let r = scrub_version(&store, &e, threads, progress).unwrap_or_else(|x| VersionReport {
            name: e.meta.name.clone(),
            version: e.meta.version,
            path: e.path.display().to_string(),
            segments: 0,
            bytes: 0,
            bad: Vec::new(),
            problems: vec![format!("cannot be scrubbed: {x}")],
            repaired: Vec::new(),
            crc_written: false,
        });
        scrubbed += 1;
        bytes += r.bytes;
        crc_backfilled += u64::from(r.crc_written);
        if !r.is_clean() {
            reports.push(r);
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    scanned();
    // A running daemon reads the damage records again at once: segments
    // just recorded are withheld from now on (whatever their signature).
    crate::control::tell_daemon(socket, None);
    let mut repair_error = None;
    if let (Some(src), false) = (repair_from, reports.is_empty()) {
        if let Err(e) = repair(&store, socket, src, &mut reports) {
            repair_error = Some(e.to_string());
        }
        // The daemon reads the files again; its Content Store never held
        // the bad segments (they were never sent).
        crate::control::tell_daemon(socket, None);
    }
    Ok(Scrubbed {
        versions: scrubbed,
        bytes,
        seconds,
        threads,
        crc_backfilled,
        reports,
        repair_error,
    })
}

/// Bad segments not yet repaired.
fn still_damaged(r: &VersionReport) -> Vec<u64> {
    r.bad
        .iter()
        .map(|b| b.segment)
        .filter(|s| !r.repaired.contains(s))
        .collect()
}

/// Where repairs come from: faces of the running daemon.
async fn source_faces(c: &mut Client, src: &str) -> anyhow::Result<Vec<u64>> {
    if let Ok(id) = src.parse::<u64>() {
        return Ok(vec![id]);
    }
    if src.contains("://") {
        return Ok(vec![crate::control::create_face(c, src, false).await?]);
    }
    let prefix = Name::from_uri(src).map_err(|e| anyhow::anyhow!("{src}: {e}"))?;
    let fib =
        decode_dataset::<FibEntry>(&crate::control::dataset(c, "/localhost/nfd/fib/list").await?)?;
    // The longest FIB entry that is a prefix of PREFIX (or under it).
    let best = fib
        .iter()
        .filter(|f| f.name.is_prefix_of(&prefix) && !f.name.is_empty())
        .max_by_key(|f| f.name.len())
        .or_else(|| fib.iter().find(|f| prefix.is_prefix_of(&f.name)));
    let faces: Vec<u64> = best
        .map(|f| f.next_hops.iter().map(|h| h.face_id).collect())
        .unwrap_or_default();
    if faces.is_empty() {
        anyhow::bail!("the node has no route for {prefix}: add one (`granary route add {prefix} tcp://HOST:PORT`) or give a face URI");
    }
    Ok(faces)
}

/// Fetches every damaged segment of `reports` from `src` and writes those
/// whose SHA-256 is the one taken at ingest; versions whose manifest files
/// do not match their hashes are not repaired (the expected hashes
/// themselves are in doubt).
fn repair(
    store: &Store,
    socket: &Path,
    src: &str,
    reports: &mut [VersionReport],
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = Client::connect(socket).await.map_err(|e| {
            anyhow::anyhow!(
                "--repair-from needs the running daemon ({}): {e}",
                socket.display()
            )
        })?;
        let faces = source_faces(&mut c, src).await?;
        let nfd = crate::control::nfd();
        let mut failures = Vec::new();
        for r in reports.iter_mut() {
            if !r.problems.is_empty() {
                failures.push(format!(
                    "{}/v={}: not repaired ({})",
                    r.name,
                    r.version,
                    r.problems.join("; ")
                ));
                continue;
            }
            let n = Name::from_uri(&r.name)?;
            let e = store.get(&n, Some(r.version))?;
            let versioned = n.append(&Component::version(r.version));
            // A route for this version only, to the source, while it is
            // repaired (it wins over the repository's `/`).
            for &f in &faces {
                let mut p = ControlParameters::new();
                p.name = Some(versioned.clone());
                p.face_id = Some(f);
                p.cost = Some(0);
                c.command(&nfd, "rib", "register", &p).await?;
            }
            for seg in still_damaged(r) {
                let name = versioned.append(&Component::segment(seg));
                let mut why = String::from("no answer");
                for _ in 0..3 {
                    let mut f = InterestFields::new(name.clone());
                    f.lifetime = Some(4000);
                    match c.express(f).await {
                        Ok(Reply::Data(d)) => match store.repair_segment(&e, seg, d.content()) {
                            Ok(()) => {
                                r.repaired.push(seg);
                                why.clear();
                                break;
                            }
                            Err(x) => why = format!("the answer does not verify: {x}"),
                        },
                        Ok(Reply::Nack(reason)) => why = format!("Nack (reason {reason})"),
                        Err(x) => why = x.to_string(),
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                if !why.is_empty() {
                    failures.push(format!("{name}: {why}"));
                }
            }
            for &f in &faces {
                let mut p = ControlParameters::new();
                p.name = Some(versioned.clone());
                p.face_id = Some(f);
                let _ = c.command(&nfd, "rib", "unregister", &p).await;
            }
            // What is on disk now decides the record.
            let again = scrub_version(store, &e, 1, &|_| {}).map_err(|x| anyhow::anyhow!(x))?;
            r.problems = again.problems;
            r.repaired
                .retain(|s| !again.bad.iter().any(|b| b.segment == *s));
            if !again.bad.is_empty() {
                let left: Vec<u64> = again.bad.iter().map(|b| b.segment).collect();
                r.bad
                    .retain(|b| left.contains(&b.segment) || r.repaired.contains(&b.segment));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("{}", failures.join("; "))
        }
    })
}
