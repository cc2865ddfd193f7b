//! # granary-transfer
//!
//! Granary's fetch engine. [`Engine`] runs any number of [`Job`]s over a
//! [`Link`] with one congestion window (fixed, AIMD or CUBIC), RFC 6298
//! retransmission timers, congestion-mark and Nack reactions and a retry
//! limit. On top: segmented objects ([`discover`], [`ObjectJob`]) verified
//! against the signed manifest or per-packet signatures, written out of
//! order with positioned writes ([`fetch_objects`], resumable), and random
//! access by byte range ([`RemoteFile`]).
//!
//! Depends on packet, security, manifest and face (framing, NDNLPv2 decode);
//! never on the repository, store or forwarder (the repository uses this).
#![forbid(unsafe_code)]

pub mod cc;
pub mod config;
pub mod dedup;
pub mod engine;
pub mod file;
pub mod items_job;
pub mod link;
pub mod local_copy;
pub mod locate;
pub mod object;
pub mod rtt;
pub mod segmap;

pub use config::{Config, LocatorRef, PipelineType, SegmentCrcs};
pub use dedup::{
    dedup_possible, fetch_dedup, ChunkReader, Dedup, DedupReport, FromSource, Sources, Timings,
};
pub use engine::{Engine, Failure, Job, JobState, Recovery, Request, Stats, Verdict};
pub use file::{
    fetch_objects, part_paths, FileStat, Output, RemoteFile, Report, Stream, StreamWriter,
};
pub use items_job::{Item, ItemsJob, Outcome};
pub use link::{AppLink, ChannelLink, Link, UnixLink};
pub use local_copy::{
    copy_verified, copy_verified_from, read_verified, read_verified_cached, read_verified_pooled,
    BufferPool, CopyReport,
};
pub use locate::{LocateFuture, Located, Locator};
pub use object::{
    discover, discover_signed, fetch_one, ObjectInfo, ObjectJob, OpenOptions, Sink, Trust,
    INTEGRITY_ONLY,
};
pub use segmap::SegmentMap;

/// Fetch errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Cannot connect.
    #[error("cannot connect to {0}")]
    Connect(String),
    /// The link failed.
    #[error("link: {0}")]
    Link(String),
    /// A fetch failed (not found, timeouts, Nacks).
    #[error("{0}")]
    Fetch(String),
    /// Verification failed.
    #[error("verification failed: {0}")]
    Verify(String),
    /// Writing the output failed.
    #[error("output: {0}")]
    Output(String),
}
