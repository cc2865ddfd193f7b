//! Dedup fetch (carepo's `caget`): an object whose signed manifest gives
//! every segment's SHA-256 is fetched one *unique chunk* at a time, each
//! chunk asked first of the local store, then of the neighbours by hash
//! request (short lifetime, no retry: carepo's Table I), then of the
//! producer by name. Every accepted payload is checked against the verified
//! manifest before a byte is written; a chunk that occurs several times in
//! the file is fetched once and written at every offset it occupies.
//!
//! The sources are names, so this crate needs neither the store nor the
//! repository: the caller says under which prefixes a chunk hash is asked
//! (Granary's are `/localhost/granary/sha256` for the node's own repository
//! and `/localhop/granary/sha256` for the neighbours').

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use granary_packet::{Component, Data, Name};

use crate::engine::{Engine, Job, JobState, Request, Stats};
use crate::file::part_paths;
use crate::items_job::{Item, ItemsJob, Outcome};
use crate::link::Link;
use crate::object::{Bitmap, Check, FileSink, ObjectInfo, ObjectJob};
use crate::Error;

/// Chunks in flight from the node's own store by hash (phase 1).
const LOCAL_WINDOW: usize = 256;

/// Which of these chunks (by SHA-256) a store holds: a hint, one `bool`
/// each.
pub type HasChunks = dyn Fn(&[[u8; 32]]) -> Vec<bool> + Send + Sync;

/// Reads chunks by SHA-256, calling back `(index, bytes)` for each one
/// found. It must pass only bytes it has checked against their hash
/// (`Store::chunks` does): they are written without hashing them again.
pub type ReadChunks = dyn Fn(&[[u8; 32]], &mut dyn FnMut(usize, Vec<u8>)) + Send + Sync;

/// Chunk bytes by SHA-256 from a store the caller has open ([`Sources::read_local`]).
#[derive(Clone)]
pub struct ChunkReader {
    /// Which chunks it holds.
    pub has: Arc<HasChunks>,
    /// Their bytes.
    pub read: Arc<ReadChunks>,
}

impl std::fmt::Debug for ChunkReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChunkReader")
    }
}

/// Where chunks are asked for before the producer.
#[derive(Debug, Clone)]
pub struct Sources {
    /// Prefix answered by the node's own store (`<prefix>/<hash>`); a miss
    /// should be a Nack at once.
    pub local: Option<Name>,
    /// Prefix of the own store's batch "have" query: an Interest whose
    /// ApplicationParameters are up to [`Sources::have_batch`] 32-byte
    /// hashes, answered with one byte per hash (1 = the store has it). When
    /// set, only the chunks it reports are asked of `local`, so a file the
    /// store has nothing of costs one query per batch, not one Interest per
    /// chunk.
    pub have: Option<Name>,
    /// Hashes per "have" query.
    pub have_batch: usize,
    /// The own store read directly, by a caller that has it open (the
    /// daemon's replication). When set, phase 1 asks it which chunks it
    /// holds and reads those on a thread of their own while the others are
    /// fetched, instead of asking `local` and `have` over NDN.
    pub read_local: Option<ChunkReader>,
    /// Prefix of hash requests to the neighbours (`None`: no neighbours).
    pub neighbours: Option<Name>,
    /// InterestLifetime of a neighbour's hash request (carepo: 500 ms).
    pub neighbour_lifetime: Duration,
    /// Retransmissions of a neighbour's hash request (carepo: none; on
    /// timeout the producer is asked).
    pub neighbour_retries: u32,
    /// The neighbours are first asked for this many chunks, spread evenly
    /// over the file; when they have none of them, the rest of the file is
    /// fetched by name (0: ask for every chunk).
    pub probe: usize,
    /// When no chunk is found in the own store or at a neighbour and no
    /// chunk repeats within the file, write nothing and return
    /// [`Dedup::Plain`]: the caller's by-name pipeline does it better.
    pub plain_if_nothing: bool,
}

impl Sources {
    /// carepo's Table I: 500 ms, no retransmission; every chunk asked of
    /// `local` and of the neighbours.
    pub fn new(local: Option<Name>, neighbours: Option<Name>) -> Sources {
        Sources {
            local,
            have: None,
            have_batch: 256,
            read_local: None,
            neighbours,
            neighbour_lifetime: Duration::from_millis(500),
            neighbour_retries: 0,
            probe: 0,
            plain_if_nothing: false,
        }
    }
}

/// Chunks and bytes from one source.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct FromSource {
    /// Unique chunks.
    pub chunks: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// What a dedup fetch did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DedupReport {
    /// Versioned name.
    pub versioned: String,
    /// Output file.
    pub path: PathBuf,
    /// File size.
    pub size: u64,
    /// Segments of the file.
    pub segments: u64,
    /// Distinct chunk hashes among them.
    pub unique_chunks: u64,
    /// From the node's own store.
    pub local: FromSource,
    /// From neighbours, by hash request.
    pub neighbours: FromSource,
    /// From the producer, by name.
    pub producer: FromSource,
    /// Segments (and bytes) written from a chunk fetched once for an
    /// earlier offset of the same file.
    pub repeated: FromSource,
    /// How the chunks were verified.
    pub verified_by: String,
    /// Where the time went, in seconds.
    pub timings: Timings,
}

/// Seconds spent in each part of a dedup fetch ([`DedupReport::timings`]).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Timings {
    /// Asking the own store which chunks it holds.
    pub lookup: f64,
    /// Reading them (beside the fetches that follow).
    pub own_store: f64,
    /// The neighbours and the producer.
    pub fetch: f64,
    /// Waiting for the own store's reads after the fetches.
    pub wait: f64,
    /// Making the file durable.
    pub sync: f64,
}

/// What [`fetch_dedup`] did.
#[derive(Debug)]
pub enum Dedup {
    /// Fetched by unique chunk: where each came from, and the statistics.
    Done(DedupReport, Stats),
    /// Nothing written: no chunk was found nearby and none repeats, and
    /// [`Sources::plain_if_nothing`] asked for the by-name pipeline then.
    /// The statistics of the lookups made.
    Plain(Stats),
}

/// Per-source index of a request in an item's list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Src {
    Local,
    Neighbour,
}

struct Plan {
    hash: [u8; 32],
    len: u64,
    /// Segments holding this chunk, first one first.
    segs: Vec<u64>,
}

struct Writer {
    file: std::fs::File,
    part: PathBuf,
    report: DedupReport,
    error: Option<String>,
}

/// True when the object's manifest gives every segment's hash and length
/// (a dedup fetch is possible).
pub fn dedup_possible(info: &ObjectInfo) -> bool {
    match &info.check {
        Check::Manifest(ck) => {
            info.map.file_size().is_some()
                && (0..info.map.count())
                    .all(|s| ck.segment_hash(s).is_some() && info.map.len(s).is_some())
        }
        Check::PerPacket(_) => false,
    }
}

/// The unique chunks of an object, in order of first occurrence.
fn plan(info: &ObjectInfo) -> Result<Vec<Plan>, Error> {
    let Check::Manifest(ck) = &info.check else {
        return Err(Error::Verify(format!(
            "{}: no signed manifest, so no chunk hashes to fetch by",
            info.versioned
        )));
    };
    let mut at: HashMap<[u8; 32], usize> = HashMap::new();
    let mut plans: Vec<Plan> = Vec::new();
    for seg in 0..info.map.count() {
        let (Some(hash), Some(len)) = (ck.segment_hash(seg), info.map.len(seg)) else {
            return Err(Error::Verify(format!(
                "{}: the manifest gives no hash or length for segment {seg}",
                info.versioned
            )));
        };
        match at.get(&hash) {
            Some(&i) => {
                if plans[i].len != len {
                    return Err(Error::Verify(format!(
                        "{}: the manifest gives segments {} and {seg} the same hash but different lengths",
                        info.versioned, plans[i].segs[0]
                    )));
                }
                plans[i].segs.push(seg);
            }
            None => {
                at.insert(hash, plans.len());
                plans.push(Plan {
                    hash,
                    len,
                    segs: vec![seg],
                });
            }
        }
    }
    Ok(plans)
}

fn requests(sources: &Sources, p: &Plan, srcs: &[Src]) -> Vec<Request> {
    srcs.iter()
        .map(|s| match s {
            Src::Local => {
                let mut r = Request::new(
                    sources
                        .local
                        .clone()
                        .unwrap_or_default()
                        .append(&Component::generic(&p.hash)),
                );
                // The node's own repository answers or Nacks at once.
                r.lifetime = Some(Duration::from_millis(1000));
                r.retries = Some(0);
                r
            }
            Src::Neighbour => {
                let mut r = Request::new(
                    sources
                        .neighbours
                        .clone()
                        .unwrap_or_default()
                        .append(&Component::generic(&p.hash)),
                );
                r.lifetime = Some(sources.neighbour_lifetime);
                r.retries = Some(sources.neighbour_retries);
                r
            }
        })
        .collect()
}

fn check_chunk(
    hash: [u8; 32],
    len: u64,
    what: String,
) -> impl FnMut(&Data) -> Result<(), String> + Send {
    move |d: &Data| {
        let c = d.content();
        if c.len() as u64 != len {
            return Err(format!(
                "{what}: {} bytes from {}, where the signed manifest says {len}",
                c.len(),
                d.name()
            ));
        }
        if d.content_sha256() != hash {
            return Err(format!(
                "{what}: the bytes from {} do not match the signed manifest",
                d.name()
            ));
        }
        Ok(())
    }
}

/// A job for the chunks `which` of `plans`, asked of `srcs` in order (a
/// miss is given up: the next phase fetches it);
/// completed chunks are written at all their offsets and counted by source.
fn phase_job(
    info: &ObjectInfo,
    sources: &Sources,
    plans: &[Plan],
    which: &[usize],
    srcs: &[Src],
    w: &Arc<Mutex<Writer>>,
    crcs: Option<crate::SegmentCrcs>,
) -> ItemsJob {
    let items: Vec<Item> = which
        .iter()
        .map(|&i| {
            let p = &plans[i];
            Item {
                requests: requests(sources, p, srcs),
                check: Box::new(check_chunk(
                    p.hash,
                    p.len,
                    format!("segment {} of {}", p.segs[0], info.versioned),
                )),
                // A miss goes to the next phase.
                optional: true,
            }
        })
        .collect();
    let places: Vec<Vec<u64>> = which
        .iter()
        .map(|&i| plans[i].segs.iter().map(|&s| info.map.start(s)).collect())
        .collect();
    let segs: Vec<Vec<u64>> = which.iter().map(|&i| plans[i].segs.clone()).collect();
    let srcs = srcs.to_vec();
    let w2 = w.clone();
    ItemsJob::new(items).on_done(move |i, o| {
        let Outcome::Got(d, at) = o else { return };
        let Ok(mut w) = w2.lock() else { return };
        if w.error.is_some() {
            return;
        }
        let offsets = &places[i];
        let bytes = d.content();
        for off in offsets {
            if let Err(e) = w.file.write_all_at(bytes, *off) {
                w.error = Some(format!("{}: {e}", w.part.display()));
                return;
            }
        }
        if let Some(c) = &crcs {
            let crc = crc32fast::hash(bytes);
            segs[i].iter().for_each(|&s| c.set(s, crc));
        }
        let n = bytes.len() as u64;
        let r = &mut w.report;
        let src = match srcs.get(*at) {
            Some(Src::Local) => &mut r.local,
            _ => &mut r.neighbours,
        };
        src.chunks += 1;
        src.bytes += n;
        let more = offsets.len() as u64 - 1;
        r.repeated.chunks += more;
        r.repeated.bytes += more * n;
    })
}

/// Asks the own store, `batch` hashes per query, which unique chunks it
/// has (one byte per hash in each answer). A query that fails counts as
/// "has none of them": those chunks come from elsewhere.
async fn have_query<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    prefix: &Name,
    plans: &[Plan],
    batch: usize,
) -> Result<(Vec<bool>, Stats), Error> {
    let batch = batch.max(1);
    let has = Arc::new(Mutex::new(vec![false; plans.len()]));
    let items: Vec<Item> = plans
        .chunks(batch)
        .map(|group| {
            let mut params = Vec::with_capacity(group.len() * 32);
            for p in group {
                params.extend_from_slice(&p.hash);
            }
            let mut r = Request::with_params(prefix, bytes::Bytes::from(params));
            r.lifetime = Some(Duration::from_millis(1000));
            r.retries = Some(1);
            r.must_be_fresh = true;
            let n = group.len();
            Item {
                requests: vec![r],
                check: Box::new(move |d: &Data| {
                    if d.content().len() == n {
                        Ok(())
                    } else {
                        Err(format!(
                            "a have answer of {} bytes for {n} hashes",
                            d.content().len()
                        ))
                    }
                }),
                optional: true,
            }
        })
        .collect();
    // The first batch alone: when the store has none of the file's first
    // `batch` chunks, it is taken to have none of the rest (a similar file
    // shares chunks from its start on), so a store full of other data costs
    // one query, not one per batch.
    let mut items = items;
    let rest = items.split_off(items.len().min(1));
    let mut st = Stats::default();
    for (offset, group) in [(0usize, items), (1usize, rest)] {
        if group.is_empty() {
            continue;
        }
        let h2 = has.clone();
        let mut job = ItemsJob::new(group).on_done(move |k, o| {
            let Outcome::Got(d, _) = o else { return };
            let Ok(mut h) = h2.lock() else { return };
            for (j, b) in d.content().iter().enumerate() {
                if let Some(slot) = h.get_mut((k + offset) * batch + j) {
                    *slot = *b == 1;
                }
            }
        });
        st = merge(&st, &engine.run(link, &mut [&mut job]).await?);
        drop(job);
        if offset == 0 && !has.lock().is_ok_and(|h| h.iter().any(|&b| b)) {
            break;
        }
    }
    let has = has.lock().map(|h| h.clone()).unwrap_or_default();
    Ok((has, st))
}

/// The statistics of the two phases as one run's.
fn merge(a: &Stats, b: &Stats) -> Stats {
    let mut s = b.clone();
    s.seconds += a.seconds;
    s.segments += a.segments;
    s.bytes += a.bytes;
    s.interests += a.interests;
    s.retransmissions += a.retransmissions;
    s.timeouts += a.timeouts;
    s.congestion_marks += a.congestion_marks;
    s.nacks_congestion += a.nacks_congestion;
    s.nacks_duplicate += a.nacks_duplicate;
    s.nacks_other += a.nacks_other;
    s.rejected += a.rejected;
    s.decreases_loss += a.decreases_loss;
    s.decreases_mark += a.decreases_mark;
    s.decreases_nack += a.decreases_nack;
    if a.segments > 0 {
        s.rtt_min_ms = if b.segments > 0 {
            a.rtt_min_ms.min(b.rtt_min_ms)
        } else {
            a.rtt_min_ms
        };
        s.rtt_max_ms = a.rtt_max_ms.max(b.rtt_max_ms);
        if b.segments == 0 {
            s.rtt_avg_ms = a.rtt_avg_ms;
        }
    }
    s.max_cwnd = a.max_cwnd.max(b.max_cwnd);
    s
}

/// Phase 2: the chunks `rest` of `plans` from the producer by name,
/// through the by-name pipeline a plain fetch uses (an [`ObjectJob`] over
/// the whole object that already has every other segment: in order,
/// combined writes, every segment checked against the manifest), then
/// written at the other offsets where they repeat.
async fn by_name<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    info: &ObjectInfo,
    plans: &[Plan],
    rest: &[usize],
    w: &Arc<Mutex<Writer>>,
) -> (Result<Stats, Error>, JobState) {
    let file = match w.lock().map(|w| (w.file.try_clone(), w.part.clone())) {
        Ok((Ok(f), _)) => f,
        Ok((Err(e), part)) => {
            return (
                Err(Error::Output(format!("{}: {e}", part.display()))),
                JobState::Done,
            )
        }
        Err(_) => {
            return (
                Err(Error::Output("dedup writer poisoned".into())),
                JobState::Done,
            )
        }
    };
    let count = info.map.count();
    let mut need = Bitmap::new(count);
    for &i in rest {
        need.set(plans[i].segs[0]);
    }
    let mut job = ObjectJob::new(
        info.clone(),
        0,
        u64::MAX,
        Box::new(
            FileSink::with_cache(file, 0, None, false, engine.config().keep_output_cached)
                .record_crcs(engine.config().segment_crcs.clone()),
        ),
    );
    for s in (0..count).filter(|&s| !need.get(s)) {
        job.already_have(s);
    }
    let run = engine.run(link, &mut [&mut job]).await;
    let state = job.state();
    // The sink's last bytes are written when the job goes.
    drop(job);
    if run.is_err() || !matches!(state, JobState::Done) {
        return (run, state);
    }
    let Ok(mut w) = w.lock() else {
        return (Err(Error::Output("dedup writer poisoned".into())), state);
    };
    let mut buf = Vec::new();
    for &i in rest {
        let p = &plans[i];
        if w.error.is_none() && p.segs.len() > 1 {
            buf.resize(p.len as usize, 0);
            let r = w
                .file
                .read_exact_at(&mut buf, info.map.start(p.segs[0]))
                .and_then(|_| {
                    p.segs[1..]
                        .iter()
                        .try_for_each(|&s| w.file.write_all_at(&buf, info.map.start(s)))
                });
            if let Err(e) = r {
                w.error = Some(format!("{}: {e}", w.part.display()));
            }
            if let Some(c) = &engine.config().segment_crcs {
                if let Some(crc) = c.get(p.segs[0]) {
                    p.segs[1..].iter().for_each(|&s| c.set(s, crc));
                }
            }
        }
        let more = p.segs.len() as u64 - 1;
        let r = &mut w.report;
        r.producer.chunks += 1;
        r.producer.bytes += p.len;
        r.repeated.chunks += more;
        r.repeated.bytes += more * p.len;
    }
    (run, state)
}

/// Records the seconds since `t` as one of the report's timings.
fn time_since(w: &Mutex<Writer>, t: std::time::Instant, field: fn(&mut Timings) -> &mut f64) {
    if let Ok(mut w) = w.lock() {
        *field(&mut w.report.timings) = t.elapsed().as_secs_f64();
    }
}

/// Reads the chunks `held` of `plans` from the own store on a blocking
/// thread and writes them at all their offsets; returns the ones it could
/// not read.
fn read_held(
    info: &ObjectInfo,
    plans: &[Plan],
    held: Vec<usize>,
    read: ChunkReader,
    w: Arc<Mutex<Writer>>,
    engine: &Engine,
) -> tokio::task::JoinHandle<Vec<usize>> {
    let hashes: Vec<[u8; 32]> = held.iter().map(|&i| plans[i].hash).collect();
    let work: Vec<(u64, Vec<u64>)> = held
        .iter()
        .map(|&i| (plans[i].len, plans[i].segs.clone()))
        .collect();
    let map = info.map.clone();
    let crcs = engine.config().segment_crcs.clone();
    tokio::task::spawn_blocking(move || {
        let t = std::time::Instant::now();
        let mut done = vec![false; held.len()];
        (read.read)(&hashes, &mut |k, bytes| {
            let Some((len, segs)) = work.get(k) else {
                return;
            };
            if bytes.len() as u64 != *len {
                return;
            }
            let Ok(mut w) = w.lock() else { return };
            if w.error.is_some() {
                return;
            }
            for &s in segs {
                if let Err(e) = w.file.write_all_at(&bytes, map.start(s)) {
                    w.error = Some(format!("{}: {e}", w.part.display()));
                    return;
                }
            }
            if let Some(c) = &crcs {
                let crc = crc32fast::hash(&bytes);
                segs.iter().for_each(|&s| c.set(s, crc));
            }
            let n = bytes.len() as u64;
            let more = segs.len() as u64 - 1;
            let r = &mut w.report;
            r.local.chunks += 1;
            r.local.bytes += n;
            r.repeated.chunks += more;
            r.repeated.bytes += more * n;
            done[k] = true;
        });
        time_since(&w, t, |x| &mut x.own_store);
        held.iter()
            .zip(done)
            .filter(|(_, d)| !d)
            .map(|(&i, _)| i)
            .collect()
    })
}

/// Fetches `info` into `out` by unique chunk (see the module doc). The file
/// is written as `<out>.part` and renamed when every chunk is in place (a
/// symbolic link's target is; an existing FIFO, device or socket is refused,
/// see [`crate::file::Output::for_path`]); on
/// failure the `.part` is removed (a dedup fetch is not resumable: use a
/// plain fetch with resume for that).
pub async fn fetch_dedup<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    info: &ObjectInfo,
    out: &Path,
    sources: &Sources,
) -> Result<Dedup, Error> {
    // The `.part` goes beside a symbolic link's target and is renamed onto
    // it; a FIFO, device or socket must never be replaced by a rename.
    let target = match crate::file::Output::for_path(out)? {
        crate::file::Output::File(t) => t,
        _ => {
            return Err(Error::Output(format!(
                "{}: not a regular file (a FIFO, device or socket); a dedup fetch writes out of order and renames, so fetch it by name",
                out.display()
            )))
        }
    };
    let out = target.as_path();
    let plans = plan(info)?;
    let size = info
        .map
        .file_size()
        .ok_or_else(|| Error::Fetch(format!("{}: size unknown", info.versioned)))?;
    let (part, state_p, hashes_p) = part_paths(out);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&part)
        .map_err(|e| Error::Output(format!("{}: {e}", part.display())))?;
    // A stale plain-fetch state must not make a later --resume trust this file.
    let _ = std::fs::remove_file(&state_p);
    let _ = std::fs::remove_file(&hashes_p);
    file.set_len(size)
        .map_err(|e| Error::Output(format!("{}: {e}", part.display())))?;
    let report = DedupReport {
        versioned: info.versioned.to_string(),
        path: out.to_path_buf(),
        size,
        segments: info.map.count(),
        unique_chunks: plans.len() as u64,
        verified_by: info.verified_by.clone(),
        ..Default::default()
    };
    let w = Arc::new(Mutex::new(Writer {
        file,
        part: part.clone(),
        report,
        error: None,
    }));
    // Phase 1: the own store, then the neighbours, by hash (a fixed window
    // of 30 as carepo, its own RTT estimate: the LAN's). Misses are given up
    // and go to phase 2: the producer by name, on the caller's engine (its
    // window and RTT estimate are the WAN's). One shared window would let a
    // burst of name requests meant for the slow link be sized by the LAN.
    let mut st1 = Stats::default();
    let mut rest: Vec<usize> = (0..plans.len()).collect();
    let hash_cfg = |window: usize| crate::Config {
        pipeline_type: crate::PipelineType::Fixed,
        pipeline_size: window,
        ..engine.config().clone()
    };
    let mut run1: Result<(), Error> = Ok(());
    // The own store read directly: which chunks it holds first, then those
    // read on a thread of their own while the rest is fetched.
    let mut reading: Option<tokio::task::JoinHandle<Vec<usize>>> = None;
    if let (Some(read), false) = (&sources.read_local, plans.is_empty()) {
        let t = std::time::Instant::now();
        let hashes: Vec<[u8; 32]> = plans.iter().map(|p| p.hash).collect();
        let has = read.has.clone();
        match tokio::task::spawn_blocking(move || has(&hashes)).await {
            Ok(has) => {
                let held: Vec<usize> = (0..plans.len())
                    .filter(|&i| has.get(i) == Some(&true))
                    .collect();
                rest.retain(|&i| has.get(i) != Some(&true));
                time_since(&w, t, |x| &mut x.lookup);
                if !held.is_empty() {
                    reading = Some(read_held(
                        info,
                        &plans,
                        held,
                        read.clone(),
                        w.clone(),
                        engine,
                    ));
                }
            }
            Err(e) => run1 = Err(Error::Output(format!("asking the own store: {e}"))),
        }
    } else if let (Some(_), false) = (&sources.local, plans.is_empty()) {
        // Which chunks the own store has: one batch query per
        // `have_batch` hashes, or (no `have` prefix) every chunk asked.
        let asked: Vec<usize> = match &sources.have {
            Some(prefix) => {
                let mut e0 = Engine::new(hash_cfg(8));
                match have_query(&mut e0, link, prefix, &plans, sources.have_batch).await {
                    Ok((has, st)) => {
                        st1 = merge(&st1, &st);
                        (0..plans.len()).filter(|&i| has[i]).collect()
                    }
                    Err(e) => {
                        run1 = Err(e);
                        Vec::new()
                    }
                }
            }
            None => rest.clone(),
        };
        if run1.is_ok() && !asked.is_empty() {
            // The own store is no congested link: a deep window (a Unix
            // face's 4 MiB send buffer holds 256 chunks of 8 KiB twice over).
            let mut e1 = Engine::new(hash_cfg(LOCAL_WINDOW));
            let mut job = phase_job(
                info,
                sources,
                &plans,
                &asked,
                &[Src::Local],
                &w,
                engine.config().segment_crcs.clone(),
            );
            match e1.run(link, &mut [&mut job]).await {
                Ok(st) => st1 = merge(&st1, &st),
                Err(e) => run1 = Err(e),
            }
            let mut got = vec![false; plans.len()];
            for &i in &asked {
                got[i] = true;
            }
            for k in job.failed() {
                got[asked[k]] = false;
            }
            rest.retain(|&i| !got[i]);
        }
    }
    let fetching = std::time::Instant::now();
    if let (Some(_), true, false) = (&sources.neighbours, run1.is_ok(), rest.is_empty()) {
        // The neighbours: a probe first; when they have none of it, the
        // rest goes by name at the producer's pace.
        let probe = if sources.probe == 0 {
            rest.len()
        } else {
            sources.probe.min(rest.len())
        };
        // The probe is spread evenly over the file, not its head: a new
        // version often changes its first chunks (a header, the first files
        // of a tar) and shares the rest.
        let mut picked = vec![false; rest.len()];
        for k in 0..probe {
            picked[k * rest.len() / probe] = true;
        }
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for (p, &i) in rest.iter().enumerate() {
            if picked[p] {
                first.push(i);
            } else {
                second.push(i);
            }
        }
        let mut e1 = Engine::new(hash_cfg(30));
        let mut left: Vec<usize> = Vec::new();
        for (round, which) in [first, second.clone()].into_iter().enumerate() {
            if which.is_empty() {
                continue;
            }
            let mut job = phase_job(
                info,
                sources,
                &plans,
                &which,
                &[Src::Neighbour],
                &w,
                engine.config().segment_crcs.clone(),
            );
            match e1.run(link, &mut [&mut job]).await {
                Ok(st) => st1 = merge(&st1, &st),
                Err(e) => {
                    run1 = Err(e);
                    break;
                }
            }
            let failed = job.failed();
            let none_found = failed.len() == which.len();
            left.extend(failed.into_iter().map(|k| which[k]));
            if round == 0 && none_found {
                left.extend_from_slice(&second);
                break;
            }
        }
        // The producer is asked in file order.
        left.sort_unstable();
        rest = left;
    }
    if run1.is_ok()
        && sources.plain_if_nothing
        && rest.len() == plans.len()
        && plans.len() as u64 == info.map.count()
    {
        // Nothing nearby and no chunk repeats: the by-name pipeline fetches
        // it in order, in constant memory, resumably.
        drop(w);
        let _ = std::fs::remove_file(&part);
        return Ok(Dedup::Plain(st1));
    }
    let mut state = JobState::Done;
    let mut run = run1.map(|_| Stats::default());
    if run.is_ok() && !rest.is_empty() {
        (run, state) = by_name(engine, link, info, &plans, &rest, &w).await;
    }
    let fetched = std::time::Instant::now();
    time_since(&w, fetching, |x| &mut x.fetch);
    if let Some(t) = reading {
        // Chunks the store said it held but could not give (stale index
        // entries) come by name too.
        let got = t.await;
        time_since(&w, fetched, |x| &mut x.wait);
        match got {
            Ok(missed) if !missed.is_empty() && run.is_ok() && state == JobState::Done => {
                let (r2, s2) = by_name(engine, link, info, &plans, &missed, &w).await;
                state = s2;
                run = match (run, r2) {
                    (Ok(a), Ok(b)) => Ok(merge(&a, &b)),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
            }
            Ok(_) => {}
            Err(e) => run = Err(Error::Output(format!("reading the own store: {e}"))),
        }
    }
    let run = run.map(|st2| merge(&st1, &st2));
    drop(plans);
    let w = Arc::try_unwrap(w)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .ok_or_else(|| Error::Output("dedup writer still shared".into()));
    let fail = |_: Option<&Writer>, e: Error| {
        let _ = std::fs::remove_file(&part);
        Err(e)
    };
    let w = match w {
        Ok(w) => w,
        Err(e) => return fail(None, e),
    };
    let st = match run {
        Ok(st) => st,
        Err(e) => return fail(Some(&w), e),
    };
    if let JobState::Failed(e) = state {
        return fail(Some(&w), Error::Fetch(format!("{}: {e}", info.versioned)));
    }
    if let Some(e) = &w.error {
        let e = Error::Output(e.clone());
        return fail(Some(&w), e);
    }
    let t = std::time::Instant::now();
    if let Err(e) = w.file.sync_all() {
        return fail(Some(&w), Error::Output(format!("{}: {e}", part.display())));
    }
    let mut w = w;
    w.report.timings.sync = t.elapsed().as_secs_f64();
    if let Err(e) = std::fs::rename(&part, out) {
        return fail(Some(&w), Error::Output(format!("{}: {e}", out.display())));
    }
    Ok(Dedup::Done(w.report, st))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{ChannelLink, Incoming};
    use crate::object::Check;
    use crate::{Config, SegmentCrcs, SegmentMap};
    use granary_face::{LinkFields, NetPacket};
    use granary_packet::DataBuilder;
    use sha2::{Digest, Sha256};
    use tokio::sync::mpsc;

    const SEG: usize = 1000;

    /// `data` in segments of `SEG` bytes, checked against a manifest of
    /// their hashes.
    fn object(data: &[u8]) -> ObjectInfo {
        let level0: Vec<u8> = data
            .chunks(SEG)
            .flat_map(|c| <[u8; 32]>::from(Sha256::digest(c)))
            .collect();
        let count = (level0.len() / 32) as u64;
        let size = data.len() as u64;
        let (upper, root) = granary_manifest::compute(&level0, SEG as u64, size, None);
        assert!(upper.is_empty());
        ObjectInfo {
            versioned: Name::from_uri("/t/obj/v=1").unwrap(),
            map: SegmentMap::fixed(SEG as u64, count, Some(size)).unwrap(),
            check: Check::Manifest(Arc::new(granary_manifest::Checker::new(root))),
            verified_by: "test".into(),
        }
    }

    /// The producer: answers `/t/obj/v=1/seg=N` with segment N of `data`,
    /// and counts the segments asked for.
    fn producer(data: Vec<u8>, asked: Arc<Mutex<Vec<u64>>>) -> ChannelLink {
        let (tx, mut from_engine) = mpsc::channel::<Incoming>(1024);
        let (to_engine, rx) = mpsc::channel::<Incoming>(1024);
        tokio::spawn(async move {
            while let Some((p, _)) = from_engine.recv().await {
                let NetPacket::Interest(i) = p else { continue };
                let Some(n) = i.name.last().and_then(|c| c.as_segment()) else {
                    continue;
                };
                asked.lock().unwrap().push(n);
                let at = n as usize * SEG;
                let d = DataBuilder::new(i.name.clone())
                    .content(data[at..(at + SEG).min(data.len())].to_vec())
                    .encode_with_signature(bytes::Bytes::from_static(&[0; 32]));
                if to_engine
                    .send((NetPacket::Data(d), LinkFields::default()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        ChannelLink { tx, rx }
    }

    #[tokio::test]
    async fn own_store_chunks_are_read_beside_the_fetch_and_what_it_cannot_give_comes_by_name() {
        // 60 segments; 50 and 51 repeat segment 10's bytes.
        let mut data: Vec<u8> = (0..60 * SEG).map(|i| (i * 31 + i / 977) as u8).collect();
        for k in [50, 51] {
            let (a, b) = data.split_at_mut(k * SEG);
            b[..SEG].copy_from_slice(&a[10 * SEG..11 * SEG]);
        }
        let info = object(&data);
        let hash = |k: usize| <[u8; 32]>::from(Sha256::digest(&data[k * SEG..(k + 1) * SEG]));
        // The store says it holds the even segments' chunks, but gives
        // only those below 40 (the others' files are gone).
        let chunks: HashMap<[u8; 32], Vec<u8>> = (0..40)
            .step_by(2)
            .map(|k| (hash(k), data[k * SEG..(k + 1) * SEG].to_vec()))
            .collect();
        let claimed: Vec<[u8; 32]> = (0..60).step_by(2).map(hash).collect();
        let reader = ChunkReader {
            has: Arc::new(move |hs| hs.iter().map(|h| claimed.contains(h)).collect()),
            read: Arc::new(move |hs, got| {
                for (i, h) in hs.iter().enumerate() {
                    if let Some(b) = chunks.get(h) {
                        got(i, b.clone());
                    }
                }
            }),
        };
        let mut sources = Sources::new(None, None);
        sources.read_local = Some(reader);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut link = producer(data.clone(), asked.clone());
        let crcs = SegmentCrcs::default();
        let mut engine = Engine::new(Config {
            segment_crcs: Some(crcs.clone()),
            ..Config::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let Dedup::Done(r, _) = fetch_dedup(&mut engine, &mut link, &info, &out, &sources)
            .await
            .unwrap()
        else {
            panic!("fetched by name")
        };
        assert_eq!(std::fs::read(&out).unwrap(), data);
        // 20 chunks from the store (segment 10 among them, written at 50
        // and 51 too); 38 unique by name: the odd ones and the even ones
        // from 40 on, which the store claimed and could not give.
        assert_eq!(r.unique_chunks, 58);
        assert_eq!((r.local.chunks, r.producer.chunks), (20, 38), "{r:?}");
        assert_eq!(r.repeated.chunks, 2);
        let mut asked = asked.lock().unwrap().clone();
        asked.sort_unstable();
        asked.dedup();
        let want: Vec<u64> = (1..40).step_by(2).chain(40..50).chain(52..60).collect();
        assert_eq!(asked, want, "segments asked by name");
        // Every segment's CRC-32 was recorded, wherever it came from.
        let all = crcs.all(60).expect("every CRC-32");
        for (k, c) in all.iter().enumerate() {
            assert_eq!(*c, crc32fast::hash(&data[k * SEG..(k + 1) * SEG]), "{k}");
        }
    }
}
