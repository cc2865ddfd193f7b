//! Direct writes: the forwarding task writes a stream face's packets to its
//! socket itself while nothing of that face is queued, and the face's writer
//! task takes over only when the socket is full.
//!
//! Each stream face on a Unix or TCP socket has an [`Outlet`] beside its
//! bounded send queue. [`crate::FaceHandle::send_batched`] *stages* a packet
//! (its frames, no copy) when the face has nothing queued or being written
//! (`behind == 0`), else queues it as before; [`Flush::run`], called by the
//! forwarder once per batch of received packets, writes each outlet's staged
//! frames with one non-blocking `writev`. What the socket does not take is
//! handed to the writer task (`spill`, counted in `behind`), and until the
//! writer task has written it and everything queued behind it, new packets
//! queue: the byte stream keeps the forwarder's order, and forwarding never
//! waits for a slow socket (the queue stays the back-pressure boundary and
//! where CoDel marks).
//!
//! The common case, a consumer that keeps up, thus costs no queue, no
//! cross-thread wake-up and no task switch per batch: the packets leave on
//! the thread that forwarded them.

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Buf, Bytes};
use tokio::sync::Notify;

use crate::Counters;

/// A socket the forwarding task can write to without waiting.
pub trait TryWriteVectored: Send + Sync {
    /// Non-blocking `writev`: the bytes written, or `WouldBlock`.
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize>;
}

/// [`TryWriteVectored`] plus a way for the writer task to wait for room.
pub trait DirectWrite: TryWriteVectored + 'static {
    /// Waits until the socket may accept more bytes.
    fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
}

macro_rules! direct_write {
    ($t:ty) => {
        impl TryWriteVectored for $t {
            fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
                <$t>::try_write_vectored(self, bufs)
            }
        }
        impl DirectWrite for $t {
            fn writable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
                <$t>::writable(self)
            }
        }
    };
}
direct_write!(tokio::net::unix::OwnedWriteHalf);
direct_write!(tokio::net::tcp::OwnedWriteHalf);

/// What an outlet's lock protects.
#[derive(Debug, Default)]
pub(crate) struct OutletState {
    /// Frames staged by forwarding, written at the next [`Flush::run`].
    pub(crate) staged: Vec<Bytes>,
    /// Frames a direct write left unwritten, for the writer task (first).
    pub(crate) spill: Vec<Bytes>,
    /// Packets queued for or being written by the writer task, plus one
    /// for a non-empty `spill`. While non-zero, packets queue behind them.
    pub(crate) behind: usize,
    /// Packets were written directly since the writer task last looked:
    /// the queue was empty, so CoDel's state starts over.
    pub(crate) drained: bool,
    /// LpPacket sequence for fragmentation (stream faces do not fragment;
    /// kept for `encode_outgoing`).
    pub(crate) seq: u64,
    /// The face is closed: nothing more is written.
    pub(crate) closed: bool,
}

/// A stream face's direct path to its socket (see the module docs).
pub struct Outlet {
    sock: Arc<dyn TryWriteVectored>,
    state: Mutex<OutletState>,
    /// Tells the writer task that `spill` holds frames.
    pub(crate) spilled: Notify,
    closer: Arc<Notify>,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Outlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outlet")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Outlet {
    pub(crate) fn new(
        sock: Arc<dyn TryWriteVectored>,
        closer: Arc<Notify>,
        counters: Arc<Counters>,
    ) -> Self {
        Outlet {
            sock,
            state: Mutex::new(OutletState::default()),
            spilled: Notify::new(),
            closer,
            counters,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, OutletState> {
        // The state stays consistent between statements; a panic elsewhere
        // does not make it unusable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the staged frames now; what the socket does not take goes to
    /// the writer task.
    fn flush(&self) {
        let mut st = self.lock();
        if st.staged.is_empty() || st.closed {
            st.staged.clear();
            return;
        }
        let mut frames = std::mem::take(&mut st.staged);
        match try_write_frames(&*self.sock, &mut frames) {
            Ok(()) if frames.is_empty() => st.staged = frames,
            Ok(()) => {
                st.spill = frames;
                st.behind += 1;
                self.spilled.notify_one();
            }
            Err(e) => {
                tracing::debug!("direct write failed: {e}");
                st.closed = true;
                Counters::inc(&self.counters.out_dropped);
                self.closer.notify_waiters();
                self.closer.notify_one();
            }
        }
    }
}

/// Outlets with staged frames, written by [`Flush::run`]. The forwarder
/// keeps one and runs it once per batch of received packets (and after any
/// other work that may have sent).
#[derive(Debug, Default)]
pub struct Flush(Vec<Arc<Outlet>>);

impl Flush {
    pub(crate) fn push(&mut self, o: &Arc<Outlet>) {
        self.0.push(o.clone());
    }

    /// Writes every staged frame (one `writev` per outlet).
    pub fn run(&mut self) {
        for o in self.0.drain(..) {
            o.flush();
        }
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        self.run();
    }
}

/// Writes `frames` with non-blocking `writev`s until done or the socket is
/// full, removing what was written (a frame written in part is advanced).
pub(crate) fn try_write_frames(
    sock: &dyn TryWriteVectored,
    frames: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    // At most this many buffers per call (IOV_MAX is 1024 on Linux).
    const MAX_IOV: usize = 512;
    let mut start = 0;
    let result = loop {
        if start >= frames.len() {
            break Ok(());
        }
        let end = frames.len().min(start + MAX_IOV);
        let r = {
            let slices: smallvec::SmallVec<[IoSlice<'_>; 64]> =
                frames[start..end].iter().map(|f| IoSlice::new(f)).collect();
            sock.try_write_vectored(&slices)
        };
        let n = match r {
            Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(e),
        };
        let mut left = n;
        while left > 0 && start < frames.len() {
            let len = frames[start].len();
            if left >= len {
                left -= len;
                start += 1;
            } else {
                frames[start].advance(left);
                left = 0;
            }
        }
    };
    frames.drain(..start);
    result
}

/// Counts `n` bytes sent.
pub(crate) fn count_bytes(counters: &Counters, frames: &[Bytes]) {
    let total: usize = frames.iter().map(|f| f.len()).sum();
    counters
        .out_bytes
        .fetch_add(total as u64, Ordering::Relaxed);
}
