//! Segmented objects: [`ObjectInfo`] (what was discovered and how its segments are
//! checked) and [`ObjectJob`], which fetches a segment range into a [`Sink`] and never
//! passes unverified bytes on as good. Beside it: the trust rules (`trust.rs`), version
//! discovery by RDR or a CanBePrefix Interest and the signed manifest (`discover.rs`),
//! the sinks (`sink.rs`) and the segment bitmap (`bitmap.rs`).

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

mod bitmap;
mod discover;
mod sink;
mod trust;

pub use bitmap::Bitmap;
pub use discover::{
    discover, discover_signed, fetch_one, parse_metadata, Metadata, OneShot, OpenOptions,
};
pub(crate) use sink::Recycler;
pub use sink::{FileSink, MemSink, Sink, StreamSink, STORED_MARK, WRITE_COMBINE};
pub use trust::{Trust, INTEGRITY_ONLY};

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
