//! Reading a version the node holds for `/data`: whole segments at a time
//! from the store's open file into reused buffers, each segment checked
//! against the verified manifest (two threads hash a block's halves) before
//! any of its bytes is handed on. The same checks as
//! `granary_transfer::read_verified`; the buffers are the difference: a
//! block handed to the response returns to a small pool when the response
//! has written it, so a download costs no allocation, page fault or zeroing
//! per block once it runs.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use granary_transfer::object::Check;
use granary_transfer::ObjectInfo;

/// Bytes read and checked per step (whole segments; a segment larger than
/// this is read alone).
pub(crate) const BLOCK: u64 = 4 << 20;
/// Idle buffers kept for reuse (each about [`BLOCK`] bytes).
const POOL_MAX: usize = 8;

/// Buffers of about [`BLOCK`] bytes, reused across downloads.
#[derive(Default)]
pub(crate) struct Pool(Mutex<Vec<Vec<u8>>>);

impl Pool {
    fn take(&self, len: usize) -> Vec<u8> {
        let mut v = self
            .0
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default();
        if v.len() < len {
            // Zeroed once, when the buffer is made or grown; reads
            // overwrite what a reused buffer held.
            v.resize(len, 0);
        }
        v
    }

    fn give(&self, v: Vec<u8>) {
        if v.len() > 2 * BLOCK as usize {
            return;
        }
        if let Ok(mut p) = self.0.lock() {
            if p.len() < POOL_MAX {
                p.push(v);
            }
        }
    }
}

/// A pooled buffer lent to a `Bytes`: back to the pool when dropped.
struct Lent {
    v: Vec<u8>,
    len: usize,
    pool: Arc<Pool>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.v[..self.len]
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.v));
    }
}

/// The first segment of `segs` (offset in `buf`, length, hash) whose bytes
/// do not match, the halves hashed on two threads when the block is large.
fn first_bad(segs: &[(usize, usize, [u8; 32])], buf: &[u8]) -> Option<usize> {
    let check = |r: std::ops::Range<usize>| {
        r.into_iter().find(|&k| {
            let (o, l, h) = segs[k];
            granary_packet::sha256(&buf[o..o + l]) != h
        })
    };
    let mid = segs.len() / 2;
    // A thread costs more than hashing less than a MiB.
    if mid == 0 || buf.len() < 1 << 20 {
        return check(0..segs.len());
    }
    std::thread::scope(|sc| {
        let t = sc.spawn(|| check(mid..segs.len()));
        let a = check(0..mid);
        a.or(t.join().ok().flatten())
    })
}

/// Bytes `start..end` of the object `info` from `file`, checked, handed to
/// `emit` in order (which returns false to stop). Needs a manifest with
/// every segment's hash and length (checked when the info was made).
pub(crate) fn read(
    pool: &Arc<Pool>,
    file: &std::fs::File,
    info: &ObjectInfo,
    start: u64,
    end: u64,
    mut emit: impl FnMut(Bytes) -> bool,
) -> Result<(), String> {
    let Check::Manifest(ck) = &info.check else {
        return Err(format!("{}: no signed manifest", info.versioned));
    };
    let size = info.map.file_size().unwrap_or(0);
    let end = end.min(size);
    if start >= end {
        return Ok(());
    }
    let last = info.map.segment_of(end - 1);
    let mut s = info.map.segment_of(start);
    let seg = |s: u64| -> Result<(u64, u64, [u8; 32]), String> {
        match (info.map.len(s), ck.segment_hash(s)) {
            (Some(l), Some(h)) => Ok((info.map.start(s), l, h)),
            _ => Err(format!(
                "{}: the manifest gives no hash or length for segment {s}",
                info.versioned
            )),
        }
    };
    let mut plan = Vec::new();
    while s <= last {
        let lo = info.map.start(s);
        plan.clear();
        let mut len = 0u64;
        let mut e = s;
        while e <= last {
            let (_, l, h) = seg(e)?;
            if !plan.is_empty() && len + l > BLOCK {
                break;
            }
            plan.push((len as usize, l as usize, h));
            len += l;
            e += 1;
        }
        let mut buf = pool.take(len as usize);
        file.read_exact_at(&mut buf[..len as usize], lo)
            .map_err(|x| format!("local copy of {}: {x}", info.versioned))?;
        if let Some(k) = first_bad(&plan, &buf[..len as usize]) {
            pool.give(buf);
            return Err(format!(
                "{}: segment {} of the local copy does not match the signed manifest",
                info.versioned,
                s + k as u64
            ));
        }
        let from = start.saturating_sub(lo) as usize;
        let to = (end - lo).min(len) as usize;
        let b = Bytes::from_owner(Lent {
            v: buf,
            len: len as usize,
            pool: pool.clone(),
        })
        .slice(from..to);
        if !emit(b) {
            return Ok(());
        }
        s = e;
    }
    Ok(())
}
