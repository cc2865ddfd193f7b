//! Where verified bytes go: a file (positioned writes, resume marks), memory, a stream.

use super::*;

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
