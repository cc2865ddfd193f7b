//! Everything the mount asks of the network, through the local daemon: a
//! pool of connections (each with its own fetch engine, whose window and
//! RTT estimate carry over between reads), directory listings (`32=ls`),
//! RDR metadata, opening a version (its signed manifest), and reading the
//! segments covering a byte range through the shared block cache. A
//! version the node holds is read from the node's own file instead
//! (decision 0100: the node passes it open; every segment is still checked
//! against the signed manifest, and one that fails is asked for by name).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use granary_packet::{types::COMP_VERSION, Component, Name};
use granary_transfer::object::parse_metadata;
use granary_transfer::{
    discover, fetch_one, Config, Engine, Job, JobState, ObjectInfo, ObjectJob, OpenOptions,
    Request, Sink, Trust, UnixLink,
};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::cache::{BlockCache, Claim, Key, Outcome};

/// Why an operation failed, as the file system reports it.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Nothing under that name (ENOENT).
    #[error("not found: {0}")]
    NotFound(String),
    /// The producer did not answer in time, a segment failed verification,
    /// or the node is gone (EIO).
    #[error("{0}")]
    Io(String),
}

/// What a listing says about one child.
#[derive(Debug, Clone)]
pub struct Child {
    /// The child's component.
    pub comp: Component,
    /// It is a stored object.
    pub object: bool,
    /// It has children of its own.
    pub prefix: bool,
}

/// What RDR metadata says about an object's latest version.
#[derive(Debug, Clone)]
pub struct Meta {
    /// `<name>/v=<version>`.
    pub versioned: Name,
    /// Size in bytes, when the producer says.
    pub size: Option<u64>,
    /// The version as a time ([`version_time`]).
    pub mtime: SystemTime,
}

/// A version as a file time: [`granary_packet::version_time`], the epoch
/// when the number is not a time.
pub fn version_time(v: u64) -> SystemTime {
    granary_packet::version_time(v).unwrap_or(UNIX_EPOCH)
}

struct Conn {
    link: UnixLink,
    engine: Engine,
    _permit: OwnedSemaphorePermit,
}

/// The fetcher: connections to the node, the block cache, open objects.
pub struct Fetcher {
    socket: PathBuf,
    cfg: Config,
    trust: Arc<Trust>,
    free: Mutex<Vec<(UnixLink, Engine)>>,
    permits: Arc<Semaphore>,
    /// Give up on any one operation after this long (EIO).
    pub timeout: Duration,
    /// The shared block cache.
    pub cache: BlockCache,
    ids: Mutex<HashMap<String, u64>>,
    infos: Mutex<lru::LruCache<String, Arc<ObjectInfo>>>,
    /// How to open a version the node holds; `None`: always by name.
    local: Option<LocalFiles>,
    /// The node's file of each version opened (by version id); `None`:
    /// asked, not held (or refused by the manifest once).
    files: Mutex<HashMap<u64, Option<Arc<std::fs::File>>>>,
    /// Where reads came from.
    pub counts: ReadCounts,
}

/// Connections to the node (fetches running at once).
const CONNECTIONS: usize = 8;

/// Opens the data file of the version an [`ObjectInfo`] names when the
/// local node holds it (the binary asks the node's file socket, decision
/// 0100); `None`: the version is read by name. Called once per version,
/// on a blocking thread.
pub type LocalFiles = Arc<dyn Fn(&ObjectInfo) -> Option<std::fs::File> + Send + Sync>;

/// What reads took from the node's file and what they fetched by name.
#[derive(Debug, Default)]
pub struct ReadCounts {
    /// Segments read from the node's file, each checked against the manifest.
    pub local_segments: std::sync::atomic::AtomicU64,
    /// Local reads that stopped at a segment the manifest refused (the rest
    /// of that version is then read by name).
    pub local_refused: std::sync::atomic::AtomicU64,
}

impl Fetcher {
    /// A fetcher through the node at `socket`.
    pub fn new(
        socket: PathBuf,
        trust: Arc<Trust>,
        timeout: Duration,
        cache_bytes: usize,
        forwarding_hint: Vec<granary_packet::Name>,
        locator: Option<granary_transfer::LocatorRef>,
    ) -> Fetcher {
        let lifetime = timeout.clamp(Duration::from_millis(100), Duration::from_secs(4));
        let cfg = Config {
            lifetime,
            // The mount's own timeout bounds every operation.
            retries: 15,
            forwarding_hint,
            locator,
            ..Config::default()
        };
        Fetcher {
            socket,
            cfg,
            trust,
            free: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(CONNECTIONS)),
            timeout,
            cache: BlockCache::new(cache_bytes),
            ids: Mutex::new(HashMap::new()),
            infos: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(256).expect("256 > 0"),
            )),
            local: None,
            files: Mutex::new(HashMap::new()),
            counts: ReadCounts::default(),
        }
    }

    /// The same fetcher, reading versions the node holds from its file.
    pub fn with_local_files(mut self, local: Option<LocalFiles>) -> Fetcher {
        self.local = local;
        self
    }

    /// Asks once per version whether the node holds it (its file, open).
    async fn find_local(&self, id: u64, info: &Arc<ObjectInfo>) {
        let Some(local) = self.local.clone() else {
            return;
        };
        if self
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&id)
        {
            return;
        }
        let i = info.clone();
        let file = tokio::task::spawn_blocking(move || local(&i))
            .await
            .ok()
            .flatten()
            .map(Arc::new);
        if file.is_some() {
            tracing::debug!("{}: read from the node's file", info.versioned);
        }
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id)
            .or_insert(file);
    }

    fn local_file(&self, id: u64) -> Option<Arc<std::fs::File>> {
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
            .flatten()
    }

    /// Reads the claimed segments in `first..=last` from the node's file,
    /// each checked against the manifest before the cache gets it; stops at
    /// the first that fails (the version is then read by name from then on).
    fn read_local(
        &self,
        file: &std::fs::File,
        id: u64,
        info: &ObjectInfo,
        first: u64,
        last: u64,
        pending: &Mutex<HashMap<u64, watch::Sender<Outcome>>>,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        let map = &info.map;
        let lo = map.start(first);
        let hi = map.start(last) + map.len(last).unwrap_or(0);
        let mut seg = first;
        let got = granary_transfer::read_verified(file, info, lo, hi, |block| {
            // Blocks are whole segments, in order, from `first` on.
            let mut at = 0usize;
            while at < block.len() {
                let Some(len) = map.len(seg) else {
                    return false;
                };
                let end = (at + len as usize).min(block.len());
                let tx = pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&seg);
                if let Some(tx) = tx {
                    self.cache.fill((id, seg), &tx, block.slice(at..end));
                    self.counts.local_segments.fetch_add(1, Relaxed);
                }
                at = end;
                seg += 1;
            }
            true
        });
        if let Err(e) = got {
            tracing::warn!("{e}; reading {} by name", info.versioned);
            self.counts.local_refused.fetch_add(1, Relaxed);
            self.files
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, None);
        }
    }

    async fn take(&self) -> Result<Conn, FetchError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| FetchError::Io("the fetcher is shut down".into()))?;
        let reuse = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let (link, engine) = match reuse {
            Some(c) => c,
            None => {
                let link = UnixLink::connect(&self.socket).await.map_err(|e| {
                    FetchError::Io(format!(
                        "cannot reach the node at {}: {e}",
                        self.socket.display()
                    ))
                })?;
                link.prehash(true);
                (link, Engine::new(self.cfg.clone()))
            }
        };
        Ok(Conn {
            link,
            engine,
            _permit: permit,
        })
    }

    /// A connection whose last operation ended cleanly goes back to the
    /// pool; one that timed out is dropped (late answers must not reach
    /// the next operation).
    fn give(&self, c: Conn) {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((c.link, c.engine));
    }

    /// Runs one packet fetch with the mount's timeout.
    async fn one(&self, req: Request) -> Result<granary_packet::Data, FetchError> {
        let mut c = self.take().await?;
        let what = req.name.to_string();
        match tokio::time::timeout(self.timeout, fetch_one(&mut c.engine, &mut c.link, req)).await {
            Ok(Ok(d)) => {
                self.give(c);
                Ok(d)
            }
            Ok(Err(granary_transfer::Error::Fetch(e))) => {
                self.give(c);
                Err(FetchError::NotFound(format!("{what}: {e}")))
            }
            Ok(Err(e)) => Err(FetchError::Io(format!("{what}: {e}"))),
            Err(_) => Err(FetchError::Io(format!(
                "{what}: no answer within {:?}",
                self.timeout
            ))),
        }
    }

    /// The children of `prefix` (`<prefix>/32=ls`, every segment).
    pub async fn list(&self, prefix: &Name) -> Result<Vec<Child>, FetchError> {
        let ls = prefix.append(&Component::keyword(b"ls"));
        let mut r = Request::new(ls.clone());
        r.can_be_prefix = true;
        r.must_be_fresh = true;
        r.retries = Some(1);
        let first = self.one(r).await?;
        self.check_digest(&first)?;
        let n = first.name().clone();
        let version = n
            .get(-2)
            .filter(|c| c.typ == COMP_VERSION)
            .map(|c| c.to_owned())
            .ok_or_else(|| FetchError::Io(format!("listing {n} has no version")))?;
        let last = first
            .final_block_id()
            .and_then(|c| c.as_ref().as_segment())
            .unwrap_or(0);
        let mut text = first.content().to_vec();
        for s in 1..=last.min(100_000) {
            let d = self
                .one(Request::new(
                    ls.append(&version).append(&Component::segment(s)),
                ))
                .await?;
            self.check_digest(&d)?;
            text.extend_from_slice(d.content());
        }
        let text = String::from_utf8_lossy(&text);
        let mut out: Vec<Child> = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (uri, prefix) = match line.strip_suffix('/') {
                Some(u) => (u, true),
                None => (line, false),
            };
            let Some(comp) = Name::from_uri(&format!("/{uri}"))
                .ok()
                .and_then(|n| n.get(0).map(|c| c.to_owned()))
            else {
                continue;
            };
            match out.iter_mut().find(|c| c.comp == comp) {
                Some(c) if prefix => c.prefix = true,
                Some(c) => c.object = true,
                None => out.push(Child {
                    comp,
                    object: !prefix,
                    prefix,
                }),
            }
        }
        Ok(out)
    }

    /// A listing or metadata packet signed with DigestSha256 or a key the
    /// user trusts must verify; a NullSignature is taken as a pointer only.
    /// (A listing is names, not file content: a DigestSha256 on it is
    /// checked as such even without `--integrity-only`, whose rule is for
    /// the files' bytes.)
    fn check_digest(&self, d: &granary_packet::Data) -> Result<(), FetchError> {
        self.trust.check_pointer(d).map_err(FetchError::Io)
    }

    /// RDR metadata of `name` (its latest version and size).
    pub async fn metadata(&self, name: &Name) -> Result<Meta, FetchError> {
        let mut r = Request::new(name.append(&Component::keyword(b"metadata")));
        r.can_be_prefix = true;
        r.must_be_fresh = true;
        r.retries = Some(1);
        let d = self.one(r).await?;
        let m = parse_metadata(&Bytes::copy_from_slice(d.content()))
            .map_err(|e| FetchError::Io(format!("metadata of {name}: {e}")))?;
        let v = m
            .versioned
            .last()
            .filter(|c| c.typ == COMP_VERSION)
            .and_then(|c| c.as_number());
        match v {
            Some(v) if name.is_prefix_of(&m.versioned) && m.versioned.len() == name.len() + 1 => {
                Ok(Meta {
                    versioned: m.versioned,
                    size: m.size,
                    mtime: version_time(v),
                })
            }
            _ => Err(FetchError::Io(format!(
                "metadata of {name} names {}, not a version of it",
                m.versioned
            ))),
        }
    }

    /// Opens a version: its signed manifest (or per-packet verification)
    /// and layout; kept for re-opens.
    pub async fn open(&self, versioned: &Name) -> Result<(u64, Arc<ObjectInfo>), FetchError> {
        let key = versioned.to_string();
        let id = self.id_of(&key);
        let known = self
            .infos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(i) = known {
            self.find_local(id, &i).await;
            return Ok((id, i));
        }
        let mut c = self.take().await?;
        let opts = OpenOptions {
            no_discovery: true,
            no_manifest: false,
        };
        let got = tokio::time::timeout(
            self.timeout,
            discover(
                &mut c.engine,
                &mut c.link,
                versioned,
                self.trust.clone(),
                &opts,
            ),
        )
        .await;
        let info = match got {
            Ok(Ok(i)) => {
                self.give(c);
                Arc::new(i)
            }
            Ok(Err(e)) => return Err(FetchError::Io(format!("{versioned}: {e}"))),
            Err(_) => {
                return Err(FetchError::Io(format!(
                    "{versioned}: no answer within {:?}",
                    self.timeout
                )))
            }
        };
        self.infos
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .put(key, info.clone());
        self.find_local(id, &info).await;
        Ok((id, info))
    }

    /// Forgets what was known of a version (after it was removed or
    /// renamed here).
    pub fn forget(&self, versioned_prefix: &Name) {
        let mut g = self.infos.lock().unwrap_or_else(|p| p.into_inner());
        let gone: Vec<String> = g
            .iter()
            .filter(|(_, i)| versioned_prefix.is_prefix_of(&i.versioned))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            g.pop(&k);
        }
    }

    fn id_of(&self, key: &str) -> u64 {
        let mut g = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        let n = g.len() as u64 + 1;
        *g.entry(key.to_string()).or_insert(n)
    }

    /// Bytes `[off, off + len)` of an open object (fewer at its end): only
    /// the covering segments that are not cached are fetched, each
    /// verified; `ahead` more bytes after the range are fetched in the
    /// background (read-ahead).
    pub async fn read(
        self: &Arc<Self>,
        id: u64,
        info: &Arc<ObjectInfo>,
        off: u64,
        len: u64,
        ahead: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let map = &info.map;
        let size = map.file_size().unwrap_or(u64::MAX);
        let hi = off.saturating_add(len).min(size);
        if off >= hi {
            return Ok(Vec::new());
        }
        let want = map.covering(off, hi);
        let claims = self.cache.claim(want.clone().map(|s| (id, s)));
        let mut mine = Vec::new();
        let mut parts: Vec<(u64, Result<Bytes, watch::Receiver<Outcome>>)> = Vec::new();
        for ((_, seg), cl) in claims {
            match cl {
                Claim::Have(b) => parts.push((seg, Ok(b))),
                Claim::Wait(rx) => parts.push((seg, Err(rx))),
                Claim::Fetch(tx, rx) => {
                    mine.push((seg, tx));
                    parts.push((seg, Err(rx)));
                }
            }
        }
        // Read-ahead: once the second half of the window is not yet
        // asked for, ask for the whole window in one job.
        if ahead > 0 && hi < size {
            let end = hi.saturating_add(ahead).min(size);
            let next = map.covering(hi, end);
            let mid = next.start + (next.end - next.start) / 2;
            if next.end > next.start && !self.cache.known(&(id, mid)) {
                let mut bg = Vec::new();
                for ((_, seg), cl) in self.cache.claim(next.map(|s| (id, s))) {
                    if let Claim::Fetch(tx, _) = cl {
                        bg.push((seg, tx));
                    }
                }
                if !bg.is_empty() {
                    let me = self.clone();
                    let info = info.clone();
                    tokio::spawn(async move { me.fetch(id, info, bg).await });
                }
            }
        }
        if !mine.is_empty() {
            let me = self.clone();
            let info = info.clone();
            tokio::spawn(async move { me.fetch(id, info, mine).await });
        }
        let mut out = Vec::with_capacity((hi - off) as usize);
        let deadline = tokio::time::Instant::now() + self.timeout;
        for (seg, p) in parts {
            let b = match p {
                Ok(b) => b,
                Err(mut rx) => {
                    let got = tokio::time::timeout_at(deadline, rx.wait_for(|v| v.is_some()))
                        .await
                        .map_err(|_| {
                            FetchError::Io(format!(
                                "segment {seg} of {}: no answer within {:?}",
                                info.versioned, self.timeout
                            ))
                        })?
                        .map_err(|_| FetchError::Io("fetch abandoned".into()))?
                        .clone();
                    match got {
                        Some(Ok(b)) => b,
                        Some(Err(e)) => return Err(FetchError::Io(e)),
                        None => return Err(FetchError::Io("fetch abandoned".into())),
                    }
                }
            };
            let start = map.start(seg);
            let from = off.saturating_sub(start).min(b.len() as u64) as usize;
            let to = hi.saturating_sub(start).min(b.len() as u64) as usize;
            out.extend_from_slice(&b[from..to]);
        }
        Ok(out)
    }

    /// Fetches claimed segments (one job over their span; segments in the
    /// span claimed by others are skipped), filling the cache as each one
    /// verifies; on failure or timeout every claim still open fails.
    async fn fetch(
        self: Arc<Self>,
        id: u64,
        info: Arc<ObjectInfo>,
        claimed: Vec<(u64, watch::Sender<Outcome>)>,
    ) {
        let (Some(first), Some(last)) = (
            claimed.iter().map(|c| c.0).min(),
            claimed.iter().map(|c| c.0).max(),
        ) else {
            return;
        };
        let pending: Arc<Mutex<HashMap<u64, watch::Sender<Outcome>>>> =
            Arc::new(Mutex::new(claimed.into_iter().collect()));
        if let Some(file) = self.local_file(id) {
            let (me, i, p) = (self.clone(), info.clone(), pending.clone());
            let _ =
                tokio::task::spawn_blocking(move || me.read_local(&file, id, &i, first, last, &p))
                    .await;
            if pending.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
                return;
            }
        }
        let result = async {
            let mut c = self.take().await?;
            let lo = info.map.start(first);
            let hi = info.map.start(last) + info.map.len(last).unwrap_or(0);
            let sink = CacheSink {
                id,
                fetcher: self.clone(),
                pending: pending.clone(),
            };
            let mut job = ObjectJob::new((*info).clone(), lo, hi, Box::new(sink));
            {
                let p = pending.lock().unwrap_or_else(|p| p.into_inner());
                for s in first..=last {
                    if !p.contains_key(&s) {
                        job.already_have(s);
                    }
                }
            }
            let run =
                tokio::time::timeout(self.timeout, c.engine.run(&mut c.link, &mut [&mut job]))
                    .await;
            match run {
                Err(_) => Err(FetchError::Io(format!(
                    "{}: no answer within {:?}",
                    info.versioned, self.timeout
                ))),
                Ok(Err(e)) => Err(FetchError::Io(format!("{}: {e}", info.versioned))),
                Ok(Ok(_)) => {
                    self.give(c);
                    match job.state() {
                        JobState::Failed(e) => Err(FetchError::Io(e)),
                        _ => Ok(()),
                    }
                }
            }
        }
        .await;
        let why = match result {
            Err(e) => e.to_string(),
            Ok(()) => "segment not delivered".to_string(),
        };
        let left: Vec<_> = pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        if !left.is_empty() {
            tracing::debug!(segments = left.len(), "{why}");
        }
        for (seg, tx) in left {
            self.cache.fail((id, seg), &tx, &why);
        }
    }
}

/// Hands each verified segment to the cache and its waiters.
struct CacheSink {
    id: u64,
    fetcher: Arc<Fetcher>,
    pending: Arc<Mutex<HashMap<u64, watch::Sender<Outcome>>>>,
}

impl Sink for CacheSink {
    fn put(&mut self, _offset: u64, _bytes: &[u8]) -> std::io::Result<()> {
        Ok(())
    }

    fn segment_done(&mut self, seg: u64, content: &[u8]) -> std::io::Result<()> {
        let tx = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&seg);
        if let Some(tx) = tx {
            let k: Key = (self.id, seg);
            self.fetcher
                .cache
                .fill(k, &tx, Bytes::copy_from_slice(content));
        }
        Ok(())
    }
}
