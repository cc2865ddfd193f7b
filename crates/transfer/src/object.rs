//! Segmented objects: version discovery (RDR, or a CanBePrefix Interest),
//! the signed manifest or per-packet signatures, and [`ObjectJob`], which
//! fetches a segment range into a [`Sink`] and never passes unverified bytes
//! on as good.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use granary_manifest::{manifest_name, Checker, Root};
use granary_packet::types::{sig_type, COMP_VERSION};
use granary_packet::{Component, Data, KeyLocator, Name};
use granary_security::{KeyChain, Verifier};

use crate::engine::{Engine, Failure, Job, JobState, Recovery, Request, Verdict};
use crate::link::Link;
use crate::segmap::SegmentMap;
use crate::Error;

/// Verifiers for the keys the user trusts: the keychain's own certificates
/// and its trust anchors. A DigestSha256 proves that bytes are intact, not
/// who made them (anyone can compute one): content whose only signature is
/// a digest — segments signed so, or a manifest signed so — is refused
/// unless the user asked for integrity only ([`Trust::with_integrity_only`],
/// `--integrity-only`), and is then described as integrity only.
#[derive(Default)]
pub struct Trust {
    keys: Vec<(Name, Arc<Verifier>)>,
    integrity_only: bool,
}

/// What [`Trust::verifier_for`] says of DigestSha256-signed content that
/// is accepted (`--integrity-only`).
pub const INTEGRITY_ONLY: &str = "DigestSha256 (integrity only: proves no origin)";

impl Trust {
    /// From a keychain (own keys' certificates + trust anchors).
    pub fn from_keychain(kc: &KeyChain) -> Result<Trust, Error> {
        let certs = kc
            .list()
            .map_err(|e| Error::Verify(e.to_string()))?
            .into_iter()
            .filter_map(|k| k.cert)
            .chain(
                kc.trust_anchors()
                    .map_err(|e| Error::Verify(e.to_string()))?,
            );
        let mut keys = Vec::new();
        for c in certs {
            if let Ok(v) = c.verifier() {
                keys.push((c.key_name(), Arc::new(v)));
            }
        }
        Ok(Trust {
            keys,
            integrity_only: false,
        })
    }

    /// The same trust, accepting content whose only signature is a
    /// DigestSha256 as integrity only (`yes`), or refusing it (the default).
    pub fn with_integrity_only(mut self, yes: bool) -> Trust {
        self.integrity_only = yes;
        self
    }

    /// True when DigestSha256-only content is accepted (as integrity only).
    pub fn integrity_only(&self) -> bool {
        self.integrity_only
    }

    /// Why DigestSha256-only content `what` is refused.
    pub fn digest_refused(what: &str) -> String {
        format!(
            "{what} is signed only with DigestSha256: that proves the bytes are intact, not who made them (anyone can compute it), and no trusted key signs it. Pass --integrity-only to accept it as integrity only (not authenticated), or trust the publisher's key and fetch a signed version"
        )
    }

    /// Checks a packet that only points at content (RDR metadata, a
    /// directory listing): a NullSignature is taken as it is, a
    /// DigestSha256 is checked (with or without `--integrity-only`: the
    /// content it points at is verified on its own), any other signature
    /// must verify with a trusted key.
    pub fn check_pointer(&self, d: &Data) -> Result<(), String> {
        let v = match d.sig_info().sig_type {
            sig_type::NULL => return Ok(()),
            sig_type::DIGEST_SHA256 => Arc::new(Verifier::Digest),
            _ => self.verifier_for(d)?.0,
        };
        v.verify_data(d)
            .map_err(|e| format!("{} does not verify: {e}", d.name()))
    }

    /// The verifier for a Data's signature, and how to describe it. A
    /// DigestSha256 is refused unless integrity only was asked for.
    pub fn verifier_for(&self, d: &Data) -> Result<(Arc<Verifier>, String), String> {
        let si = d.sig_info();
        if si.sig_type == sig_type::DIGEST_SHA256 {
            if !self.integrity_only {
                return Err(Trust::digest_refused(&d.name().to_string()));
            }
            return Ok((Arc::new(Verifier::Digest), INTEGRITY_ONLY.into()));
        }
        let Some(KeyLocator::Name(key)) = &si.key_locator else {
            return Err(format!("{}: signature has no KeyLocator name", d.name()));
        };
        for (k, v) in &self.keys {
            if k.is_prefix_of(key) || key.is_prefix_of(k) {
                return Ok((v.clone(), format!("{k}")));
            }
        }
        Err(format!(
            "{}: signed by {key}, which is not in the keychain or its trust anchors. To trust it, run here: `granary key trust --fetch {key}` (it shows the key's SHA-256 fingerprint; compare it with `granary key list` on the publishing node, or pin it with --fingerprint HEX); or on the publishing node `granary key export -o publisher.ndncert`, copy the file here and run `granary key trust publisher.ndncert`",
            d.name()
        ))
    }
}

/// How an object's segments are checked.
#[derive(Clone)]
pub enum Check {
    /// Against the signed manifest (one signature per version).
    Manifest(Arc<Checker>),
    /// Each segment's own signature, per the trust rules.
    PerPacket(Arc<Trust>),
}

/// A discovered object: its versioned name, layout and verification.
#[derive(Clone)]
pub struct ObjectInfo {
    /// Versioned name.
    pub versioned: Name,
    /// Segment layout.
    pub map: SegmentMap,
    /// How segments are checked.
    pub check: Check,
    /// Human description of the verification.
    pub verified_by: String,
}

impl ObjectInfo {
    /// True when segments are checked against a signed manifest (their
    /// content hashes), not by their own signatures.
    pub fn has_manifest(&self) -> bool {
        matches!(self.check, Check::Manifest(_))
    }

    /// True when what this object is checked against may be no more than a
    /// DigestSha256 (accepted with `--integrity-only`): its bytes are
    /// intact, their origin unproven. A key-signed manifest is never that.
    pub fn integrity_only(&self) -> bool {
        match &self.check {
            Check::Manifest(_) => self.verified_by.contains(INTEGRITY_ONLY),
            Check::PerPacket(t) => t.integrity_only(),
        }
    }
}

impl std::fmt::Debug for ObjectInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectInfo")
            .field("versioned", &self.versioned.to_string())
            .field("map", &self.map)
            .field("verified_by", &self.verified_by)
            .finish()
    }
}

/// Options of discovery.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// The name is used as given (no version discovery).
    pub no_discovery: bool,
    /// Do not look for a manifest (per-packet verification).
    pub no_manifest: bool,
}

/// RDR metadata (with NDN-DPDK FileMetadata fields).
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// Versioned name.
    pub versioned: Name,
    /// FinalBlockId.
    pub last_segment: Option<u64>,
    /// SegmentSize.
    pub segment_size: Option<u64>,
    /// Size.
    pub size: Option<u64>,
}

/// FileMetadata SegmentSize.
const TT_SEGMENT_SIZE: u64 = 0xF500;
/// FileMetadata Size.
const TT_SIZE: u64 = 0xF502;

/// Parses RDR metadata content.
pub fn parse_metadata(content: &Bytes) -> Result<Metadata, String> {
    use granary_packet::tlv::Reader;
    let mut r = Reader::new(content);
    let first = r.read().map_err(|e| e.to_string())?;
    let versioned = Name::decode_element(&r, &first).map_err(|e| e.to_string())?;
    let mut m = Metadata {
        versioned,
        ..Default::default()
    };
    while !r.is_empty() {
        let e = r.read().map_err(|e| e.to_string())?;
        match e.typ {
            granary_packet::types::FINAL_BLOCK_ID => {
                m.last_segment = Component::decode(r.value(&e))
                    .ok()
                    .and_then(|c| c.as_ref().as_number())
            }
            TT_SEGMENT_SIZE => m.segment_size = Some(r.nni(&e).map_err(|e| e.to_string())?),
            TT_SIZE => m.size = Some(r.nni(&e).map_err(|e| e.to_string())?),
            _ => {}
        }
    }
    Ok(m)
}

/// One request, one Data.
pub struct OneShot {
    req: Option<Request>,
    result: Option<Result<Data, String>>,
}

impl OneShot {
    /// A job for `req`.
    pub fn new(req: Request) -> OneShot {
        OneShot {
            req: Some(req),
            result: None,
        }
    }

    /// The outcome (after the engine ran it).
    pub fn take(&mut self) -> Result<Data, String> {
        self.result.take().unwrap_or_else(|| Err("not run".into()))
    }
}

impl Job for OneShot {
    fn next_request(&mut self) -> Option<(u64, Request)> {
        self.req.take().map(|r| (0, r))
    }
    fn on_data(&mut self, _: u64, data: Data) -> Verdict {
        let n = data.content().len() as u64;
        self.result = Some(Ok(data));
        Verdict::Done(n)
    }
    fn on_failure(&mut self, _: u64, _: &Failure) -> Recovery {
        Recovery::Fail
    }
    fn state(&self) -> JobState {
        match &self.result {
            None => JobState::Running,
            Some(Ok(_)) => JobState::Done,
            Some(Err(e)) => JobState::Failed(e.clone()),
        }
    }
    fn fail(&mut self, error: String) {
        self.result = Some(Err(error));
    }
}

/// Fetches one packet through the engine.
pub async fn fetch_one<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    req: Request,
) -> Result<Data, Error> {
    let mut j = OneShot::new(req);
    engine.run(link, &mut [&mut j]).await?;
    j.take().map_err(Error::Fetch)
}

/// Fetches the manifest blocks below the root, in order of acceptance
/// (top-down), each checked against its parent.
struct ManifestJob {
    mname: Name,
    checker: Checker,
    next: u64,
    total: u64,
    accept_next: u64,
    pending: BTreeMap<u64, Bytes>,
    refetch: Vec<u64>,
    bad: HashMap<u64, u32>,
    error: Option<String>,
}

impl Job for ManifestJob {
    fn next_request(&mut self) -> Option<(u64, Request)> {
        let seg = match self.refetch.pop() {
            Some(s) => s,
            None if self.next < self.total => {
                self.next += 1;
                self.next - 1
            }
            None => return None,
        };
        let mut r = Request::new(self.mname.append(&Component::segment(seg)));
        r.must_be_fresh = self.bad.contains_key(&seg);
        Some((seg, r))
    }

    fn on_data(&mut self, seg: u64, d: Data) -> Verdict {
        let content = d
            .content_bytes()
            .cloned()
            .unwrap_or_else(|| Bytes::copy_from_slice(d.content()));
        let n = content.len() as u64;
        self.pending.insert(seg, content);
        while let Some(c) = self.pending.remove(&self.accept_next) {
            let s = self.accept_next;
            if let Err(e) = self.checker.accept_block(s, &c) {
                let b = self.bad.entry(s).or_default();
                *b += 1;
                if *b > 2 {
                    return Verdict::Fatal(format!(
                        "manifest segment {s} of {} failed verification {b} times: {e}",
                        self.mname
                    ));
                }
                self.refetch.push(s);
                break;
            }
            self.accept_next += 1;
        }
        Verdict::Done(n)
    }

    fn on_failure(&mut self, _: u64, _: &Failure) -> Recovery {
        Recovery::Fail
    }

    fn state(&self) -> JobState {
        match &self.error {
            Some(e) => JobState::Failed(e.clone()),
            None if self.accept_next >= self.total => JobState::Done,
            None => JobState::Running,
        }
    }

    fn fail(&mut self, error: String) {
        self.error = Some(error);
    }
}

fn is_versioned(n: &Name) -> bool {
    n.last().is_some_and(|c| c.typ == COMP_VERSION)
}

/// Discovers `name`: its version (RDR `32=metadata`, then a CanBePrefix
/// Interest as a fallback), its signed manifest (verified with `trust`),
/// and its segment layout.
pub async fn discover<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    name: &Name,
    trust: Arc<Trust>,
    opts: &OpenOptions,
) -> Result<ObjectInfo, Error> {
    Ok(discover_signed(engine, link, name, trust, opts).await?.0)
}

/// [`discover`], also returning the manifest root Data exactly as received
/// (when the object has a manifest): its signature was verified with
/// `trust`. A replica keeps these bytes, so that it serves the publisher's
/// signature and not its own.
pub async fn discover_signed<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    name: &Name,
    trust: Arc<Trust>,
    opts: &OpenOptions,
) -> Result<(ObjectInfo, Option<Data>), Error> {
    let mut md: Option<Metadata> = None;
    let mut first: Option<Data> = None;
    let versioned = if is_versioned(name) || opts.no_discovery {
        name.clone()
    } else {
        let mut r = Request::new(name.append(&Component::keyword(b"metadata")));
        r.can_be_prefix = true;
        r.must_be_fresh = true;
        r.retries = Some(1);
        r.lifetime = Some(Duration::from_millis(1000));
        match fetch_one(engine, link, r).await {
            Ok(d) => {
                // RDR metadata only points at a version; whatever is fetched
                // under it is verified on its own (manifest or per packet).
                // So metadata with a Null signature (NDNts's `serveMetadata`
                // default) is taken as a pointer; a real signature must verify.
                trust
                    .check_pointer(&d)
                    .map_err(|e| Error::Verify(format!("metadata of {name}: {e}")))?;
                let m = parse_metadata(&Bytes::copy_from_slice(d.content()))
                    .map_err(|e| Error::Fetch(format!("metadata of {name}: {e}")))?;
                if !name.is_prefix_of(&m.versioned) || !is_versioned(&m.versioned) {
                    return Err(Error::Fetch(format!(
                        "metadata of {name} names {}, not a version of it",
                        m.versioned
                    )));
                }
                let v = m.versioned.clone();
                md = Some(m);
                v
            }
            Err(Error::Fetch(why)) => {
                // No RDR: ask for any Data under the name.
                let mut r = Request::new(name.clone());
                r.can_be_prefix = true;
                r.must_be_fresh = true;
                r.retries = Some(1);
                let d = fetch_one(engine, link, r).await.map_err(|e| {
                    Error::Fetch(format!("{name}: not found (metadata: {why}; {e})"))
                })?;
                let n = d.name();
                let v = (name.len()..n.len())
                    .find(|i| n.get(*i as isize).is_some_and(|c| c.typ == COMP_VERSION))
                    .map(|i| n.prefix(i as isize + 1))
                    .ok_or_else(|| {
                        Error::Fetch(format!("{name}: no version component in the answer {n}"))
                    })?;
                if n.len() == v.len() + 1 && n.last().and_then(|c| c.as_segment()) == Some(0) {
                    first = Some(d);
                }
                v
            }
            Err(e) => return Err(e),
        }
    };

    // The manifest, when the producer has one.
    if !opts.no_manifest {
        let mname = manifest_name(&versioned);
        let mut r = Request::new(mname.append(&Component::segment(0)));
        r.retries = Some(1);
        r.lifetime = Some(Duration::from_millis(2000));
        if let Ok(root) = fetch_one(engine, link, r).await {
            if let Ok(parsed) = Root::decode(&Bytes::copy_from_slice(root.content())) {
                if root.sig_info().sig_type == sig_type::DIGEST_SHA256 && !trust.integrity_only() {
                    return Err(Error::Verify(Trust::digest_refused(&format!(
                        "the manifest of {versioned}"
                    ))));
                }
                let (v, who) = trust.verifier_for(&root).map_err(Error::Verify)?;
                v.verify_data(&root).map_err(|e| {
                    Error::Verify(format!("the manifest of {versioned} does not verify: {e}"))
                })?;
                // Fixed segments: the layout is in the root. Variable
                // (format 2): it is in level 0, known once the blocks are in.
                let variable = parsed.is_variable();
                let file_size = parsed.file_size;
                let mut map = SegmentMap::fixed(
                    parsed.segment_size,
                    parsed.segment_count,
                    (!variable).then_some(parsed.file_size),
                )
                .map_err(|e| Error::Verify(format!("manifest of {versioned}: {e}")))?;
                let checker = Checker::new(parsed);
                let total = checker.manifest_segments();
                let mut job = ManifestJob {
                    mname: mname.clone(),
                    checker,
                    next: 1,
                    total,
                    accept_next: 1,
                    pending: BTreeMap::new(),
                    refetch: Vec::new(),
                    bad: HashMap::new(),
                    error: None,
                };
                engine.run(link, &mut [&mut job]).await?;
                if let JobState::Failed(e) = job.state() {
                    return Err(Error::Verify(format!("manifest of {versioned}: {e}")));
                }
                if variable {
                    let ck = &job.checker;
                    let spans: Option<Vec<(u64, u64)>> = (0..ck.segments())
                        .map(|s| Some((ck.segment_offset(s)?, ck.segment_len(s)?)))
                        .collect();
                    let spans = spans.ok_or_else(|| {
                        Error::Verify(format!(
                            "manifest of {versioned}: segment layout incomplete"
                        ))
                    })?;
                    map = SegmentMap::variable(spans, file_size)
                        .map_err(|e| Error::Verify(format!("manifest of {versioned}: {e}")))?;
                }
                let verified_by = if root.sig_info().sig_type == sig_type::DIGEST_SHA256 {
                    format!("the manifest, signed with {INTEGRITY_ONLY}")
                } else {
                    format!("the manifest signed by {who}")
                };
                return Ok((
                    ObjectInfo {
                        versioned,
                        map,
                        check: Check::Manifest(Arc::new(job.checker)),
                        verified_by,
                    },
                    Some(root),
                ));
            }
        }
    }

    // No manifest: fixed segments only when the metadata says so (and its
    // numbers agree); otherwise — content-defined segments, or a producer
    // that gives only FinalBlockId — segments are taken in order as they
    // come, up to the FinalBlockId, whatever their sizes.
    let fixed = match md.as_ref() {
        Some(Metadata {
            last_segment: Some(l),
            segment_size: Some(s),
            size,
            ..
        }) => SegmentMap::fixed(*s, l + 1, *size).ok(),
        _ => None,
    };
    let map = match fixed {
        Some(m) => m,
        None => {
            let last = match md.as_ref().and_then(|m| m.last_segment) {
                Some(l) => l,
                None => {
                    // The FinalBlockId of segment 0.
                    let d = match first.clone() {
                        Some(d) => d,
                        None => {
                            fetch_one(
                                engine,
                                link,
                                Request::new(versioned.append(&Component::segment(0))),
                            )
                            .await?
                        }
                    };
                    let last = d
                        .final_block_id()
                        .and_then(|c| c.as_ref().as_segment())
                        .ok_or_else(|| {
                            Error::Fetch(format!(
                                "{versioned}: segment 0 has no FinalBlockId and there is no metadata: the object's length is unknown"
                            ))
                        })?;
                    last
                }
            };
            SegmentMap::Sequential {
                count: last + 1,
                file_size: md.as_ref().and_then(|m| m.size),
            }
        }
    };
    // What the segments are signed with, as far as known now: a segment 0
    // signed only with DigestSha256 says so (decision 0033: integrity only).
    let digest_only = first
        .as_ref()
        .is_some_and(|d| d.sig_info().sig_type == sig_type::DIGEST_SHA256);
    let verified_by = if digest_only {
        format!("each segment's {INTEGRITY_ONLY}")
    } else if trust.integrity_only() {
        format!("each segment's own signature (a DigestSha256 one: {INTEGRITY_ONLY})")
    } else {
        "each segment's own signature".to_string()
    };
    Ok((
        ObjectInfo {
            versioned,
            map,
            check: Check::PerPacket(trust),
            verified_by,
        },
        None,
    ))
}

/// Where verified bytes go.
pub trait Sink: Send {
    /// Verified bytes at file offset `offset`.
    fn put(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()>;
    /// For in-order sinks: the next offset they can write.
    fn cursor(&self) -> Option<u64> {
        None
    }
    /// Called once the segment `seg` (content `content`) is fully stored;
    /// resume bookkeeping hooks here.
    fn segment_done(&mut self, _seg: u64, _content: &[u8]) -> std::io::Result<()> {
        Ok(())
    }
    /// Everything is in: write out what is buffered.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// The bytes held, for in-memory sinks.
    fn take_bytes(self: Box<Self>) -> Option<Vec<u8>> {
        None
    }
}

/// Positioned writes into a file (`pwrite`), any order. Contiguous
/// segments are combined into writes of up to [`WRITE_COMBINE`] bytes, and
/// side-file entries are written in runs after the data they describe, so a
/// fetch costs a few system calls per megabyte, not two per segment.
pub struct FileSink {
    file: std::fs::File,
    recycler: Option<Recycler>,
    base: u64,
    hashes: Option<std::fs::File>,
    record_hash: bool,
    /// Pending data: file offset of `buf[0]`.
    buf_at: u64,
    buf: Vec<u8>,
    /// Side-file entries waiting for their data to be written.
    marks: BTreeMap<u64, [u8; 32]>,
    /// Where each segment's CRC-32 is recorded ([`crate::Config::segment_crcs`]).
    crcs: Option<crate::SegmentCrcs>,
}

/// Largest combined write.
pub const WRITE_COMBINE: usize = 1 << 20;
/// Side-file entries held before they are written.
const MARKS_HELD: usize = 64;

/// Side-file entry of a stored segment when the manifest holds its hash.
pub const STORED_MARK: [u8; 32] = [0xA5; 32];

impl FileSink {
    /// A sink into `file` (object offset `base` at file offset 0), with an
    /// optional side file of 32 bytes per segment: the segment's SHA-256
    /// when `record_hash` (per-packet verification: resume checks the
    /// bytes against it), else [`STORED_MARK`] (the manifest has the
    /// hashes; the fetch does not hash every segment twice).
    pub fn new(
        file: std::fs::File,
        base: u64,
        hashes: Option<std::fs::File>,
        record_hash: bool,
    ) -> FileSink {
        FileSink::with_cache(file, base, hashes, record_hash, false)
    }

    /// [`FileSink::new`]; with `keep_cached` the written pages stay in the
    /// page cache ([`crate::Config::keep_output_cached`]).
    pub fn with_cache(
        file: std::fs::File,
        base: u64,
        hashes: Option<std::fs::File>,
        record_hash: bool,
        keep_cached: bool,
    ) -> FileSink {
        FileSink {
            recycler: Recycler::start_with(&file, !keep_cached),
            file,
            base,
            hashes,
            record_hash,
            buf_at: 0,
            buf: Vec::new(),
            marks: BTreeMap::new(),
            crcs: None,
        }
    }

    /// Records each segment's CRC-32 in `crcs` as it is stored.
    pub fn record_crcs(mut self, crcs: Option<crate::SegmentCrcs>) -> FileSink {
        self.crcs = crcs;
        self
    }

    fn flush_data(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        if !self.buf.is_empty() {
            self.file.write_all_at(&self.buf, self.buf_at)?;
            if let Some(r) = self.recycler.as_mut() {
                r.written(self.buf.len() as u64);
            }
            self.buf.clear();
        }
        Ok(())
    }

    fn flush_marks(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.flush_data()?;
        let Some(h) = &self.hashes else {
            self.marks.clear();
            return Ok(());
        };
        let mut run: Vec<u8> = Vec::new();
        let mut run_start = 0u64;
        for (seg, m) in std::mem::take(&mut self.marks) {
            if !run.is_empty() && run_start + (run.len() / 32) as u64 != seg {
                h.write_all_at(&run, run_start * 32)?;
                run.clear();
            }
            if run.is_empty() {
                run_start = seg;
            }
            run.extend_from_slice(&m);
        }
        if !run.is_empty() {
            h.write_all_at(&run, run_start * 32)?;
        }
        Ok(())
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        // Verified bytes of a failed or interrupted run stay usable by --resume.
        let _ = self.flush_marks();
        if let Some(r) = self.recycler.take() {
            r.stop();
        }
    }
}

/// Keeps a download's page-cache footprint small: every [`Recycler::EVERY`]
/// bytes written, a thread writes the file's dirty pages back
/// (`fdatasync`) and drops the clean ones (`POSIX_FADV_DONTNEED`), as
/// `dd oflag=nocache` does. A multi-gigabyte download then neither evicts
/// the machine's working set nor needs a fresh page for every 4 KiB: the
/// pages just freed are the next ones written (on a VM whose freed memory
/// goes back to the host, fresh pages cost a host fault each: 1 GiB of
/// `pwrite` took 1.5–2.7 s without this and 0.4–0.5 s with it, fsync
/// included). A short period keeps the fresh pages at the start of every
/// file few: 8 MiB instead of 32 took a default same-node `get` of 128 MiB
/// from 0.30 to 0.23 s and of 1 GiB from 1.44 to 1.21 s (bench/put-get.sh).
/// Best effort: errors are left for the final `fsync`.
pub(crate) struct Recycler {
    tx: std::sync::mpsc::SyncSender<()>,
    thread: std::thread::JoinHandle<()>,
    since: u64,
}

impl Recycler {
    const EVERY: u64 = 8 << 20;

    pub(crate) fn start(file: &std::fs::File) -> Option<Recycler> {
        Recycler::start_with(file, true)
    }

    /// With `drop_pages` false the pages are only written back, and stay
    /// cached for a reader that follows ([`crate::Config::keep_output_cached`]).
    pub(crate) fn start_with(file: &std::fs::File, drop_pages: bool) -> Option<Recycler> {
        let f = file.try_clone().ok()?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
        let thread = std::thread::spawn(move || {
            for () in rx {
                if f.sync_data().is_ok() && drop_pages {
                    let _ = rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed);
                }
            }
        });
        Some(Recycler {
            tx,
            thread,
            since: 0,
        })
    }

    pub(crate) fn written(&mut self, n: u64) {
        self.since += n;
        if self.since >= Self::EVERY {
            // Never waits: a pass still running covers these bytes too.
            let _ = self.tx.try_send(());
            self.since = 0;
        }
    }

    pub(crate) fn stop(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

impl Sink for FileSink {
    fn put(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        let at = offset - self.base;
        if !self.buf.is_empty()
            && (self.buf_at + self.buf.len() as u64 != at
                || self.buf.len() + bytes.len() > WRITE_COMBINE)
        {
            self.flush_data()?;
        }
        if self.buf.is_empty() {
            self.buf_at = at;
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    fn segment_done(&mut self, seg: u64, content: &[u8]) -> std::io::Result<()> {
        use sha2::Digest;
        if let Some(c) = &self.crcs {
            c.record(seg, content);
        }
        if self.hashes.is_some() {
            let m = if self.record_hash {
                sha2::Sha256::digest(content).into()
            } else {
                STORED_MARK
            };
            self.marks.insert(seg, m);
            if self.marks.len() >= MARKS_HELD {
                self.flush_marks()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.flush_marks()
    }
}

/// Bytes in memory, for a range read.
pub struct MemSink {
    /// Offset of `buf[0]`.
    pub base: u64,
    /// The bytes.
    pub buf: Vec<u8>,
}

impl Sink for MemSink {
    fn put(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        let at = (offset - self.base) as usize;
        if self.buf.len() < at + bytes.len() {
            self.buf.resize(at + bytes.len(), 0);
        }
        self.buf[at..at + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn take_bytes(self: Box<Self>) -> Option<Vec<u8>> {
        Some(self.buf)
    }
}

/// In-order output (standard output): out-of-order segments wait in a
/// bounded buffer (the job does not run more than its limit ahead).
pub struct StreamSink<W: Write + Send> {
    w: std::io::BufWriter<W>,
    next: u64,
    pending: BTreeMap<u64, Vec<u8>>,
}

impl<W: Write + Send> StreamSink<W> {
    /// Writes bytes from object offset `start` on to `w`.
    pub fn new(w: W, start: u64) -> Self {
        StreamSink {
            w: std::io::BufWriter::with_capacity(WRITE_COMBINE, w),
            next: start,
            pending: BTreeMap::new(),
        }
    }
}

impl<W: Write + Send> Sink for StreamSink<W> {
    fn put(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        if offset != self.next {
            self.pending.insert(offset, bytes.to_vec());
            return Ok(());
        }
        self.w.write_all(bytes)?;
        self.next += bytes.len() as u64;
        while let Some(b) = self.pending.remove(&self.next) {
            self.w.write_all(&b)?;
            self.next += b.len() as u64;
        }
        Ok(())
    }

    fn cursor(&self) -> Option<u64> {
        Some(self.next)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// A simple bitmap of segments.
#[derive(Debug, Clone)]
pub struct Bitmap(Vec<u64>);

impl Bitmap {
    /// All clear.
    pub fn new(n: u64) -> Bitmap {
        Bitmap(vec![0; n.div_ceil(64) as usize])
    }
    /// Tests bit `i`.
    pub fn get(&self, i: u64) -> bool {
        self.0
            .get((i / 64) as usize)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
    /// Sets bit `i`.
    pub fn set(&mut self, i: u64) {
        if let Some(w) = self.0.get_mut((i / 64) as usize) {
            *w |= 1 << (i % 64);
        }
    }
}

/// How far ahead of an in-order sink's cursor the job may request.
pub const STREAM_AHEAD: u64 = 2048;

/// Fetches the segments of an object covering bytes `[lo, hi)` into a sink.
pub struct ObjectJob {
    info: ObjectInfo,
    verifiers: HashMap<Name, Arc<Verifier>>,
    /// Signers seen (per-packet mode).
    pub signers: std::collections::BTreeSet<String>,
    lo: u64,
    hi: u64,
    want: std::ops::Range<u64>,
    have: Bitmap,
    next: u64,
    remaining: u64,
    bad: HashMap<u64, u32>,
    sink: Box<dyn Sink>,
    error: Option<String>,
    /// Segments taken from disk (resume) instead of the network.
    pub reused: u64,
    /// Placement of [`SegmentMap::Sequential`] segments.
    seq: Option<Sequence>,
}

/// Verified segments of a [`SegmentMap::Sequential`] object wait here
/// until every one before them has arrived: then their offset is known.
#[derive(Default)]
struct Sequence {
    /// Segments placed so far (0..placed).
    placed: u64,
    /// Bytes placed so far: the offset of segment `placed`.
    offset: u64,
    /// Verified, not yet placed (at most [`SEQUENCE_AHEAD`]).
    held: BTreeMap<u64, Data>,
}

/// How far past the last placed segment a sequential fetch may request
/// (bounds the segments held in memory: 1024 × 8800 bytes).
pub const SEQUENCE_AHEAD: u64 = 1024;

impl ObjectJob {
    /// A job for bytes `[lo, hi)` of `info` (`hi` = `u64::MAX` for the end).
    pub fn new(info: ObjectInfo, lo: u64, hi: u64, sink: Box<dyn Sink>) -> ObjectJob {
        let want = info.map.covering(lo, hi);
        let count = info.map.count();
        ObjectJob {
            verifiers: HashMap::new(),
            signers: Default::default(),
            lo,
            hi,
            next: want.start,
            remaining: want.end - want.start,
            want,
            have: Bitmap::new(count),
            info,
            bad: HashMap::new(),
            sink,
            error: None,
            reused: 0,
            seq: None,
        }
        .sequential()
    }

    fn sequential(mut self) -> ObjectJob {
        if self.info.map.is_sequential() {
            self.seq = Some(Sequence::default());
        }
        self
    }

    /// Places held segments that are next in order; the bytes written.
    fn place(&mut self) -> Result<u64, String> {
        let Some(q) = self.seq.as_mut() else {
            return Ok(0);
        };
        let mut written = 0u64;
        while let Some(d) = q.held.remove(&q.placed) {
            let c = d.content();
            let start = q.offset;
            let from = self.lo.saturating_sub(start).min(c.len() as u64) as usize;
            let to = self.hi.saturating_sub(start).min(c.len() as u64) as usize;
            if from < to {
                self.sink
                    .put(start + from as u64, &c[from..to])
                    .map_err(|e| format!("writing segment {}: {e}", q.placed))?;
                written += (to - from) as u64;
            }
            self.sink
                .segment_done(q.placed, c)
                .map_err(|e| format!("writing segment {}: {e}", q.placed))?;
            q.offset += c.len() as u64;
            q.placed += 1;
            self.remaining = self.remaining.saturating_sub(1);
        }
        let past_range = q.offset >= self.hi;
        if self.remaining == 0 || past_range {
            if let (Some(f), false) = (self.info.map.file_size(), past_range) {
                if q.offset != f {
                    return Err(format!(
                        "{}: its segments hold {} bytes, the metadata says {f}",
                        self.info.versioned, q.offset
                    ));
                }
            }
            self.remaining = 0;
            q.held.clear();
            self.sink
                .finish()
                .map_err(|e| format!("writing the output: {e}"))?;
        }
        Ok(written)
    }

    /// Marks segment `seg` as already stored (resume).
    pub fn already_have(&mut self, seg: u64) {
        if self.want.contains(&seg) && !self.have.get(seg) {
            self.have.set(seg);
            self.remaining -= 1;
            self.reused += 1;
        }
    }

    /// The object.
    pub fn info(&self) -> &ObjectInfo {
        &self.info
    }

    /// Gives back the sink.
    pub fn into_sink(self) -> Box<dyn Sink> {
        self.sink
    }

    fn verify(&mut self, seg: u64, d: &Data) -> Result<(), String> {
        self.info.map.check_len(seg, d.content().len() as u64)?;
        match &self.info.check {
            Check::Manifest(ck) => {
                ck.check_segment_digest(seg, &d.content_sha256(), d.content().len() as u64)
            }
            Check::PerPacket(trust) => {
                let key = match &d.sig_info().key_locator {
                    Some(KeyLocator::Name(k)) => k.clone(),
                    _ => Name::new(),
                };
                let v = match (d.sig_info().sig_type, self.verifiers.get(&key)) {
                    (t, Some(v)) if t != sig_type::DIGEST_SHA256 => v.clone(),
                    _ => {
                        let (v, who) = trust.verifier_for(d)?;
                        self.signers.insert(who);
                        if d.sig_info().sig_type != sig_type::DIGEST_SHA256 {
                            self.verifiers.insert(key, v.clone());
                        }
                        v
                    }
                };
                v.verify_data(d).map_err(|e| format!("signature: {e}"))
            }
        }
    }
}

impl Job for ObjectJob {
    fn next_request(&mut self) -> Option<(u64, Request)> {
        while self.next < self.want.end && self.have.get(self.next) {
            self.next += 1;
        }
        if self.next >= self.want.end {
            return None;
        }
        if let Some(q) = &self.seq {
            if self.next >= q.placed + SEQUENCE_AHEAD || self.remaining == 0 {
                return None;
            }
        } else if let Some(c) = self.sink.cursor() {
            if self.next >= self.info.map.segment_of(c) + STREAM_AHEAD {
                return None;
            }
        }
        let seg = self.next;
        self.next += 1;
        Some((
            seg,
            Request::new(self.info.versioned.append(&Component::segment(seg))),
        ))
    }

    fn on_data(&mut self, seg: u64, d: Data) -> Verdict {
        if self.have.get(seg) || (self.seq.is_some() && self.remaining == 0) {
            return Verdict::Done(0);
        }
        if d.content_type() == granary_packet::types::content_type::NACK {
            return Verdict::Fatal(format!(
                "{}: the producer answered with an application Nack (ContentType NACK)",
                d.name()
            ));
        }
        if let Check::PerPacket(t) = &self.info.check {
            if d.sig_info().sig_type == sig_type::DIGEST_SHA256 && !t.integrity_only() {
                // Asking again would get the same: no retries.
                return Verdict::Fatal(Trust::digest_refused(&format!(
                    "{} (segment {seg})",
                    self.info.versioned
                )));
            }
        }
        if let Err(why) = self.verify(seg, &d) {
            let n = self.bad.entry(seg).or_default();
            *n += 1;
            if *n > 2 {
                return Verdict::Fatal(format!(
                    "segment {seg} of {} failed verification {n} times ({why}); stopped, its bytes were not written",
                    self.info.versioned
                ));
            }
            // Ask again; the Nonce is new (a cache may still hold the bad
            // packet, hence the limit above).
            let mut r = Request::new(d.name().clone());
            r.must_be_fresh = true;
            return Verdict::Instead(r);
        }
        if let Some(q) = self.seq.as_mut() {
            self.have.set(seg);
            q.held.insert(seg, d);
            return match self.place() {
                Ok(n) => Verdict::Done(n),
                Err(e) => Verdict::Fatal(e),
            };
        }
        let start = self.info.map.start(seg);
        let c = d.content();
        let from = self.lo.saturating_sub(start).min(c.len() as u64) as usize;
        let to = (self.hi.saturating_sub(start)).min(c.len() as u64) as usize;
        let r = if from < to {
            self.sink.put(start + from as u64, &c[from..to])
        } else {
            Ok(())
        };
        if let Err(e) = r.and_then(|_| self.sink.segment_done(seg, c)) {
            return Verdict::Fatal(format!("writing segment {seg}: {e}"));
        }
        self.have.set(seg);
        self.remaining -= 1;
        if self.remaining == 0 {
            if let Err(e) = self.sink.finish() {
                return Verdict::Fatal(format!("writing the output: {e}"));
            }
        }
        Verdict::Done(to.saturating_sub(from) as u64)
    }

    fn on_failure(&mut self, _: u64, _: &Failure) -> Recovery {
        Recovery::Fail
    }

    fn state(&self) -> JobState {
        match &self.error {
            Some(e) => JobState::Failed(e.clone()),
            None if self.remaining == 0 => JobState::Done,
            None => JobState::Running,
        }
    }

    fn fail(&mut self, error: String) {
        self.error = Some(error);
    }
}
