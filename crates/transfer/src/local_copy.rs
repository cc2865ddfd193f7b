//! A verified copy of an object that is already on this machine (a
//! version in the node's own repository): read from its file, every
//! segment checked against the object's verified manifest, written out in
//! order — at disk speed, no Interest sent. The caller finds the file (this
//! crate knows no store); a segment that does not match stops the copy
//! before its bytes are written, and nothing partial is left behind, so the
//! caller can fetch over the network instead.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::file::{part_paths, Output};
use crate::object::{Check, ObjectInfo};
use crate::Error;

/// Bytes read, checked and written per step (whole segments).
const BLOCK: u64 = 8 << 20;
/// Blocks between the checking thread and the writing one.
const IN_FLIGHT: usize = 3;
/// Blocks the reading thread may be ahead of the checking one.
const READ_AHEAD: usize = 2;
/// Sources at least this large are read without growing the page cache:
/// pages more than [`DROP_WINDOW`] behind the read are dropped (the values
/// of the repository's serving path).
const DROP_BEHIND_MIN: u64 = 256 << 20;
const DROP_WINDOW: u64 = 32 << 20;

/// What a local copy did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CopyReport {
    /// Versioned name.
    pub versioned: String,
    /// Where the bytes came from.
    pub source: PathBuf,
    /// Output path (None for standard output).
    pub path: Option<PathBuf>,
    /// Bytes copied.
    pub size: u64,
    /// Segments checked.
    pub segments: u64,
    /// What they were checked against.
    pub verified_by: String,
    /// Bytes read with direct I/O (the rest came through the page cache).
    pub read_direct: u64,
    /// Bytes written with direct I/O (to a regular file whose file system
    /// takes it; the rest went through the page cache).
    pub written_direct: u64,
}

/// Where the writing thread of a local copy puts the checked bytes.
enum Dest {
    /// A regular file, written with direct I/O.
    Direct(DirectOut),
    /// Anything else, and a regular file whose file system refuses direct
    /// I/O (written back as it goes when a `Recycler` is given).
    Plain(Box<dyn Write + Send>, Option<crate::object::Recycler>),
}

/// A file written from its start with direct I/O: bytes are staged in an
/// aligned buffer and written in whole aligned blocks; the last block is
/// padded with zeros and the file cut back to its size by
/// [`DirectOut::finish`]. A write the file system refuses turns the file
/// back to buffered writes, nothing lost.
struct DirectOut {
    file: std::fs::File,
    stage: Vec<u8>,
    /// Where the aligned part of `stage` starts.
    at: usize,
    /// Bytes staged.
    len: usize,
    /// File offset of the first staged byte (a multiple of [`ALIGN`]
    /// while direct).
    off: u64,
    direct: bool,
    /// Bytes written with direct I/O.
    done_direct: u64,
}

impl DirectOut {
    /// Bytes staged between writes (a multiple of [`ALIGN`]).
    const STAGE: usize = 8 << 20;

    /// A second descriptor of `f` (empty, just created) switched to direct
    /// I/O, if its file system takes it.
    fn new(f: &std::fs::File) -> Option<DirectOut> {
        let file = direct_view(f)?;
        let stage = vec![0u8; Self::STAGE + ALIGN];
        let at = stage.as_ptr().align_offset(ALIGN).min(ALIGN);
        Some(DirectOut {
            file,
            stage,
            at,
            len: 0,
            off: 0,
            direct: true,
            done_direct: 0,
        })
    }

    fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            let n = (Self::STAGE - self.len).min(bytes.len());
            self.stage[self.at + self.len..self.at + self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == Self::STAGE {
                self.flush(Self::STAGE)?;
            }
        }
        Ok(())
    }

    /// Writes the first `n` staged bytes (`n` a multiple of [`ALIGN`], or
    /// all of them once buffered) and moves the rest to the front.
    fn flush(&mut self, n: usize) -> std::io::Result<()> {
        let bytes = &self.stage[self.at..self.at + n];
        if self.direct {
            match self.file.write_all_at(bytes, self.off) {
                Ok(()) => self.done_direct += n as u64,
                Err(e)
                    if [rustix::io::Errno::INVAL, rustix::io::Errno::OPNOTSUPP]
                        .iter()
                        .any(|x| e.raw_os_error() == Some(x.raw_os_error())) =>
                {
                    // Refused (a file system that takes O_DIRECT at
                    // F_SETFL but not this write): buffered from here on.
                    self.direct = false;
                    buffered_again(self.file.try_clone()?)?;
                    self.file.write_all_at(bytes, self.off)?;
                }
                Err(e) => return Err(e),
            }
        } else {
            self.file.write_all_at(bytes, self.off)?;
        }
        self.stage
            .copy_within(self.at + n..self.at + self.len, self.at);
        self.len -= n;
        self.off += n as u64;
        Ok(())
    }

    /// Writes what is staged (the last block padded to [`ALIGN`], then
    /// cut off) and returns the bytes written with direct I/O.
    fn finish(mut self, size: u64) -> std::io::Result<u64> {
        if self.len > 0 {
            let whole = if self.direct {
                let whole = self.len.div_ceil(ALIGN) * ALIGN;
                self.stage[self.at + self.len..self.at + whole].fill(0);
                whole
            } else {
                self.len
            };
            let real = self.len;
            self.len = whole;
            let was_direct = self.direct;
            self.flush(whole)?;
            if was_direct && self.direct {
                self.done_direct -= (whole - real) as u64;
            }
            self.file.set_len(size)?;
        }
        Ok(self.done_direct)
    }
}

fn io(p: &Path, e: std::io::Error) -> Error {
    Error::Output(format!("{}: {e}", p.display()))
}

/// Copies `src` (the object's bytes) to `out`, checking every segment's
/// SHA-256 and length against the manifest of `info` first. Needs a
/// manifest that gives every segment's hash ([`crate::dedup_possible`]).
/// A regular-file output is written as `<out>.part`, synced and renamed;
/// on any error it is removed.
pub fn copy_verified(
    src: &Path,
    info: &ObjectInfo,
    out: &Output,
    progress: impl FnMut(u64),
) -> Result<CopyReport, Error> {
    let from = std::fs::File::open(src).map_err(|e| io(src, e))?;
    copy_verified_from(from, src, info, out, progress)
}

/// [`copy_verified`] from a file already open (e.g. one the node passed
/// over its socket to an application that cannot open the node's
/// repository itself); `src` names it in reports and errors.
pub fn copy_verified_from(
    from: std::fs::File,
    src: &Path,
    info: &ObjectInfo,
    out: &Output,
    progress: impl FnMut(u64),
) -> Result<CopyReport, Error> {
    copy_read_by(from, src, info, out, progress, cached).map(|(r, _)| r)
}

/// How a local copy read its source: bytes read with direct I/O (from a
/// descriptor opened with `O_DIRECT`) and bytes read through the page
/// cache. Their sum is the object's size.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ReadPaths {
    direct: u64,
    buffered: u64,
}

/// [`copy_verified_from`], with `is_cached` the probe that chooses the
/// read path (direct I/O for a source it says is not in the page cache),
/// and which path each byte took.
fn copy_read_by(
    from: std::fs::File,
    src: &Path,
    info: &ObjectInfo,
    out: &Output,
    mut progress: impl FnMut(u64),
    is_cached: impl FnOnce(&std::fs::File, u64) -> bool,
) -> Result<(CopyReport, ReadPaths), Error> {
    let Check::Manifest(ck) = &info.check else {
        return Err(Error::Verify(format!(
            "{}: no signed manifest to check a local copy against",
            info.versioned
        )));
    };
    let size = info
        .map
        .file_size()
        .ok_or_else(|| Error::Fetch(format!("{}: size unknown", info.versioned)))?;
    let have = from.metadata().map_err(|e| io(src, e))?.len();
    if have != size {
        return Err(Error::Verify(format!(
            "{}: {} holds {have} bytes, the manifest says {size}",
            info.versioned,
            src.display()
        )));
    }
    let count = info.map.count();
    // Segment boundaries and hashes, checked up front.
    let mut plan: Vec<(u64, u64, [u8; 32])> = Vec::with_capacity(count as usize);
    for s in 0..count {
        let (Some(len), Some(h)) = (info.map.len(s), ck.segment_hash(s)) else {
            return Err(Error::Verify(format!(
                "{}: the manifest gives no hash or length for segment {s}",
                info.versioned
            )));
        };
        plan.push((info.map.start(s), len, h));
    }
    // A regular file is written with direct I/O where its file system takes
    // it, as the repository writes at ingest (decision 0015): the checked
    // bytes go from an aligned buffer to the disk, with no page-cache fill
    // and no write-back left for the final sync. Elsewhere it is written
    // back (and its clean pages dropped) as it goes, as a network
    // download's is (`Recycler`).
    let (path, part, dest): (Option<PathBuf>, Option<PathBuf>, Dest) = match out {
        Output::File(p) => {
            let (part, _, _) = part_paths(p);
            let f = std::fs::File::create(&part).map_err(|e| io(&part, e))?;
            let dest = match DirectOut::new(&f) {
                Some(d) => Dest::Direct(d),
                None => Dest::Plain(
                    Box::new(f.try_clone().map_err(|e| io(&part, e))?),
                    crate::object::Recycler::start(&f),
                ),
            };
            (Some(p.clone()), Some(part), dest)
        }
        // Opened once for whatever writes it (see `Stream`): if this copy
        // stops, the network fetch goes on from where it stopped, on the
        // same open file.
        Output::Special(st) | Output::Stdout(st) => {
            (st.path(), None, Dest::Plain(Box::new(st.writer()?), None))
        }
    };
    // Three stages, so that the disk, the hashing and the writing overlap:
    // a reading thread stays up to `READ_AHEAD` blocks ahead of this one,
    // which checks each block and hands it to a writing thread. A block
    // travels with the range of it that holds the bytes (direct reads start
    // at an aligned address before it); buffers go back to the reader.
    let (tx, rx) = mpsc::sync_channel::<(Vec<u8>, std::ops::Range<usize>)>(IN_FLIGHT);
    let (back_tx, back_rx) = mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT + READ_AHEAD + 2);
    let writer = std::thread::Builder::new()
        .name("local-copy-write".into())
        .spawn(move || -> std::io::Result<u64> {
            let mut dest = dest;
            for (buf, range) in rx {
                match &mut dest {
                    Dest::Direct(d) => d.write(&buf[range.clone()])?,
                    Dest::Plain(w, recycler) => {
                        w.write_all(&buf[range.clone()])?;
                        if let Some(r) = recycler.as_mut() {
                            r.written(range.len() as u64);
                        }
                    }
                }
                // Never blocks: a buffer the reader has no room for is dropped
                // (blocking here while the reader blocks on `tx` would deadlock).
                let _ = back_tx.try_send(buf);
            }
            match dest {
                Dest::Direct(d) => d.finish(size),
                Dest::Plain(mut w, recycler) => {
                    w.flush()?;
                    if let Some(r) = recycler {
                        r.stop();
                    }
                    Ok(0)
                }
            }
        })
        .map_err(|e| Error::Output(format!("cannot start a thread: {e}")))?;
    // Blocks: runs of whole segments, at most BLOCK bytes unless one
    // segment is larger (first segment, end, offset, length).
    let mut blocks: Vec<(usize, usize, u64, u64)> = Vec::new();
    let mut s = 0usize;
    while s < plan.len() {
        let (mut end, mut len) = (s, 0u64);
        while end < plan.len() && (end == s || len + plan[end].1 <= BLOCK) {
            len += plan[end].1;
            end += 1;
        }
        blocks.push((s, end, plan[s].0, len));
        s = end;
    }
    // A source that is not in the page cache is read with direct I/O where
    // the file system allows it: the repository writes its files that way,
    // so right after a `put` the file is not cached, and filling fresh cache
    // pages costs CPU the hashing needs. A cached one is read from the
    // cache (faster than the disk). Otherwise a large source streams
    // through the page cache without growing it (as the repository serves
    // it: `granary_store::DROP_BEHIND_MIN`).
    // The descriptor itself is switched to direct I/O (`F_SETFL`), not the
    // path opened again: a descriptor passed by the node (`<socket>.files`)
    // has no path this process may open, and it is the route every other
    // application and user on the node takes.
    let direct = (!is_cached(&from, size))
        .then(|| direct_view(&from))
        .flatten();
    let from = &from;
    type Block = (usize, Vec<u8>, std::ops::Range<usize>);
    let (read, paths) = std::thread::scope(|sc| {
        let (rd_tx, rd_rx) = mpsc::sync_channel::<Result<Block, Error>>(READ_AHEAD);
        let blocks = &blocks;
        let reader = sc.spawn(move || {
            let mut direct = direct;
            let mut paths = ReadPaths::default();
            let mut dropped = 0u64;
            for (i, &(_, _, start, len)) in blocks.iter().enumerate() {
                let mut buf = back_rx.try_recv().unwrap_or_default();
                let got = read_block(from, &mut direct, &mut buf, start, len, &mut paths);
                let range = match got {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = rd_tx.send(Err(io(src, e)));
                        break;
                    }
                };
                if direct.is_none() && size >= DROP_BEHIND_MIN && start >= dropped + 2 * DROP_WINDOW
                {
                    let to = start - DROP_WINDOW;
                    let _ = rustix::fs::fadvise(
                        from,
                        dropped,
                        std::num::NonZeroU64::new(to - dropped),
                        rustix::fs::Advice::DontNeed,
                    );
                    dropped = to;
                }
                if rd_tx.send(Ok((i, buf, range))).is_err() {
                    break; // the checker stopped
                }
            }
            paths
        });
        let checked = (|| -> Result<(), Error> {
            for got in rd_rx.iter() {
                let (i, buf, range) = got?;
                let (s, end, _, len) = blocks[i];
                if let Some(k) = first_bad(&plan[s..end], &buf, range.start) {
                    return Err(Error::Verify(format!(
                        "{}: segment {} of the local copy {} does not match the signed manifest",
                        info.versioned,
                        s + k,
                        src.display()
                    )));
                }
                if tx.send((buf, range)).is_err() {
                    return Ok(()); // the writer stopped: its error follows
                }
                progress(len);
            }
            Ok(())
        })();
        drop(rd_rx);
        let paths = reader.join().unwrap_or_default();
        (checked, paths)
    });
    drop(tx);
    let written = writer
        .join()
        .map_err(|_| Error::Output("the writing thread panicked".into()))?;
    let fail = |e: Error| {
        if let Some(p) = &part {
            let _ = std::fs::remove_file(p);
        }
        Err(e)
    };
    if let Err(e) = read {
        return fail(e);
    }
    let written_direct = match written {
        Ok(n) => n,
        Err(e) => return fail(Error::Output(format!("writing: {e}"))),
    };
    if let (Some(part), Some(p)) = (&part, &path) {
        let synced = std::fs::OpenOptions::new()
            .write(true)
            .open(part)
            .and_then(|f| f.sync_all());
        if let Err(e) = synced {
            return fail(io(part, e));
        }
        if let Err(e) = std::fs::rename(part, p) {
            return fail(io(p, e));
        }
    }
    let report = CopyReport {
        versioned: info.versioned.to_string(),
        source: src.to_path_buf(),
        path,
        size,
        segments: count,
        verified_by: info.verified_by.clone(),
        read_direct: paths.direct,
        written_direct,
    };
    Ok((report, paths))
}

/// The first of `segs` (offset, length, SHA-256), laid end to end in `buf`
/// from `base`, whose bytes do not match its hash; two threads hash the
/// two halves (SHA-256 is the cost: 1.4 GB/s per core here).
fn first_bad(segs: &[(u64, u64, [u8; 32])], buf: &[u8], base: usize) -> Option<usize> {
    let mut offs = Vec::with_capacity(segs.len());
    let mut at = base;
    for &(_, l, _) in segs {
        offs.push(at);
        at += l as usize;
    }
    let check = |ks: std::ops::Range<usize>| {
        ks.into_iter().find(|&k| {
            let (_, l, h) = segs[k];
            granary_packet::sha256(&buf[offs[k]..offs[k] + l as usize]) != h
        })
    };
    let mid = segs.len() / 2;
    // A thread costs more than hashing less than a MiB.
    if mid == 0 || at - base < 1 << 20 {
        return check(0..segs.len());
    }
    std::thread::scope(|sc| {
        let t = sc.spawn(|| check(mid..segs.len()));
        let a = check(0..mid);
        a.or(t.join().ok().flatten())
    })
}

/// Alignment of direct-I/O reads (offset, length and buffer address).
const ALIGN: usize = 4096;

/// True if the start of `f` (of `size` bytes) is in the page cache: a
/// read that may not wait for the disk (`RWF_NOWAIT`) gets all of it.
fn cached(f: &std::fs::File, size: u64) -> bool {
    let mut probe = vec![0u8; (size.min(1 << 20)) as usize];
    let want = probe.len();
    want == 0
        || rustix::io::preadv2(
            f,
            &mut [std::io::IoSliceMut::new(&mut probe)],
            0,
            rustix::io::ReadWriteFlags::NOWAIT,
        )
        .is_ok_and(|n| n == want)
}

/// `f` switched to direct I/O, if its file system takes it: a second
/// descriptor of the same open file, whose flags (`O_DIRECT` set with
/// `F_SETFL`) `f` now shares until [`buffered_again`].
fn direct_view(f: &std::fs::File) -> Option<std::fs::File> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let d = f.try_clone().ok()?;
    let flags = fcntl_getfl(&d).ok()?;
    fcntl_setfl(&d, flags | OFlags::DIRECT).ok()?;
    Some(d)
}

/// Clears `O_DIRECT` from the open file `d` (and so from the descriptor it
/// was cloned from), for buffered reads.
fn buffered_again(d: std::fs::File) -> std::io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let flags = fcntl_getfl(&d)?;
    fcntl_setfl(&d, flags - OFlags::DIRECT)?;
    Ok(())
}

/// Reads the block of `len` bytes at `start` of `from` into `buf`: with
/// direct I/O through `direct` while the file system takes it (a refused
/// read turns it back to buffered for good), else through the page cache.
/// Counts the bytes in `paths`; returns where in `buf` they are.
fn read_block(
    from: &std::fs::File,
    direct: &mut Option<std::fs::File>,
    buf: &mut Vec<u8>,
    start: u64,
    len: u64,
    paths: &mut ReadPaths,
) -> std::io::Result<std::ops::Range<usize>> {
    if let Some(d) = direct.as_ref() {
        match read_direct(d, buf, start, len as usize) {
            Ok(r) => {
                paths.direct += len;
                return Ok(r);
            }
            // Refused (a file system that takes O_DIRECT at open but not
            // this read): buffered from here on.
            Err(e)
                if [rustix::io::Errno::INVAL, rustix::io::Errno::OPNOTSUPP]
                    .iter()
                    .any(|n| e.raw_os_error() == Some(n.raw_os_error())) =>
            {
                if let Some(d) = direct.take() {
                    buffered_again(d)?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    buf.resize(len as usize, 0);
    from.read_exact_at(&mut buf[..len as usize], start)?;
    paths.buffered += len;
    Ok(0..len as usize)
}

/// Reads `len` bytes at `start` of the direct-I/O file `f` into `buf`
/// (grown as needed): whole aligned blocks into an aligned part of it.
/// Returns where in `buf` the bytes are; fails if the file ends first.
fn read_direct(
    f: &std::fs::File,
    buf: &mut Vec<u8>,
    start: u64,
    len: usize,
) -> std::io::Result<std::ops::Range<usize>> {
    let lo = start - start % ALIGN as u64;
    let skip = (start - lo) as usize;
    let whole = (skip + len).div_ceil(ALIGN) * ALIGN;
    if buf.len() < whole + ALIGN {
        buf.resize(whole + ALIGN, 0);
    }
    let a = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
    let mut got = 0;
    while got < skip + len {
        // Whole blocks only: the file's end is the one short read.
        match f.read_at(&mut buf[a + got..a + whole], lo + got as u64)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n if n % ALIGN != 0 && got + n < skip + len => {
                return Err(std::io::ErrorKind::UnexpectedEof.into())
            }
            n => got += n,
        }
    }
    Ok(a + skip..a + skip + len)
}

/// Bytes checked per step by [`read_verified`] (whole segments; a segment larger
/// than this is read alone).
const RANGE_BLOCK: u64 = 4 << 20;
/// Idle buffers a [`BufferPool`] keeps (each about [`RANGE_BLOCK`] bytes).
const POOL_MAX: usize = 8;

/// Buffers of about [`RANGE_BLOCK`] bytes reused across [`read_verified_pooled`]
/// calls: a block handed on as `Bytes` comes back when its last clone is dropped, so a
/// long-running reader (the gateway's `/data`) pays no allocation, page fault or
/// zeroing per block once it runs.
#[derive(Default)]
pub struct BufferPool(std::sync::Mutex<Vec<Vec<u8>>>);

impl BufferPool {
    fn take(&self, len: usize) -> Vec<u8> {
        let mut v = self
            .0
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default();
        if v.len() < len {
            // Zeroed once, when the buffer is made or grown; reads overwrite what a
            // reused buffer held.
            v.resize(len, 0);
        }
        v
    }

    fn give(&self, v: Vec<u8>) {
        if v.len() > 2 * RANGE_BLOCK as usize {
            return;
        }
        if let Ok(mut p) = self.0.lock() {
            if p.len() < POOL_MAX {
                p.push(v);
            }
        }
    }
}

/// A pooled buffer lent to a `Bytes`: back to its pool when dropped.
struct Lent {
    v: Vec<u8>,
    len: usize,
    pool: std::sync::Arc<BufferPool>,
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

/// Reads bytes `start..end` of the object `info` from `file` (a local copy
/// of it, e.g. the node's own repository's), in whole segments, each checked
/// against the manifest before any of its bytes is handed to `emit` (which
/// gets them trimmed to the range, in order, and returns false to stop).
/// Needs a manifest that gives every segment's hash ([`crate::dedup_possible`]).
pub fn read_verified(
    file: &std::fs::File,
    info: &ObjectInfo,
    start: u64,
    end: u64,
    emit: impl FnMut(bytes::Bytes) -> bool,
) -> Result<(), Error> {
    let pool = std::sync::Arc::new(BufferPool::default());
    read_verified_pooled(&pool, file, info, start, end, emit)
}

/// [`read_verified`] with its buffers taken from, and returned to, `pool`.
pub fn read_verified_pooled(
    pool: &std::sync::Arc<BufferPool>,
    file: &std::fs::File,
    info: &ObjectInfo,
    start: u64,
    end: u64,
    emit: impl FnMut(bytes::Bytes) -> bool,
) -> Result<(), Error> {
    read_verified_by(pool, file, info, start, end, emit, |f, buf, at| {
        f.read_exact_at(buf, at).map(|()| true)
    })
    .map(|_| ())
}

/// Bytes `start..end` (at most [`RANGE_BLOCK`] of whole segments) of the object
/// `info`, checked as [`read_verified_pooled`] checks them, when every byte is in the
/// page cache: `Ok(None)` when a read would wait for the disk (`RWF_NOWAIT`), or the
/// file system cannot say. For a caller that must not block (an async worker): it
/// takes the blocking route on `None`.
pub fn read_verified_cached(
    pool: &std::sync::Arc<BufferPool>,
    file: &std::fs::File,
    info: &ObjectInfo,
    start: u64,
    end: u64,
) -> Result<Option<bytes::Bytes>, Error> {
    let mut got = Vec::new();
    let all = read_verified_by(
        pool,
        file,
        info,
        start,
        end,
        |b| {
            got.push(b);
            // One block only: a longer range is not this route's.
            false
        },
        read_nowait,
    )?;
    match (all, got.len()) {
        (true, 1) if got[0].len() as u64 == end.min(info.map.file_size().unwrap_or(0)) - start => {
            Ok(got.pop())
        }
        (true, 0) if start >= end => Ok(Some(bytes::Bytes::new())),
        _ => Ok(None),
    }
}

/// Fills `buf` from `f` at `at` only from memory: false when a read would wait for
/// the disk, the file ended early, or the file system can say neither. A file system
/// that does not take `RWF_NOWAIT` is read as usual only when it lives in memory
/// (tmpfs, ramfs); any other (NFS, FUSE, …) is left to the blocking route.
fn read_nowait(f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        let mut io = [std::io::IoSliceMut::new(&mut buf[got..])];
        match rustix::io::preadv2(
            f,
            &mut io,
            at + got as u64,
            rustix::io::ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::OPNOTSUPP) if in_memory(f) => {
                return f
                    .read_exact_at(&mut buf[got..], at + got as u64)
                    .map(|()| true)
            }
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

/// True for a file on a file system held in memory (tmpfs, ramfs).
fn in_memory(f: &std::fs::File) -> bool {
    const TMPFS: u64 = 0x0102_1994;
    const RAMFS: u64 = 0x8584_58f6;
    rustix::fs::fstatfs(f).is_ok_and(|s| [TMPFS, RAMFS].contains(&(s.f_type as u64)))
}

/// The checked read of [`read_verified_pooled`] with its reads made by `read` (which
/// fills the whole buffer and returns true, or returns false to stop without an
/// error). True when every block asked for was read, checked and emitted, or `emit`
/// stopped it.
fn read_verified_by(
    pool: &std::sync::Arc<BufferPool>,
    file: &std::fs::File,
    info: &ObjectInfo,
    start: u64,
    end: u64,
    mut emit: impl FnMut(bytes::Bytes) -> bool,
    read: impl Fn(&std::fs::File, &mut [u8], u64) -> std::io::Result<bool>,
) -> Result<bool, Error> {
    let Check::Manifest(ck) = &info.check else {
        return Err(Error::Verify(format!(
            "{}: no signed manifest to check a local copy against",
            info.versioned
        )));
    };
    let size = info.map.file_size().unwrap_or(0);
    let end = end.min(size);
    if start >= end {
        return Ok(true);
    }
    let last = info.map.segment_of(end - 1);
    let mut s = info.map.segment_of(start);
    let seg = |s: u64| -> Result<(u64, u64, [u8; 32]), Error> {
        match (info.map.len(s), ck.segment_hash(s)) {
            (Some(l), Some(h)) => Ok((info.map.start(s), l, h)),
            _ => Err(Error::Verify(format!(
                "{}: the manifest gives no hash or length for segment {s}",
                info.versioned
            ))),
        }
    };
    let mut plan = Vec::new();
    while s <= last {
        let (lo, _, _) = seg(s)?;
        plan.clear();
        let mut len = 0u64;
        let mut e = s;
        while e <= last {
            let x = seg(e)?;
            if !plan.is_empty() && len + x.1 > RANGE_BLOCK {
                break;
            }
            len += x.1;
            plan.push(x);
            e += 1;
        }
        let n = len as usize;
        let mut buf = pool.take(n);
        match read(file, &mut buf[..n], lo) {
            Ok(true) => {}
            Ok(false) => {
                pool.give(buf);
                return Ok(false);
            }
            Err(x) => {
                pool.give(buf);
                return Err(Error::Output(format!(
                    "local copy of {}: {x}",
                    info.versioned
                )));
            }
        }
        if let Some(k) = first_bad(&plan, &buf[..n], 0) {
            pool.give(buf);
            return Err(Error::Verify(format!(
                "{}: segment {} of the local copy does not match the signed manifest",
                info.versioned,
                s + k as u64
            )));
        }
        let from = start.saturating_sub(lo) as usize;
        let to = (end - lo).min(len) as usize;
        let b = bytes::Bytes::from_owner(Lent {
            v: buf,
            len: n,
            pool: pool.clone(),
        })
        .slice(from..to);
        if !emit(b) {
            return Ok(true);
        }
        s = e;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Check;
    use crate::SegmentMap;
    use sha2::{Digest, Sha256};
    use std::sync::Arc;

    /// A directory on the disk the crate is built on (`target/`), not a
    /// tempdir that may be tmpfs.
    fn on_disk() -> tempfile::TempDir {
        let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        std::fs::create_dir_all(&d).unwrap();
        tempfile::tempdir_in(d).unwrap()
    }

    /// True when `dir`'s file system is one that takes O_DIRECT reads
    /// (ext4, XFS, btrfs): there, the direct path must be the one taken.
    fn takes_direct_io(dir: &Path) -> bool {
        const EXT4: u64 = 0xEF53;
        const XFS: u64 = 0x5846_5342;
        const BTRFS: u64 = 0x9123_683E;
        let t = rustix::fs::statfs(dir).unwrap().f_type as u64;
        let known = [EXT4, XFS, BTRFS].contains(&t);
        if !known {
            eprintln!(
                "SKIPPED: {} (file system {t:#x}) is not one known to take O_DIRECT",
                dir.display()
            );
        }
        known
    }

    /// An object of `data` in segments of `segment_size`, checked against
    /// a manifest computed from it (every hash in the root).
    fn object(data: &[u8], segment_size: u64) -> ObjectInfo {
        let level0: Vec<u8> = data
            .chunks(segment_size as usize)
            .flat_map(|c| <[u8; 32]>::from(Sha256::digest(c)))
            .collect();
        let count = (level0.len() / 32) as u64;
        let size = data.len() as u64;
        let (upper, root) = granary_manifest::compute(&level0, segment_size, size, None);
        assert!(upper.is_empty(), "the root holds every hash");
        ObjectInfo {
            versioned: granary_packet::Name::from_uri("/t/obj/v=1").unwrap(),
            map: SegmentMap::fixed(segment_size, count, Some(size)).unwrap(),
            check: Check::Manifest(Arc::new(granary_manifest::Checker::new(root))),
            verified_by: "test".into(),
        }
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len as u32).map(|i| (i * 7 + (i >> 13)) as u8).collect()
    }

    #[test]
    fn direct_reads_give_exact_unaligned_ranges_and_refuse_a_short_file() {
        let dir = on_disk();
        if !takes_direct_io(dir.path()) {
            return;
        }
        let p = dir.path().join("f");
        let data = pattern(3 * ALIGN + 123);
        std::fs::write(&p, &data).unwrap();
        let f = direct_view(&std::fs::File::open(&p).unwrap())
            .expect("this file system takes O_DIRECT");
        let mut buf = Vec::new();
        for (start, len) in [(0, 10), (5, ALIGN), (ALIGN - 1, 2), (100, data.len() - 100)] {
            let r = read_direct(&f, &mut buf, start as u64, len).unwrap();
            assert_eq!(&buf[r], &data[start..start + len], "{start}+{len}");
        }
        let e = read_direct(&f, &mut buf, 100, data.len()).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        // What the reads went through: a descriptor switched to O_DIRECT.
        let flags = rustix::fs::fcntl_getfl(&f).unwrap();
        assert!(flags.contains(rustix::fs::OFlags::DIRECT), "{flags:?}");
    }

    /// A source the page-cache probe says is not cached is copied with
    /// direct I/O: every byte is read from the O_DIRECT descriptor, none
    /// buffered, and the copy is exact. (The probe's answer is given here,
    /// not read from the page cache, whose state a busy machine changes.)
    #[test]
    fn an_uncached_source_is_copied_with_direct_io() {
        let dir = on_disk();
        if !takes_direct_io(dir.path()) {
            return;
        }
        let src = dir.path().join("src");
        // Neither a whole number of segments nor of direct-I/O blocks.
        let data = pattern((24 << 20) + 123);
        std::fs::write(&src, &data).unwrap();
        let info = object(&data, 256 << 10);
        let out = dir.path().join("out");
        let from = std::fs::File::open(&src).unwrap();
        let mut probed = None;
        let (r, paths) = copy_read_by(
            from,
            &src,
            &info,
            &Output::File(out.clone()),
            |_| {},
            |_, size| {
                probed = Some(size);
                false
            },
        )
        .unwrap();
        assert_eq!(probed, Some(data.len() as u64), "the probe chose the path");
        assert_eq!(r.size, data.len() as u64);
        assert_eq!(std::fs::read(&out).unwrap(), data);
        // The output, a regular file on the same file system, was written
        // with direct I/O: every byte, the padded tail cut back.
        assert_eq!(r.written_direct, data.len() as u64, "output not direct");
        assert_eq!(std::fs::metadata(&out).unwrap().len(), data.len() as u64);
        assert_eq!(
            paths,
            ReadPaths {
                direct: data.len() as u64,
                buffered: 0
            },
            "direct I/O was not used for every byte"
        );
        // A descriptor passed by the node: its name (the file socket) is no
        // file this process could open, and the copy is still direct.
        let passed = dir.path().join("node.sock.files");
        let out3 = dir.path().join("out3");
        let (_, paths) = copy_read_by(
            std::fs::File::open(&src).unwrap(),
            &passed,
            &info,
            &Output::File(out3.clone()),
            |_| {},
            |_, _| false,
        )
        .unwrap();
        assert_eq!(std::fs::read(&out3).unwrap(), data);
        assert_eq!(
            paths.direct,
            data.len() as u64,
            "a passed descriptor was read through the page cache"
        );
        // The public entry point on the same file: exact whichever path
        // the real probe picks.
        let out2 = dir.path().join("out2");
        copy_verified(&src, &info, &Output::File(out2.clone()), |_| {}).unwrap();
        assert_eq!(std::fs::read(&out2).unwrap(), data);
    }

    /// Direct output gives the exact bytes for any size and any pattern of
    /// writes: the padded last block is cut back, an empty file stays
    /// empty, and every byte is counted as written directly.
    #[test]
    fn direct_output_is_exact_for_any_size() {
        let dir = on_disk();
        if !takes_direct_io(dir.path()) {
            return;
        }
        let stage = DirectOut::STAGE;
        for size in [
            0,
            1,
            ALIGN - 1,
            ALIGN,
            stage,
            stage + 1,
            2 * stage + ALIGN + 7,
        ] {
            let data = pattern(size);
            let p = dir.path().join(format!("out-{size}"));
            let f = std::fs::File::create(&p).unwrap();
            let mut d = DirectOut::new(&f).expect("this file system takes O_DIRECT");
            for piece in data.chunks(6001) {
                d.write(piece).unwrap();
            }
            assert_eq!(d.finish(size as u64).unwrap(), size as u64, "{size}");
            assert_eq!(std::fs::read(&p).unwrap(), data, "{size}");
        }
    }

    /// A source the probe says is in the page cache is read through it
    /// (buffered, the path also taken where O_DIRECT is refused): every
    /// byte buffered, the copy exact, and a bad segment stops the copy with
    /// nothing written.
    #[test]
    fn a_cached_source_is_copied_through_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let data = pattern((3 << 20) + 5);
        std::fs::write(&src, &data).unwrap();
        let info = object(&data, 64 << 10);
        let out = dir.path().join("out");
        let from = std::fs::File::open(&src).unwrap();
        let (_, paths) = copy_read_by(
            from,
            &src,
            &info,
            &Output::File(out.clone()),
            |_| {},
            |_, _| true,
        )
        .unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), data);
        assert_eq!(
            paths,
            ReadPaths {
                direct: 0,
                buffered: data.len() as u64
            },
            "a cached source is read through the cache"
        );

        let mut bad = data.clone();
        bad[(2 << 20) + 1] ^= 1;
        std::fs::write(&src, &bad).unwrap();
        let out = dir.path().join("out2");
        let e = copy_verified(&src, &info, &Output::File(out.clone()), |_| {}).unwrap_err();
        assert!(matches!(e, Error::Verify(_)), "{e}");
        assert!(!out.exists(), "nothing published");
    }

    /// `data` as a file in a temporary directory, opened, with its object (segments of
    /// `seg` bytes) and a buffer pool.
    fn stored(
        data: &[u8],
        seg: u64,
    ) -> (
        ObjectInfo,
        tempfile::TempDir,
        PathBuf,
        std::fs::File,
        Arc<BufferPool>,
    ) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, data).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        (object(data, seg), d, p, f, Arc::new(BufferPool::default()))
    }

    /// The worker's read: the checked bytes of the range, or nothing (not all in
    /// memory, or longer than one block), never a part or an unchecked byte.
    #[test]
    fn cached_reads_give_the_checked_range_or_nothing() {
        let data = pattern(RANGE_BLOCK as usize + 300_000);
        let (info, _d, p, f, pool) = stored(&data, 64 << 10);
        for (a, b) in [
            (0u64, 100_000u64),
            (5, 9000),
            (70_000, 70_001),
            (200_000, 400_000),
        ] {
            match read_verified_cached(&pool, &f, &info, a, b).unwrap() {
                Some(got) => assert_eq!(&got[..], &data[a as usize..b as usize]),
                None => eprintln!("{a}..{b}: not read from memory here"),
            }
        }
        assert_eq!(
            read_verified_cached(&pool, &f, &info, 10, 10).unwrap(),
            Some(bytes::Bytes::new())
        );
        // More than one block: never only its first.
        assert_eq!(
            read_verified_cached(&pool, &f, &info, 0, data.len() as u64).unwrap(),
            None
        );
        // A flipped byte: refused (or not read at all), never handed on.
        let mut bad = data.clone();
        bad[150_000] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        match read_verified_cached(&pool, &f, &info, 100_000, 200_000) {
            Err(e) => assert!(e.to_string().contains("segment 2"), "{e}"),
            Ok(None) => eprintln!("not read from memory here"),
            Ok(Some(_)) => panic!("a corrupted segment was handed on"),
        }
        // A good range beside it still reads.
        if let Some(got) = read_verified_cached(&pool, &f, &info, 0, 100_000).unwrap() {
            assert_eq!(&got[..], &data[..100_000]);
        }
    }

    #[test]
    fn pooled_reads_give_exact_ranges_reuse_buffers_and_stop_at_a_bad_segment() {
        let seg = 256 << 10;
        let data = pattern(2 * (RANGE_BLOCK as usize) + 1000);
        let (info, _d, p, f, pool) = stored(&data, seg);
        for (a, b) in [
            (0u64, data.len() as u64),
            (5, 9000),
            (RANGE_BLOCK - 3, RANGE_BLOCK + 3),
        ] {
            let mut got = Vec::new();
            read_verified_pooled(&pool, &f, &info, a, b, |x| {
                got.extend_from_slice(&x);
                true
            })
            .unwrap();
            assert_eq!(got, &data[a as usize..b as usize]);
        }
        // Every block went back to the pool when its bytes were dropped.
        let kept = pool.0.lock().unwrap().len();
        assert!((1..=POOL_MAX).contains(&kept), "{kept} buffers kept");
        // A flipped byte in the second block: the first block is handed on, the
        // second never is.
        let mut bad = data.clone();
        bad[RANGE_BLOCK as usize + 10] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let mut got = 0usize;
        let e = read_verified_pooled(&pool, &f, &info, 0, data.len() as u64, |x| {
            got += x.len();
            true
        })
        .unwrap_err();
        assert_eq!(
            got, RANGE_BLOCK as usize,
            "only the good block was handed on"
        );
        assert!(
            e.to_string()
                .contains(&format!("segment {}", RANGE_BLOCK / seg)),
            "{e}"
        );
    }
}
