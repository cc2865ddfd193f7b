//! Version discovery (RDR metadata, or a CanBePrefix Interest) and the signed manifest.

use super::*;

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
