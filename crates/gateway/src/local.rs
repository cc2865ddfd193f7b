//! Reading a version the node holds for `/data` and previews: the one verified-read
//! routine, `granary_transfer::read_verified_pooled` (whole segments, each checked
//! against the verified manifest before any of its bytes is handed on), with the
//! gateway's buffers reused across downloads.

use std::sync::Arc;

use bytes::Bytes;
use granary_transfer::ObjectInfo;

/// The gateway's reused read buffers.
pub(crate) type Pool = granary_transfer::BufferPool;

/// Bytes `start..end` of the object `info` from `file`, checked, handed to `emit` in
/// order (which returns false to stop).
pub(crate) fn read(
    pool: &Arc<Pool>,
    file: &std::fs::File,
    info: &ObjectInfo,
    start: u64,
    end: u64,
    emit: impl FnMut(Bytes) -> bool,
) -> Result<(), String> {
    granary_transfer::read_verified_pooled(pool, file, info, start, end, emit)
        .map_err(|e| e.to_string())
}
