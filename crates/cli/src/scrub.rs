//! `granary repo scrub [PREFIX] [--repair-from SOURCE] [--json]`: re-hash
//! stored versions against the hashes taken at ingest and their manifests,
//! record damage, and restore bad segments from another node.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use granary_app::{Client, Reply};
use granary_mgmt::{decode_dataset, ControlParameters, FibEntry};
use granary_packet::{Component, InterestFields, Name};
use granary_repo::scrub::{scrub_version, VersionReport};
use granary_store::Store;

/// Options of `granary repo scrub`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScrubArgs {
    /// Scrub only versions under this name prefix (default: everything).
    pub prefix: Option<String>,
    /// Restore damaged segments from another node, over NDN through the
    /// running daemon: a face URI (`tcp://HOST:PORT`, `udp://…`,
    /// `unix:///PATH`; the face is created if needed), a face id, or a name
    /// PREFIX that the node already routes to replicas (their faces in the
    /// FIB are used). Each segment is fetched by its versioned name and
    /// written only if its SHA-256 is the one taken at ingest, which this
    /// scrub has just checked against the signed manifest.
    #[arg(long, value_name = "NODE|PREFIX")]
    pub repair_from: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Hashing threads (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: Option<u64>,
}

/// `granary repo scrub`.
pub fn scrub(data_dir: &Path, socket: &Path, args: &ScrubArgs) -> anyhow::Result<()> {
    let store = Store::open(data_dir.join("repo"))?;
    let prefix = match &args.prefix {
        Some(p) => Name::from_uri(p).map_err(|e| anyhow::anyhow!("{p}: {e}"))?,
        None => Name::new(),
    };
    let threads = args.threads.map(|t| t as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let versions = store.list(&prefix)?;
    let total: u64 = versions.iter().map(|m| m.size).sum();
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(total);
        b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "scrub {bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} ETA {eta}",
        ) {
            b.set_style(style);
        }
        b
    });
    let t = Instant::now();
    let mut reports: Vec<VersionReport> = Vec::new();
    let (mut scrubbed, mut bytes, mut crc_backfilled) = (0u64, 0u64, 0u64);
    for m in &versions {
        let Ok(n) = m.name() else { continue };
        let Ok(e) = store.get(&n, Some(m.version)) else {
            continue; // removed meanwhile
        };
        let progress = |b: u64| {
            if let Some(bar) = &bar {
                bar.inc(b);
            }
        };
        // One version that cannot be scrubbed or recorded is reported as
        // damaged; the scrub goes on to the rest.
        let r = scrub_version(&store, &e, threads, &progress).unwrap_or_else(|x| VersionReport {
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
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    // A running daemon reads the damage records again at once: segments
    // just recorded are withheld from now on (whatever their signature).
    granary_node::control::tell_daemon(socket, None);
    let mut repair_error = None;
    if let (Some(src), false) = (&args.repair_from, reports.is_empty()) {
        if let Err(e) = repair(&store, socket, src, &mut reports) {
            repair_error = Some(e.to_string());
        }
        // The daemon reads the files again; its Content Store never held
        // the bad segments (they were never sent).
        granary_node::control::tell_daemon(socket, None);
    }
    let damaged = reports
        .iter()
        .filter(|r| !still_damaged(r).is_empty() || !r.problems.is_empty())
        .count();
    let repaired: usize = reports.iter().map(|r| r.repaired.len()).sum();
    let rate = if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "versions": scrubbed,
                "bytes": bytes,
                "seconds": seconds,
                "gb_per_s": rate,
                "threads": threads,
                "damaged": damaged,
                "repaired_segments": repaired,
                "crc_files_written": crc_backfilled,
                "repair_error": repair_error,
                "reports": reports,
            })
        );
    } else {
        for r in &reports {
            for b in &r.bad {
                let fixed = r.repaired.contains(&b.segment);
                println!(
                    "{} {}",
                    if fixed { "REPAIRED" } else { "DAMAGED " },
                    r.describe(b)
                );
            }
            for p in &r.problems {
                println!("DAMAGED  {}/v={}: {p}", r.name, r.version);
            }
        }
        println!(
            "scrubbed {scrubbed} version(s), {:.2} GB in {seconds:.2} s ({rate:.2} GB/s, {threads} thread(s)): {damaged} damaged, {repaired} segment(s) repaired",
            bytes as f64 / 1e9
        );
        if crc_backfilled > 0 {
            println!(
                "wrote the serve-time check file (.crc32) of {crc_backfilled} clean version(s) published before it existed: the node now serves them with one CRC-32 per segment instead of a second SHA-256"
            );
        }
        if let Some(e) = &repair_error {
            println!("repair: {e}");
        }
    }
    if damaged > 0 {
        let hint = if args.repair_from.is_some() {
            ""
        } else {
            " (`--repair-from NODE|PREFIX` restores them from another node)"
        };
        anyhow::bail!("{damaged} damaged version(s){hint}");
    }
    Ok(())
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
        return Ok(vec![
            granary_node::control::create_face(c, src, false).await?,
        ]);
    }
    let prefix = Name::from_uri(src).map_err(|e| anyhow::anyhow!("{src}: {e}"))?;
    let fib = decode_dataset::<FibEntry>(
        &granary_node::control::dataset(c, "/localhost/nfd/fib/list").await?,
    )?;
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
        let nfd = granary_node::control::nfd();
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
