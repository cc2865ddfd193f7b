//! Push-style ingest: [`pipe`] gives a [`PipeWriter`] that the caller
//! feeds as bytes arrive (a FUSE `write`, a network insert) and a
//! [`PipeReader`] that [`Store::put_piped`] ingests on a thread of the
//! caller's choosing — the same one-pass pipeline as [`Store::put`]
//! (segments cut and hashed while the bytes arrive, the temp data file
//! becoming the stored file, no second pass).
//!
//! Endings, decided by the writer:
//! - [`PipeWriter::finish`]: end of input; the version is published.
//! - dropping the writer (or [`PipeWriter::abort`]): the ingest fails and
//!   removes its temp files; nothing is published. A crash of the process
//!   leaves temp files named after its pid, removed by the next
//!   [`Store::open`]: nothing is published either.
//! - [`PipeWriter::keep`]: nothing is published, and the bytes received so
//!   far are moved to a file of the caller's (for a writer that turned out
//!   not to write in order and must continue in a file of its own).
//!
//! Memory is constant: at most [`PIPE_DEPTH`] messages wait in the pipe,
//! and the ingest's own buffers are those of `put`.

use std::io::Read;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use granary_packet::Name;

use crate::{Entry, Error, PutOptions, Result, Store};

/// Messages that may wait in a pipe (each one `write` of the caller's).
pub const PIPE_DEPTH: usize = 16;

enum Msg {
    Data(Vec<u8>),
    End,
    Keep(PathBuf),
}

/// Where a [`PipeWriter::keep`] wants the bytes.
type KeepSlot = Arc<Mutex<Option<PathBuf>>>;

/// A bounded pipe from a caller that pushes bytes to an ingest that reads
/// them ([`Store::put_piped`]).
pub fn pipe() -> (PipeWriter, PipeReader) {
    let (tx, rx) = std::sync::mpsc::sync_channel(PIPE_DEPTH);
    // Buffers go back to the writer once read: no allocation per write.
    let (back_tx, back_rx) = std::sync::mpsc::sync_channel(PIPE_DEPTH + 2);
    let keep: KeepSlot = Default::default();
    (
        PipeWriter {
            tx,
            back: back_rx,
            written: 0,
        },
        PipeReader {
            rx,
            back: back_tx,
            cur: Vec::new(),
            pos: 0,
            done: false,
            keep,
        },
    )
}

/// The pushing end. Dropping it without [`finish`](PipeWriter::finish)
/// aborts the ingest.
pub struct PipeWriter {
    tx: SyncSender<Msg>,
    back: Receiver<Vec<u8>>,
    written: u64,
}

impl PipeWriter {
    /// Appends `buf` (copied; waits while the pipe is full). Fails when the
    /// ingest has stopped (its error is what [`Store::put_piped`] returns).
    pub fn write(&mut self, buf: &[u8]) -> std::result::Result<(), Stopped> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut v = self.back.try_recv().unwrap_or_default();
        v.clear();
        v.extend_from_slice(buf);
        self.tx.send(Msg::Data(v)).map_err(|_| Stopped)?;
        self.written += buf.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// End of input: the ingest completes and publishes.
    pub fn finish(self) {
        let _ = self.tx.send(Msg::End);
    }

    /// Publishes nothing; the ingest removes its temp files.
    pub fn abort(self) {}

    /// Publishes nothing; the bytes written so far end up in the file
    /// `to` (replaced if it exists; on the store's file system it is a
    /// rename, elsewhere a copy), once the ingest returns.
    pub fn keep(self, to: PathBuf) {
        let _ = self.tx.send(Msg::Keep(to));
    }
}

/// The ingest stopped before the input ended.
#[derive(Debug, Clone, Copy)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the ingest stopped")
    }
}

impl std::error::Error for Stopped {}

/// The reading end, for [`Store::put_piped`].
pub struct PipeReader {
    rx: Receiver<Msg>,
    back: SyncSender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    done: bool,
    keep: KeepSlot,
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.pos < self.cur.len() {
                let n = buf.len().min(self.cur.len() - self.pos);
                buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Msg::Data(v)) => {
                    let used = std::mem::replace(&mut self.cur, v);
                    if used.capacity() > 0 {
                        let _ = self.back.try_send(used);
                    }
                    self.pos = 0;
                }
                Ok(Msg::End) => self.done = true,
                Ok(Msg::Keep(to)) => {
                    *self.keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(to);
                    self.done = true;
                }
                Err(_) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the writer stopped before the end: nothing published",
                    ))
                }
            }
        }
    }
}

impl Store {
    /// Ingests what is pushed into `reader`'s [`PipeWriter`], as
    /// [`Store::put`] does (one pass, constant memory, atomic and durable
    /// publication). Returns the new version's entry when the writer
    /// finished, `None` when it asked to [`keep`](PipeWriter::keep) the
    /// bytes instead (they are then in its file, and nothing is
    /// published), and an error when it was dropped or the ingest failed
    /// (nothing is published, no temp file is left). Blocks until the
    /// writer ends: run it on a thread of its own.
    pub fn put_piped(
        &self,
        name: &Name,
        reader: PipeReader,
        opts: &PutOptions,
        progress: impl FnMut(u64),
    ) -> Result<Option<Entry>> {
        let keep = reader.keep.clone();
        let id = format!("{}-{}", std::process::id(), crate::unique());
        let taken = || keep.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.ingest(name, reader, None, &id, opts, progress, &taken, None)
    }
}

/// Moves the finished temp data file to `to`: a rename, or a copy when
/// `to` is on another file system.
pub(crate) fn move_file(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            std::fs::copy(from, to).map_err(Error::io(to))?;
            let _ = std::fs::remove_file(from);
            Ok(())
        }
        Err(e) => Err(Error::io(to)(e)),
    }
}
