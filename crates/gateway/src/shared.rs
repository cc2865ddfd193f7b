//! State the gateway makes once, at start, and shares between requests: the
//! node's repository store (read-only), the trust anchors (reloaded when the
//! keychain changes), and the verified manifests of the versions it served
//! lately. No request opens the store or the keychain, and none writes to
//! the data directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use granary_packet::types::{sig_type, COMP_VERSION};
use granary_packet::{Component, Data, Name};
use granary_repo::manifest::{self as mf, Checker, Root};
use granary_store::{Entry, Store};
use granary_transfer::object::Check;
use granary_transfer::{ObjectInfo, SegmentMap, Trust, INTEGRITY_ONLY};

/// How often the keychain is looked at for changes (at most).
const ANCHORS_RECHECK: Duration = Duration::from_secs(1);
/// Lookups the gateway's store handle caches (each holds its data file open).
const STORE_CACHE_MAX: usize = 1024;
/// How long the gateway trusts a lookup: a file asked for again within it (the
/// next user of a dataset, a script's second pass) is answered on the async
/// worker when its bytes are in memory. Other processes' changes are seen through
/// each hit's checks (the file's inode, the name's directory), not by expiry; an
/// idle gateway closes the files it served within this and the sweep's 2 s.
const STORE_CACHE_TTL: Duration = Duration::from_secs(10);
/// Verified manifests kept: at most this many versions…
const INFOS_MAX: usize = 4096;
/// …and this many segment hashes in all (32 bytes each, plus spans).
const INFOS_MAX_SEGMENTS: u64 = 1 << 20;

/// The gateway's shared handles (see the module comment).
pub struct Shared {
    /// The repository's store, when the node has one.
    pub(crate) store: Option<Arc<Store>>,
    /// Trust anchors and own certificates.
    pub(crate) anchors: Anchors,
    infos: Mutex<Infos>,
    /// `/data` bodies read from the repository on the async worker (lookup and
    /// manifest cached, bytes in the page cache) and on a blocking thread.
    pub(crate) local_reads: LocalReads,
    /// Catalog calls running at once (on blocking threads).
    pub(crate) catalog_slots: Arc<tokio::sync::Semaphore>,
    /// The low-priority threads the catalog calls run on (one per slot).
    pub(crate) eval: crate::pool::Pool,
    /// Read buffers of `/data`'s local route, reused.
    pub(crate) pool: Arc<crate::local::Pool>,
    /// Quick-look pictures made lately (`/api/preview`).
    pub(crate) previews: crate::preview::Cache,
    /// The catalog's length as last read (`/api/status`, `/metrics`).
    catalog_len: Arc<Mutex<CatalogLen>>,
}

/// A small body read at once: `(start, end, bytes or why not)`.
pub(crate) type SmallBody = (u64, u64, Result<Bytes, String>);

/// How `/data` bodies of versions the node holds were read (`/metrics`).
#[derive(Default)]
pub(crate) struct LocalReads {
    pub(crate) worker: std::sync::atomic::AtomicU64,
    pub(crate) blocking: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct CatalogLen {
    value: Option<u64>,
    read: Option<std::time::Instant>,
    reading: bool,
}

/// How old the catalog length shown may be.
const CATALOG_LEN_TTL: Duration = Duration::from_secs(1);
/// How long a status request waits for a fresh length before it shows the last one.
const CATALOG_LEN_WAIT: Duration = Duration::from_millis(100);

/// Catalog calls run at once: twice the cores (at least 4).
fn slots() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * 2).max(4)
}

fn catalog_slots() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(slots()))
}

#[derive(Default)]
struct Infos {
    map: HashMap<(PathBuf, String, u64), Arc<ObjectInfo>>,
    segments: u64,
}

/// A version the node's repository holds, with its verified manifest.
pub(crate) struct Local {
    pub entry: Arc<Entry>,
    pub info: Arc<ObjectInfo>,
    /// The manifest digest (hex), the catalog's `manifest_digest`.
    pub digest: String,
}

impl Shared {
    /// Opens the repository under `data_dir` (if there is one: nothing is
    /// created otherwise) and loads the keychain's trust. The store's
    /// expired lookups are dropped by its sweeper, so the files of versions
    /// served are closed within seconds.
    pub fn open(data_dir: &Path) -> Arc<Shared> {
        let repo = data_dir.join("repo");
        let store = if repo.join("objects").is_dir() {
            match Store::open(&repo) {
                Ok(s) => {
                    // Each cached lookup holds one open file: every segment
                    // is checked against the signed manifest, so the
                    // store's own hash, CRC and damage files are not opened.
                    s.set_cache_max(STORE_CACHE_MAX);
                    s.set_cache_ttl(STORE_CACHE_TTL);
                    s.set_data_only(true);
                    Some(Arc::new(s))
                }
                Err(e) => {
                    tracing::warn!(
                        "gateway: repository {} not opened ({e}); /data fetches over NDN",
                        repo.display()
                    );
                    None
                }
            }
        } else {
            None
        };
        Arc::new(Shared {
            store,
            anchors: Anchors::new(data_dir.join("keychain")),
            infos: Default::default(),
            previews: Default::default(),
            local_reads: LocalReads::default(),
            catalog_slots: catalog_slots(),
            eval: crate::pool::Pool::new(slots()),
            pool: Default::default(),
            catalog_len: Default::default(),
        })
    }

    /// No store, trust from `keychain` (for tests).
    pub fn without_store(keychain: &Path) -> Arc<Shared> {
        Arc::new(Shared {
            store: None,
            anchors: Anchors::new(keychain.to_path_buf()),
            infos: Default::default(),
            previews: Default::default(),
            local_reads: LocalReads::default(),
            catalog_slots: catalog_slots(),
            eval: crate::pool::Pool::new(slots()),
            pool: Default::default(),
            catalog_len: Default::default(),
        })
    }

    /// The catalog's record count for status pages: read on a blocking thread
    /// at most once a second, and never waited for long. The catalog's lock may
    /// be held by a long search; `/api/status` and `/metrics` must answer
    /// anyway, so they show the last count (or none yet).
    pub(crate) async fn catalog_len(&self, cat: &Arc<granary_catalog::Catalog>) -> Option<u64> {
        let start = {
            let mut g = self.catalog_len.lock().ok()?;
            let fresh = g.read.is_some_and(|t| t.elapsed() < CATALOG_LEN_TTL);
            let start = !fresh && !g.reading;
            g.reading |= start;
            start
        };
        if start {
            let (cat, cell) = (cat.clone(), self.catalog_len.clone());
            let read = tokio::task::spawn_blocking(move || {
                let n = cat.len().ok();
                if let Ok(mut g) = cell.lock() {
                    if n.is_some() {
                        g.value = n;
                    }
                    g.read = Some(std::time::Instant::now());
                    g.reading = false;
                }
            });
            let _ = tokio::time::timeout(CATALOG_LEN_WAIT, read).await;
        }
        self.catalog_len.lock().ok()?.value
    }

    /// The version `target` names (the latest when it has no version
    /// component) when the repository holds it and has a signed manifest
    /// for it that `trust` verifies. `None` sends the request over NDN.
    /// Blocking (file reads).
    pub(crate) fn open_local(
        &self,
        trust: &Arc<Trust>,
        generation: u64,
        target: &Name,
    ) -> Result<Option<Local>, String> {
        let Some(store) = self.store.as_ref() else {
            return Ok(None);
        };
        let (name, version) = match target.last() {
            Some(c) if c.typ == COMP_VERSION => match c.as_version() {
                Some(v) => (target.prefix(-1), Some(v)),
                None => return Ok(None),
            },
            _ => (target.clone(), None),
        };
        // The node may hold it but cannot look now (out of descriptors or
        // memory): a temporary condition, never "not held".
        let entry = match store.get_shared(&name, version) {
            Ok(e) => e,
            Err(granary_store::Error::Io { path, source })
                if crate::budget::temporary_io(&source) =>
            {
                return Err(format!(
                    "the node cannot read its repository now ({path}: {source})"
                ))
            }
            Err(_) => return Ok(None),
        };
        Ok(self.verified(store, trust, generation, target, &name, entry))
    }

    /// [`Shared::open_local`] when the lookup and the verified manifest are both
    /// cached: no read of the repository, so an async worker may call it. `None`
    /// means "take the blocking route", not "not held".
    pub(crate) fn open_local_cached(&self, generation: u64, target: &Name) -> Option<Local> {
        let store = self.store.as_ref()?;
        let (name, version) = match target.last() {
            Some(c) if c.typ == COMP_VERSION => (target.prefix(-1), Some(c.as_version()?)),
            _ => (target.clone(), None),
        };
        let entry = store.get_cached(&name, version)?;
        let digest = entry.meta.manifest.clone()?;
        entry.file.as_ref()?;
        let key = (entry.path.clone(), digest.clone(), generation);
        let info = self.infos.lock().ok()?.map.get(&key).cloned()?;
        Some(Local {
            entry,
            info,
            digest,
        })
    }

    /// `/data` of a version the node holds, answered on the async worker when that
    /// waits for nothing: its lookup and verified manifest are cached, and the body
    /// (`body(size, manifest digest)`: the range a request sends, if any) is at most
    /// `worker_max` bytes, all in memory (`granary_transfer::read_verified_cached`,
    /// every segment checked against the manifest). A body over `small` streams from
    /// blocking reads as before (no body read here). Saves the hand-off to a blocking
    /// thread and back: ≈ 85 µs of the daemon's CPU for a 100 KB file
    /// (bench/RESULTS.md, "Gateway downloads"). `None`: take the blocking route (which
    /// the request's deadline bounds); else the version and the body read, if one was.
    pub(crate) fn worker_read(
        &self,
        generation: u64,
        target: &Name,
        body: impl FnOnce(u64, &str) -> Option<(u64, u64)>,
        small: u64,
        worker_max: u64,
    ) -> Option<(Local, Option<SmallBody>)> {
        let l = self.open_local_cached(generation, target)?;
        // No size in the manifest: the blocking route decides (it fetches over NDN).
        let size = l.info.map.file_size()?;
        let read = match body(size, &l.digest) {
            None => None,
            Some((a, b)) if b - a > small => None,
            Some((a, b)) if b - a > worker_max => return None,
            Some((a, b)) => {
                let file = l.entry.file.as_ref()?;
                let got =
                    granary_transfer::read_verified_cached(&self.pool, &file.file, &l.info, a, b);
                let bytes = match got {
                    Ok(Some(bytes)) => Ok(bytes),
                    Ok(None) => return None,
                    Err(e) => Err(e.to_string()),
                };
                self.local_reads
                    .worker
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Some((a, b, bytes))
            }
        };
        Some((l, read))
    }

    fn verified(
        &self,
        store: &Store,
        trust: &Arc<Trust>,
        generation: u64,
        target: &Name,
        name: &Name,
        entry: Arc<Entry>,
    ) -> Option<Local> {
        let name = name.clone();
        let digest = entry.meta.manifest.clone()?;
        entry.file.as_ref()?;
        let key = (entry.path.clone(), digest.clone(), generation);
        if let Some(info) = self.infos.lock().ok()?.map.get(&key).cloned() {
            return Some(Local {
                entry,
                info,
                digest,
            });
        }
        // A signer the trust in force does not know may have just been
        // added to the keychain: load it again and try once more.
        let first = local_info(store, &entry, &name, trust);
        let (first, key) = match first {
            Err(_) => match self.anchors.reload() {
                Ok((t, g)) if g != generation => (
                    local_info(store, &entry, &name, &t),
                    (entry.path.clone(), digest.clone(), g),
                ),
                _ => (first, key),
            },
            ok => (ok, key),
        };
        let info = match first {
            Ok(i) => Arc::new(i),
            Err(e) => {
                tracing::warn!(
                    "gateway: the local copy of {target} is not served ({e}); asking over NDN"
                );
                return None;
            }
        };
        let n = info.map.count();
        if let Ok(mut c) = self.infos.lock() {
            if c.map.len() >= INFOS_MAX || c.segments + n > INFOS_MAX_SEGMENTS {
                c.map.clear();
                c.segments = 0;
            }
            if n <= INFOS_MAX_SEGMENTS {
                c.segments += n;
                c.map.insert(key, info.clone());
            }
        }
        Some(Local {
            entry,
            info,
            digest,
        })
    }
}

/// The verified manifest of a stored version, read from the files the
/// repository keeps beside it (the root Data `.manifest`, the upper levels
/// `.levels`, level 0 from `.hashes`/`.offsets`), checked as the fetch
/// engine checks it over NDN: the root's signature by `trust`, each block
/// against its parent's hash.
fn local_info(store: &Store, e: &Entry, name: &Name, trust: &Trust) -> Result<ObjectInfo, String> {
    let versioned = name.append(&Component::version(e.meta.version));
    let wire = store
        .read_extra(e, "manifest")
        .ok_or("no manifest file beside it")?;
    let root = Data::decode(Bytes::from(wire)).map_err(|x| format!("manifest root: {x}"))?;
    if !mf::manifest_name(&versioned).is_prefix_of(root.name()) {
        return Err(format!("its manifest root is named {}", root.name()));
    }
    let parsed = Root::decode(&Bytes::copy_from_slice(root.content()))?;
    if root.sig_info().sig_type == sig_type::DIGEST_SHA256 && !trust.integrity_only() {
        return Err(Trust::digest_refused(&format!(
            "the manifest of {versioned}"
        )));
    }
    let (v, who) = trust.verifier_for(&root)?;
    v.verify_data(&root)
        .map_err(|x| format!("the manifest of {versioned} does not verify: {x}"))?;
    let variable = parsed.is_variable();
    let file_size = parsed.file_size;
    let mut map = SegmentMap::fixed(
        parsed.segment_size,
        parsed.segment_count,
        (!variable).then_some(file_size),
    )?;
    let mut ck = Checker::new(parsed);
    let layout = ck.layout().clone();
    for seg in 1..ck.manifest_segments() {
        let (level, block) = layout.locate(seg).ok_or("manifest layout")?;
        let count = layout.counts[level];
        let fan = layout.fanout(level);
        let first = block * fan;
        let entries = (count - first).min(fan);
        let len = (entries * 32) as usize;
        let bytes = if level == 0 && layout.format == mf::FORMAT_VARIABLE {
            mf::level0_entries(store, e, first, entries)?
        } else if level == 0 {
            store
                .read_extra_at(e, "hashes", first * 32, len)
                .map_err(|x| x.to_string())?
        } else {
            let before: u64 = layout.counts[1..level].iter().sum();
            store
                .read_extra_at(e, "levels", (before + first) * 32, len)
                .map_err(|x| x.to_string())?
        };
        ck.accept_block(seg, &bytes)?;
    }
    if variable {
        let spans: Option<Vec<(u64, u64)>> = (0..ck.segments())
            .map(|s| Some((ck.segment_offset(s)?, ck.segment_len(s)?)))
            .collect();
        map = SegmentMap::variable(spans.ok_or("segment layout incomplete")?, file_size)?;
    }
    if map.file_size() != Some(e.meta.size) {
        return Err(format!(
            "the manifest says {:?} bytes, the file has {}",
            map.file_size(),
            e.meta.size
        ));
    }
    let verified_by = if root.sig_info().sig_type == sig_type::DIGEST_SHA256 {
        format!("the manifest, signed with {INTEGRITY_ONLY}")
    } else {
        format!("the manifest signed by {who}")
    };
    let info = ObjectInfo {
        versioned,
        map,
        check: Check::Manifest(Arc::new(ck)),
        verified_by,
    };
    if !granary_transfer::dedup_possible(&info) {
        return Err("the manifest does not give every segment's hash".into());
    }
    Ok(info)
}

/// The keychain's trust (own certificates and trust anchors), loaded once
/// and again when the keychain changes: its folders' and files'
/// modification times are compared at most once per [`ANCHORS_RECHECK`].
pub(crate) struct Anchors {
    dir: PathBuf,
    state: Mutex<AnchorState>,
}

struct AnchorState {
    checked: Option<Instant>,
    /// When the keychain was last loaded because a signature did not
    /// verify ([`Anchors::reload`]).
    forced: Option<Instant>,
    stamp: Vec<(PathBuf, Option<SystemTime>)>,
    trust: Result<Arc<Trust>, String>,
    /// Bumped at each reload (cached manifests were verified with the
    /// trust of their generation).
    generation: u64,
}

impl Anchors {
    fn new(dir: PathBuf) -> Anchors {
        let a = Anchors {
            dir,
            state: Mutex::new(AnchorState {
                checked: None,
                forced: None,
                stamp: Vec::new(),
                trust: Err("not loaded".into()),
                generation: 0,
            }),
        };
        let _ = a.get();
        a
    }

    /// The trust in force and its generation.
    pub(crate) fn get(&self) -> Result<(Arc<Trust>, u64), String> {
        self.current(false)
    }

    /// Loads the keychain again now, whatever its folders' times say (at
    /// most every [`RELOAD_MIN`] for this reason): called when a signature
    /// did not verify, since its signer may have been added an instant ago,
    /// within the recheck period or the file system's time resolution.
    pub(crate) fn reload(&self) -> Result<(Arc<Trust>, u64), String> {
        self.current(true)
    }

    fn current(&self, force: bool) -> Result<(Arc<Trust>, u64), String> {
        let mut st = self
            .state
            .lock()
            .map_err(|_| "trust anchors: lock poisoned".to_string())?;
        let now = Instant::now();
        let due = |t: Option<Instant>, every| t.is_none_or(|t| now.duration_since(t) >= every);
        let look = if force {
            due(st.forced, RELOAD_MIN)
        } else {
            due(st.checked, ANCHORS_RECHECK)
        };
        if look {
            st.checked = Some(now);
            if force {
                st.forced = Some(now);
            }
            let stamp = stamp(&self.dir);
            if force || stamp != st.stamp || st.trust.is_err() {
                st.stamp = stamp;
                st.generation += 1;
                st.trust = load(&self.dir);
                if let Err(e) = &st.trust {
                    tracing::warn!("gateway: {e}");
                }
            }
        }
        let g = st.generation;
        st.trust.clone().map(|t| (t, g))
    }
}

/// Shortest time between two forced reloads of the keychain (a stream of
/// requests for content nobody trusts must not turn into a stream of loads).
const RELOAD_MIN: Duration = Duration::from_millis(100);

fn load(dir: &Path) -> Result<Arc<Trust>, String> {
    granary_security::KeyChain::open(dir)
        .map_err(|e| e.to_string())
        .and_then(|kc| Trust::from_keychain(&kc).map_err(|e| e.to_string()))
        // DigestSha256-only content is served, and the x-ndn-verified-by
        // header says it is integrity only.
        .map(|t| Arc::new(t.with_integrity_only(true)))
        .map_err(|e| format!("trust anchors in {}: {e}", dir.display()))
}

/// Modification times of the keychain's folders and of what is in `keys/`
/// and `trust/` (a key, a certificate or an anchor added, replaced or
/// removed changes one of them).
fn stamp(dir: &Path) -> Vec<(PathBuf, Option<SystemTime>)> {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut out = vec![(dir.to_path_buf(), mtime(dir))];
    for sub in ["keys", "trust"] {
        let d = dir.join(sub);
        out.push((d.clone(), mtime(&d)));
        if let Ok(rd) = std::fs::read_dir(&d) {
            let mut v: Vec<_> = rd
                .flatten()
                .map(|e| {
                    let p = e.path();
                    let t = mtime(&p);
                    (p, t)
                })
                .collect();
            v.sort();
            out.extend(v);
        }
    }
    out
}
