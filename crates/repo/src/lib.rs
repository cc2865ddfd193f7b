//! # granary-repo
//!
//! Serves a [`granary_store::Store`] over NDN through an in-process face,
//! and takes network inserts and deletes in ndn-python-repo 0.3's command
//! protocol ([`python_repo`], [`command`]; `docs/repo-protocol.md`).
#![forbid(unsafe_code)]

pub mod command;
mod consumer;
pub mod digests;
pub mod keeps;
pub mod local_commands;
pub mod manifest;
pub mod publish;
pub mod python_repo;
pub mod rename;
pub mod scrub;

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use granary_face::internal::AppFace;
use granary_face::{LinkFields, NetPacket};
use granary_packet::digest;
use granary_packet::tlv;
use granary_packet::types::{nack_reason, sig_type, COMP_KEYWORD, COMP_SEGMENT, COMP_VERSION};
use granary_packet::{Component, Data, DataBuilder, Interest, Name};
use granary_store::{Entry, Store};

/// Prefix of hash requests: `/localhop/granary/sha256/<SHA-256 of the
/// chunk's bytes as one 32-byte generic component>`. `/localhop` makes the
/// forwarder keep them to one hop: a node sends its own apps' requests to
/// its neighbours, and a request that arrives from a neighbour goes only to
/// local faces (the repository), never on.
pub const HASH_PREFIX: &str = "/localhop/granary/sha256";

/// Cost of the repository's route for [`HASH_PREFIX`] (see docs/cas.md).
pub const HASH_ROUTE_COST: u64 = 1000;
/// Prefix of the node's own hash lookups: `/localhost/granary/sha256/<32
/// bytes>`, answered by the repository like [`HASH_PREFIX`], but never
/// leaving the node (`/localhost`). A dedup fetch asks here first, so that
/// what comes from the node's own store is told apart from what a
/// neighbour sent.
pub const LOCAL_HASH_PREFIX: &str = "/localhost/granary/sha256";

/// Most hashes in one batch "have" query (`<LOCAL_HASH_PREFIX>/have`):
/// 32 bytes each, so a query fits a packet of 8800 bytes.
pub const HAVE_BATCH: usize = 256;

/// The batch query of the node's own store: an Interest for
/// `/localhost/granary/sha256/have/<ParametersSha256Digest>` whose
/// ApplicationParameters are up to [`HAVE_BATCH`] 32-byte chunk hashes; the
/// answer's content has one byte per hash, 1 where the hash index knows a
/// location (a hint: the chunk itself is then asked by hash and re-hashed).
pub fn have_query_prefix() -> Name {
    Name::from_uri(LOCAL_HASH_PREFIX)
        .unwrap_or_default()
        .append(&Component::generic(b"have"))
}

/// The hash request name of a chunk.
pub fn hash_request_name(h: &[u8; 32]) -> Name {
    Name::from_uri(HASH_PREFIX)
        .unwrap_or_default()
        .append(&Component::generic(h))
}

/// The chunk hash a hash request asks for.
pub fn parse_hash_request(n: &Name) -> Option<[u8; 32]> {
    if n.len() != 4 {
        return None;
    }
    // Parsed once: every Interest the repo answers passes here.
    static HOP: std::sync::LazyLock<Name> =
        std::sync::LazyLock::new(|| Name::from_uri(HASH_PREFIX).unwrap_or_default());
    static HOST: std::sync::LazyLock<Name> =
        std::sync::LazyLock::new(|| Name::from_uri(LOCAL_HASH_PREFIX).unwrap_or_default());
    if !HOP.is_prefix_of(n) && !HOST.is_prefix_of(n) {
        return None;
    }
    let c = n.last()?;
    if c.typ != granary_packet::types::COMP_GENERIC {
        return None;
    }
    c.value.try_into().ok()
}

/// FileMetadata TLV types (as the NDN-DPDK file server uses them).
pub mod file_metadata {
    /// SegmentSize.
    pub const SEGMENT_SIZE: u64 = 0xF500;
    /// Size.
    pub const SIZE: u64 = 0xF502;
    /// Mode.
    pub const MODE: u64 = 0xF504;
    /// Atime (ns).
    pub const ATIME: u64 = 0xF506;
    /// Btime (ns).
    pub const BTIME: u64 = 0xF508;
    /// Ctime (ns).
    pub const CTIME: u64 = 0xF50A;
    /// Mtime (ns).
    pub const MTIME: u64 = 0xF50C;
}

/// Freshness of segment Data (immutable: versioned names).
pub const SEGMENT_FRESHNESS_MS: u64 = 3_600_000;
/// Freshness of RDR metadata (the latest version can change).
pub const METADATA_FRESHNESS_MS: u64 = 1;
/// Freshness of unversioned `<name>/seg=<n>` answers (the latest version's
/// segment under a name that a new version or a delete changes; the
/// repository's own network-insert fetches ask MustBeFresh so that they
/// never get these back from a Content Store).
pub const LATEST_SEGMENT_FRESHNESS_MS: u64 = 1;

/// Signs served Data per each version's policy: DigestSha256, or the
/// publisher's key for `ed25519` / `ecdsa` (computed when served, never
/// stored on disk; DigestSha256 values are kept in memory once computed,
/// [`digests`], and the forwarder's CS keeps recent key-signed Data).
pub struct Repo {
    /// The store served.
    pub store: Store,
    keychain: Option<granary_security::KeyChain>,
    /// Segments covered by a manifest get a NullSignature (the store's
    /// `segment_signature = "null"`); read at start and on [`Repo::reload`].
    null_segments: std::sync::atomic::AtomicBool,
    /// Told of every version published or removed through the repo.
    observer: Option<Arc<dyn Observer>>,
    /// Identity of the publisher key made when the keychain has none (the
    /// node's prefix); `None`: [`publish::DEFAULT_PUBLISHER`].
    publisher: Option<Name>,
    /// Copies being kept in the background (detached puts), which any
    /// removal of their name overtakes.
    pub(crate) keeps: keeps::Keeps,
}

/// Something that follows the repository's changes: the science catalog.
/// It is told after a change is durable, and says what became of it
/// ([`Noted`]): a publish or a delete never fails because of it, but its
/// client is told when the change was only queued, or not recorded. Changes
/// made to the store without the repo (`granary mv`, `granary rm`) are
/// reported by their caller.
pub trait Observer: Send + Sync {
    /// `entry` (with its manifest) was just published.
    fn published(&self, store: &Store, entry: &Entry) -> Noted;
    /// `version` of `name` (every version when `None`) was removed.
    fn removed(&self, name: &Name, version: Option<u64>) -> Noted;
}

/// What an [`Observer`] made of a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Noted {
    /// Recorded.
    Done,
    /// Not recorded yet, but kept durably and recorded when it can be (the
    /// catalog is unavailable); why.
    Queued(String),
    /// Not recorded, and not queued; why.
    Failed(String),
}

impl Noted {
    /// `done`, `queued` or `failed`.
    pub fn word(&self) -> &'static str {
        match self {
            Noted::Done => "done",
            Noted::Queued(_) => "queued",
            Noted::Failed(_) => "failed",
        }
    }

    /// Why it was queued or failed.
    pub fn why(&self) -> Option<&str> {
        match self {
            Noted::Done => None,
            Noted::Queued(w) | Noted::Failed(w) => Some(w),
        }
    }
}

/// How a segment is signed when served.
pub enum SegmentSig {
    /// With the publisher's key (`ed25519` / `ecdsa` versions).
    Key(granary_security::Signer),
    /// DigestSha256.
    Digest,
    /// NullSignature (SignatureType 200, empty value): for `manifest`
    /// versions (their key-signed manifest covers every segment), when the
    /// repository is so configured.
    Null,
}

impl Repo {
    /// Records that `name` (`version`, or every version) was removed or
    /// renamed away from this node by another process or at start-up: a
    /// copy of it that a `get` asks to keep afterwards is refused.
    pub fn removed_here(&self, name: &Name, version: Option<u64>) {
        let _ = self.keeps.mark_removed(name, version);
    }
}

impl Repo {
    /// The keychain, if any.
    pub fn keychain(&self) -> Option<&granary_security::KeyChain> {
        self.keychain.as_ref()
    }

    /// A repo over `store`; `keychain` provides keys for per-packet signing.
    pub fn new(store: Store, keychain: Option<granary_security::KeyChain>) -> Self {
        let repo = Repo {
            store,
            keychain,
            null_segments: Default::default(),
            observer: None,
            publisher: None,
            keeps: Default::default(),
        };
        repo.reload();
        repo
    }

    /// The same repo, making a missing publisher key under `identity`.
    pub fn with_publisher(mut self, identity: Name) -> Self {
        self.publisher = Some(identity);
        self
    }

    /// Identity for a new publisher key, if set.
    pub fn publisher(&self) -> Option<&Name> {
        self.publisher.as_ref()
    }

    /// The same repo, telling `o` of what it publishes and removes.
    pub fn with_observer(mut self, o: Arc<dyn Observer>) -> Self {
        self.observer = Some(o);
        self
    }

    /// Tells the observer (if any) that `e` was published; what it made of it.
    pub fn notify_published(&self, e: &Entry) -> Option<Noted> {
        self.observer.as_ref().map(|o| o.published(&self.store, e))
    }

    /// Tells the observer (if any) that `version` of `name` was removed.
    pub fn notify_removed(&self, name: &Name, version: Option<u64>) -> Option<Noted> {
        self.observer.as_ref().map(|o| o.removed(name, version))
    }

    /// Reads the repository's serving settings again (after `granary repo
    /// config` changed them); a bad setting is logged and the default kept.
    pub fn reload(&self) {
        let null = self.store.null_segments().unwrap_or_else(|e| {
            tracing::warn!("{e}; serving DigestSha256 segments");
            false
        });
        self.null_segments
            .store(null, std::sync::atomic::Ordering::Relaxed);
    }

    fn signer(&self, e: &Entry) -> SegmentSig {
        match e.meta.signing.as_deref() {
            Some("ed25519") | Some("ecdsa") => {
                let key = e
                    .meta
                    .signer
                    .as_deref()
                    .and_then(|k| Name::from_uri(k).ok());
                match key.and_then(|k| self.keychain.as_ref()?.signer(&k).ok()) {
                    Some(s) => SegmentSig::Key(s),
                    None => SegmentSig::Digest,
                }
            }
            Some("manifest")
                if e.meta.manifest.is_some()
                    && self
                        .null_segments
                        .load(std::sync::atomic::Ordering::Relaxed) =>
            {
                SegmentSig::Null
            }
            _ => SegmentSig::Digest,
        }
    }

    /// Answers one Interest.
    pub fn answer(&self, i: &Interest) -> Answer {
        if let Some(a) = self.have_answer(i) {
            return a;
        }
        if let Some(a) = self.hash_answer(i) {
            return a;
        }
        if let Some(a) = self.manifest_answer(i) {
            return a;
        }
        if let Some(a) = self.certificate_answer(i) {
            return a;
        }
        answer_with(&self.store, i, |e| self.signer(e))
    }

    /// A batch "have" query ([`have_query_prefix`]): one byte per hash.
    fn have_answer(&self, i: &Interest) -> Option<Answer> {
        static HAVE: std::sync::LazyLock<Name> = std::sync::LazyLock::new(have_query_prefix);
        if i.name.len() != HAVE.len() + 1 || !HAVE.is_prefix_of(&i.name) {
            return None;
        }
        let nack = Some(Answer::Nack(nack_reason::NO_ROUTE));
        let Some(params) = i.fields().app_params.as_ref() else {
            return nack;
        };
        if !i.params_digest_ok() || params.len() % 32 != 0 || params.len() > HAVE_BATCH * 32 {
            return nack;
        }
        let hashes: Vec<[u8; 32]> = params
            .chunks_exact(32)
            .filter_map(|c| c.try_into().ok())
            .collect();
        let have: Vec<u8> = self
            .store
            .has_chunks(&hashes)
            .into_iter()
            .map(u8::from)
            .collect();
        Some(Answer::Data(digest::sign_data(
            DataBuilder::new(i.name.clone()).content(Bytes::from(have)),
        )))
    }

    /// A hash request (`/localhop/granary/sha256/<32 bytes>`): the chunk's
    /// bytes from the hash index, whatever file holds them, in a Data named
    /// after the request (DigestSha256; the consumer checks the bytes
    /// against its manifest). A miss is a Nack (NoRoute) at once.
    fn hash_answer(&self, i: &Interest) -> Option<Answer> {
        let h = parse_hash_request(&i.name)?;
        Some(match self.store.chunk(&h) {
            Ok(Some(bytes)) => Answer::Data(digest::sign_data(
                DataBuilder::new(i.name.clone())
                    .content(Bytes::from(bytes))
                    .freshness_period(SEGMENT_FRESHNESS_MS),
            )),
            Ok(None) => Answer::Nack(nack_reason::NO_ROUTE),
            Err(e) => {
                tracing::warn!("hash request: {e}");
                Answer::Nack(nack_reason::NO_ROUTE)
            }
        })
    }

    /// The node's own certificates (`<identity>/KEY/<key-id>/<issuer>/<v>`),
    /// from its keychain, for anyone who asks by key or certificate name
    /// (`granary key trust --fetch`, or a consumer following a KeyLocator):
    /// certificates are public. Only names with a `KEY` component are
    /// looked up.
    fn certificate_answer(&self, i: &Interest) -> Option<Answer> {
        let kc = self.keychain.as_ref()?;
        let n = &i.name;
        let key_at = n
            .components()
            .position(|c| c.typ == granary_packet::types::COMP_GENERIC && c.value == b"KEY")?;
        if key_at == 0 || key_at + 1 >= n.len() {
            return None;
        }
        let keys = kc.list().ok()?;
        let cert = keys.into_iter().filter_map(|k| k.cert).find(|c| {
            if i.can_be_prefix {
                n.is_prefix_of(c.name())
            } else {
                n == c.name()
            }
        })?;
        Some(Answer::Data(cert.data().clone()))
    }

    fn manifest_answer(&self, i: &Interest) -> Option<Answer> {
        let n = &i.name;
        let seg = n.last().filter(|c| c.typ == COMP_SEGMENT)?.as_number()?;
        if !is_keyword(n.get(-2), b"manifest") {
            return None;
        }
        let ver = n.get(-3).filter(|c| c.typ == COMP_VERSION)?.as_number()?;
        let nack = Some(Answer::Nack(nack_reason::NO_ROUTE));
        let Ok(e) = self.store.get(&n.prefix(-3), Some(ver)) else {
            return nack;
        };
        if seg == 0 {
            let wire = self.store.read_extra(&e, "manifest")?;
            return Some(
                Data::decode(Bytes::from(wire))
                    .map_or(Answer::Nack(nack_reason::NO_ROUTE), Answer::Data),
            );
        }
        let layout = manifest::layout_of(&e);
        let Some((level, block)) = layout.locate(seg) else {
            return nack;
        };
        let count = layout.counts[level];
        let fan = layout.fanout(level);
        let start = block * fan;
        let entries = (count - start).min(fan);
        let len = (entries * 32) as usize;
        let bytes = if level == 0 && layout.format == manifest::FORMAT_VARIABLE {
            manifest::level0_entries(&self.store, &e, start, entries).map_err(|_| ())
        } else if level == 0 {
            self.store
                .read_extra_at(&e, "hashes", start * 32, len)
                .map_err(|_| ())
        } else {
            let before: u64 = layout.counts[1..level].iter().sum();
            self.store
                .read_extra_at(&e, "levels", (before + start) * 32, len)
                .map_err(|_| ())
        };
        let Ok(bytes) = bytes else { return nack };
        Some(Answer::Data(digest::sign_data(
            DataBuilder::new(n.clone())
                .content(Bytes::from(bytes))
                .freshness_period(SEGMENT_FRESHNESS_MS)
                .final_block_id(Component::segment(layout.total_segments() - 1)),
        )))
    }
}

fn is_keyword(c: Option<granary_packet::ComponentRef<'_>>, word: &[u8]) -> bool {
    c.is_some_and(|c| c.typ == COMP_KEYWORD && c.value == word)
}

/// What the repository answers to one Interest.
#[allow(clippy::large_enum_variant)] // one per Interest, moved straight to the face
pub enum Answer {
    /// A Data.
    Data(Data),
    /// A Nack with this reason.
    Nack(u64),
}

/// Answers one Interest from the store (DigestSha256 on everything).
pub fn answer(store: &Store, i: &Interest) -> Answer {
    answer_with(store, i, |_| SegmentSig::Digest)
}

/// `signer` says how a version's versioned segments are signed; segments
/// asked for without a version, or found by CanBePrefix, are for consumers
/// that have no manifest, and get DigestSha256 rather than a NullSignature.
fn answer_with(store: &Store, i: &Interest, signer: impl Fn(&Entry) -> SegmentSig) -> Answer {
    let no_null = |e: &Entry| match signer(e) {
        SegmentSig::Null => SegmentSig::Digest,
        s => s,
    };
    let name = &i.name;
    if let Some(a) = listing(store, i) {
        return a;
    }
    if is_keyword(name.last(), b"metadata") {
        // RDR discovery points at the newest version that is not damaged
        // (the newest when all are).
        return match store.latest_good(&name.prefix(-1)) {
            Ok(e) => Answer::Data(metadata(name, &e)),
            Err(_) => Answer::Nack(nack_reason::NO_ROUTE),
        };
    }
    let last = name.last();
    let prev = name.get(-2);
    if let (Some(s), Some(v)) = (last, prev) {
        if s.typ == COMP_SEGMENT && v.typ == COMP_VERSION {
            if let (Some(seg), Some(ver)) = (s.as_number(), v.as_number()) {
                return match store.get_shared(&name.prefix(-2), Some(ver)) {
                    Ok(e) => segment_with(
                        store,
                        &e,
                        name.clone(),
                        seg,
                        &signer(&e),
                        SEGMENT_FRESHNESS_MS,
                    )
                    .map_or(Answer::Nack(nack_reason::NO_ROUTE), Answer::Data),
                    Err(_) => Answer::Nack(nack_reason::NO_ROUTE),
                };
            }
        }
    }
    // `<name>/seg=<n>` without a version (as ndn-python-repo's GetfileClient
    // asks): the latest version's segment, under the name asked.
    if let Some(s) = last.filter(|c| c.typ == COMP_SEGMENT) {
        if let (Some(seg), Ok(e)) = (s.as_number(), store.get_shared(&name.prefix(-1), None)) {
            return segment_with(
                store,
                &e,
                name.clone(),
                seg,
                &no_null(&e),
                LATEST_SEGMENT_FRESHNESS_MS,
            )
            .map_or(Answer::Nack(nack_reason::NO_ROUTE), Answer::Data);
        }
    }
    if i.can_be_prefix {
        // The object itself, or object/v=V: first segment of that (or the latest) version.
        let (object, version) = match last {
            Some(v) if v.typ == COMP_VERSION => (name.prefix(-1), v.as_number()),
            _ => (name.clone(), None),
        };
        let found = match version {
            Some(v) => store.get_shared(&object, Some(v)),
            None => store.latest_good(&object),
        };
        if let Ok(e) = found {
            let full = object
                .append(&Component::version(e.meta.version))
                .append(&Component::segment(0));
            if let Some(d) = segment_with(store, &e, full, 0, &no_null(&e), SEGMENT_FRESHNESS_MS) {
                return Answer::Data(d);
            }
        }
    }
    Answer::Nack(nack_reason::NO_ROUTE)
}

/// Directory listing, as the NDN-DPDK file server offers it: `<prefix>/32=ls`
/// answers `<prefix>/32=ls/v=<ms>/seg=<n>`; content is one line per child
/// (its component in URI form), `/` appended to prefixes that have children
/// of their own (a name that is both a file and a prefix appears twice).
pub fn listing(store: &Store, i: &Interest) -> Option<Answer> {
    let n = &i.name;
    let (prefix, seg, version) = if is_keyword(n.last(), b"ls") {
        (n.prefix(-1), 0, None)
    } else if is_keyword(n.get(-3), b"ls") {
        let v = n.get(-2).filter(|c| c.typ == COMP_VERSION)?.as_number()?;
        let s = n.last().filter(|c| c.typ == COMP_SEGMENT)?.as_number()?;
        (n.prefix(-3), s, Some(v))
    } else {
        return None;
    };
    let kids = store.children(&prefix).ok()?;
    if kids.is_empty() && !prefix.is_empty() {
        return Some(Answer::Nack(nack_reason::NO_ROUTE));
    }
    let mut text = String::new();
    for (c, object, children) in kids {
        if object {
            text.push_str(&c);
            text.push('\n');
        }
        if children {
            text.push_str(&c);
            text.push_str("/\n");
        }
    }
    let bytes = Bytes::from(text);
    const SEG: usize = 8000;
    let last = (bytes.len().max(1) - 1) / SEG;
    if seg as usize > last {
        return Some(Answer::Nack(nack_reason::NO_ROUTE));
    }
    let v = version.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    });
    let start = seg as usize * SEG;
    let content = bytes.slice(start..(start + SEG).min(bytes.len()));
    let name = prefix
        .append(&Component::keyword(b"ls"))
        .append(&Component::version(v))
        .append(&Component::segment(seg));
    Some(Answer::Data(digest::sign_data(
        DataBuilder::new(name)
            .content(content)
            .freshness_period(METADATA_FRESHNESS_MS)
            .final_block_id(Component::segment(last as u64)),
    )))
}

/// The Data of one segment, encoded straight from the file bytes, signed
/// as `sig` says; `None` when there is no such segment or its bytes no
/// longer match the hash taken at ingest (see [`segment_checked`]).
pub fn segment(store: &Store, e: &Entry, name: Name, seg: u64, sig: &SegmentSig) -> Option<Data> {
    segment_checked(store, e, name, seg, sig, SEGMENT_FRESHNESS_MS).ok()
}

/// Why a segment is not served.
#[derive(Debug)]
pub enum Refused {
    /// No such segment, or the file could not be read.
    Missing,
    /// Its bytes differ from the SHA-256 taken at ingest (the file was
    /// changed outside the repository); recorded with
    /// [`Store::mark_damaged`] by [`report_damage`].
    Damaged(granary_store::integrity::BadSegment),
    /// Its hash could not be read (`@<v>.hashes` missing or short).
    Unchecked(String),
    /// The version's damage record names it (`granary repo scrub`, or an
    /// earlier serve-time check): withheld until a scrub finds it good
    /// again (`scrub --repair-from` repairs it and clears the record).
    Withheld,
}

/// Serve-time integrity: a segment the version's damage record names is
/// never served, whatever its signature (the record is read with the
/// cached lookup: no file access per segment). Before the repository
/// vouches for a segment — with a DigestSha256 or the publisher's
/// signature — its bytes are checked against the hash taken at ingest
/// (`@<v>.hashes`, one `pread` and one SHA-256 of the content). A
/// NullSignature vouches for nothing (the consumer checks the key-signed
/// manifest), so those segments are not re-hashed here; `granary repo
/// scrub` finds their damage, and from then on they are withheld.
pub fn segment_checked(
    store: &Store,
    e: &Entry,
    name: Name,
    seg: u64,
    sig: &SegmentSig,
    freshness_ms: u64,
) -> Result<Data, Refused> {
    if store.withheld(e, seg) {
        return Err(Refused::Withheld);
    }
    let last = e.meta.segments() - 1;
    let mut b = DataBuilder::new(name)
        .freshness_period(freshness_ms)
        .final_block_id(Component::segment(last));
    let check = |content: &[u8]| -> Result<(), Refused> {
        match store.check_segment(e, seg, content) {
            Ok(None) => Ok(()),
            Ok(Some(bad)) => Err(Refused::Damaged(bad)),
            Err(granary_store::Error::NotFound(_)) => Err(Refused::Missing),
            Err(x) => Err(Refused::Unchecked(x.to_string())),
        }
    };
    match sig {
        SegmentSig::Key(s) => {
            let mut buf = Vec::with_capacity(e.meta.segment_size as usize);
            store
                .read_segment(e, seg, &mut buf)
                .map_err(|_| Refused::Missing)?;
            check(&buf)?;
            s.sign_data(b.content(Bytes::from(buf)))
                .map_err(|_| Refused::Missing)
        }
        SegmentSig::Digest | SegmentSig::Null => {
            // Read from the file straight into the packet, check it (not
            // for a NullSignature), then digest (or, for a NullSignature,
            // nothing more).
            let (start, len) = store.segment_range(e, seg).map_err(|_| Refused::Missing)?;
            let null = matches!(sig, SegmentSig::Null);
            let fill = |dst: &mut [u8]| {
                store.read_at(e, start, dst).map_err(|_| Refused::Missing)?;
                if null {
                    Ok(())
                } else {
                    check(dst)
                }
            };
            if null {
                b.sig_info = granary_packet::SignatureInfo::new(sig_type::NULL);
                b.sign_with_content(len as usize, fill, 0, |_| Ok(Bytes::new()))
            } else {
                // A segment served before: its digest is kept (its bytes are
                // checked above all the same).
                match digests::table(e, &b.name, seg, freshness_ms) {
                    Some(t) => b.sign_with_content(len as usize, fill, digest::LEN, |s| {
                        Ok(Bytes::copy_from_slice(&t.value(seg, s)))
                    }),
                    None => b.sign_with_content(len as usize, fill, digest::LEN, digest::value),
                }
            }
        }
    }
}

/// Logs a refused segment and, for damage, records it on the version
/// (`@<v>.damaged`: `granary stat` shows it, RDR discovery then prefers an
/// older good version). The error is logged once per segment (when it is
/// first recorded); repeats are logged at debug level.
pub fn report_damage(store: &Store, e: &Entry, seg: u64, why: &Refused) {
    match why {
        Refused::Missing => {}
        Refused::Withheld => tracing::debug!(
            "not serving segment {seg} of {} v={}: recorded as damaged",
            e.meta.name,
            e.meta.version
        ),
        Refused::Unchecked(x) => tracing::error!(
            "not serving {} v={} segment {seg} ({}): its ingest hash cannot be read: {x}",
            e.meta.name,
            e.meta.version,
            e.path.display()
        ),
        Refused::Damaged(bad) => {
            let known = store
                .damage(e)
                .is_some_and(|d| d.segments.iter().any(|b| b.segment == seg));
            if known {
                tracing::debug!(
                    "not serving damaged segment {seg} of {} v={}",
                    e.meta.name,
                    e.meta.version
                );
                return;
            }
            tracing::error!(
                "integrity: {} v={} segment {seg} (bytes {}..{} of {}) has SHA-256 {}, {} at ingest: the file was changed outside the repository; not served (Nack), version marked damaged (`granary repo scrub --repair-from` restores it)",
                e.meta.name,
                e.meta.version,
                bad.offset,
                bad.offset + bad.len,
                e.path.display(),
                bad.found,
                bad.expected
            );
            if let Err(x) = store.mark_damaged(e, std::slice::from_ref(bad), &[], "serve") {
                tracing::error!("cannot record the damage of {}: {x}", e.path.display());
            }
        }
    }
}

fn segment_with(
    store: &Store,
    e: &Entry,
    name: Name,
    seg: u64,
    sig: &SegmentSig,
    freshness_ms: u64,
) -> Option<Data> {
    match segment_checked(store, e, name, seg, sig, freshness_ms) {
        Ok(d) => Some(d),
        Err(why) => {
            report_damage(store, e, seg, &why);
            None
        }
    }
}

/// RDR metadata: `<name>/32=metadata/v=<now>/seg=0`, content = the versioned
/// name, FinalBlockId and FileMetadata fields.
pub fn metadata(interest_name: &Name, e: &Entry) -> Data {
    let object = interest_name.prefix(-1);
    let versioned = object.append(&Component::version(e.meta.version));
    let mut c = BytesMut::new();
    versioned.encode_to(&mut c);
    let last = Component::segment(e.meta.segments() - 1);
    tlv::put_tlv(&mut c, granary_packet::types::FINAL_BLOCK_ID, last.wire());
    // SegmentSize only when segments have one: readers (NDN-DPDK's file
    // client) compute byte offsets as segment × SegmentSize, which is wrong
    // for content-defined segments; sequential readers do not need it, and
    // the manifest gives every segment's offset and length.
    if e.meta.is_fixed() {
        tlv::put_nni_tlv(
            &mut c,
            file_metadata::SEGMENT_SIZE,
            e.meta.segment_size as u64,
        );
    }
    tlv::put_nni_tlv(&mut c, file_metadata::SIZE, e.meta.size);
    let md = std::fs::metadata(&e.path).ok();
    use std::os::unix::fs::MetadataExt;
    tlv::put_nni_tlv(
        &mut c,
        file_metadata::MODE,
        md.as_ref().map_or(0o100644, |m| m.mode() as u64),
    );
    let ns = |s: i64, n: i64| (s.max(0) as u64) * 1_000_000_000 + n.max(0) as u64;
    if let Some(m) = &md {
        tlv::put_nni_tlv(&mut c, file_metadata::ATIME, ns(m.atime(), m.atime_nsec()));
        tlv::put_nni_tlv(&mut c, file_metadata::BTIME, e.meta.created_ms * 1_000_000);
        tlv::put_nni_tlv(&mut c, file_metadata::CTIME, ns(m.ctime(), m.ctime_nsec()));
        tlv::put_nni_tlv(&mut c, file_metadata::MTIME, ns(m.mtime(), m.mtime_nsec()));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let name = interest_name
        .append(&Component::version(now))
        .append(&Component::segment(0));
    digest::sign_data(
        DataBuilder::new(name)
            .content(c.freeze())
            .freshness_period(METADATA_FRESHNESS_MS)
            .final_block_id(Component::segment(0)),
    )
}

/// What the repository asks of the content store for a reply: Data signed
/// with DigestSha256 (segments of manifest- and digest-signed versions,
/// manifest blocks, metadata, hash-request answers) are rebuilt from the
/// file for one read (segments' digests are kept, [`digests`]) or one
/// SHA-256, so caching them would only hold a second copy of
/// the file in memory — NDNLPv2 CachePolicy NoCache. Data signed with a
/// key (ed25519, ecdsa: a signature costs far more) are cached.
fn no_cache(p: &NetPacket) -> Option<u64> {
    match p {
        NetPacket::Data(d)
            if matches!(
                d.sig_info().sig_type,
                sig_type::DIGEST_SHA256 | sig_type::NULL
            ) =>
        {
            Some(granary_face::CACHE_POLICY_NO_CACHE)
        }
        _ => None,
    }
}

/// How soon the serving daemon indexes a version another process
/// published (`granary put` while the daemon holds the hash index).
pub const INDEX_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Indexes other processes' new versions on a thread of its own, every
/// [`INDEX_EVERY`], for as long as `repo` is served: hash requests are
/// answered from the index and never wait for a version to be indexed
/// (the serving loop runs them inline).
fn index_in_background(repo: &Arc<Repo>) {
    let weak = Arc::downgrade(repo);
    let started = std::thread::Builder::new()
        .name("index-catch-up".into())
        .spawn(move || loop {
            let Some(repo) = weak.upgrade() else { break };
            repo.store.index_pending();
            drop(repo);
            std::thread::sleep(INDEX_EVERY);
        });
    match started {
        Ok(_) => repo.store.index_in_background(),
        Err(e) => tracing::warn!("no background indexing thread ({e}): lookups index new versions"),
    }
}

/// Serves the repo on an in-process face until the forwarder goes away,
/// with the network commands' defaults ([`python_repo::ServeConfig::default`]).
pub async fn serve(repo: Arc<Repo>, face: AppFace) {
    serve_with(repo, face, python_repo::ServeConfig::default()).await
}

/// Serves the repo on an in-process face: answers Interests for stored
/// objects, answers ndn-python-repo insert/delete/check commands under the
/// repo names, and sends the Interests of network inserts (Data and Nacks
/// that come back are matched to them by name).
pub async fn serve_with(repo: Arc<Repo>, mut face: AppFace, cfg: python_repo::ServeConfig) {
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<(NetPacket, LinkFields)>(256);
    let local = local_commands::Local::new(repo.clone(), out_tx.clone());
    let service = Arc::new(python_repo::CommandService::new(repo.clone(), cfg, out_tx));
    {
        let s = service.clone();
        tokio::spawn(async move { s.register().await });
    }
    index_in_background(&repo);
    loop {
        tokio::select! {
            got = face.recv() => {
                let Some((pkt, link)) = got else { break };
                // A mark on the Interest says the node's queue towards this
                // producer stayed long (`granary_face::internal`): the answer
                // carries it on to the consumer, whose window is what fills
                // that queue.
                let mark = link.congestion_mark;
                let reply = match pkt {
                    NetPacket::Interest(i) if local.is_mine(&i) => local.on_interest(&i, &link).map(|p| (p, link.pit_token)),
                    NetPacket::Interest(i) => match service.on_interest(&i, &link) {
                        python_repo::Handled::Reply(p) => Some((p, link.pit_token)),
                        python_repo::Handled::Taken => None,
                        python_repo::Handled::NotMine => Some((
                            match repo.answer(&i) {
                                Answer::Data(d) => NetPacket::Data(d),
                                Answer::Nack(r) => NetPacket::Nack(i, r),
                            },
                            link.pit_token,
                        )),
                    },
                    NetPacket::Data(d) => {
                        service.consumer.on_data(&d);
                        None
                    }
                    NetPacket::Nack(i, r) => {
                        service.consumer.on_nack(&i, r);
                        None
                    }
                };
                if let Some((p, pit_token)) = reply {
                    let back = LinkFields {
                        pit_token,
                        cache_policy: no_cache(&p),
                        congestion_mark: mark,
                        ..Default::default()
                    };
                    if !face.send(p, back).await {
                        break;
                    }
                }
            }
            Some((p, mut link)) = out_rx.recv() => {
                // Delayed answers (local commands, network inserts' Interests)
                // are never cached either.
                if link.cache_policy.is_none() {
                    link.cache_policy = no_cache(&p);
                }
                if !face.send(p, link).await {
                    break;
                }
            }
        }
    }
}
