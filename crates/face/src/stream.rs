//! Stream faces (Unix stream sockets, TCP): TLV framing, many packets per
//! read and per write, NFD's congestion marking on the send queue.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Notify};

use crate::framing::next_frame;
use crate::link::{decode_incoming, encode_outgoing, Reassembler};
use crate::{
    new_handle, Counters, EventSender, FaceEvent, FaceHandle, FaceInfo, FaceLimits, NetPacket,
    OutKind, OutPacket,
};

/// NFD's congestion marking on a send queue (GenericLinkService,
/// `checkCongestionLevel`, NFD 24.07): when the queue first exceeds the
/// threshold an incident starts and nothing is marked; a packet is marked
/// only once the queue has stayed above the threshold for one base interval,
/// and after the n-th mark of the incident the next is due
/// `interval / sqrt(n + 1)` later; the incident ends when the queue is back
/// at or under the threshold. A queue that passes the threshold for less
/// than an interval (a reader descheduled for a moment) is never marked.
#[derive(Debug, Default)]
pub struct NfdMarker {
    /// When the next mark is due; `None` outside an incident.
    next_mark: Option<Instant>,
    /// Marks in this incident.
    marked: u32,
    /// The first mark of an incident is due at once (no more often than
    /// once per interval), not after one interval above the threshold.
    eager: bool,
    /// The last mark (eager markers only).
    last_mark: Option<Instant>,
}

impl NfdMarker {
    /// A marker whose first mark of an incident is due at once, at most one
    /// first mark per base interval; then as NFD's. For a queue in front of
    /// a producer that serves at its CPU's pace (the node's in-process
    /// applications): a backlog there is not a burst that drains by itself,
    /// and a consumer in slow start doubles it every round trip, so waiting
    /// an interval lets it grow past what the consumer's RTO allows
    /// (measured: thousands of spurious timeouts in one 128 MiB fetch).
    pub fn eager() -> NfdMarker {
        NfdMarker {
            eager: true,
            ..NfdMarker::default()
        }
    }

    /// Decides whether the packet sent `now` with `queued` bytes in the send
    /// queue (the face's own plus the kernel's) is marked.
    pub fn should_mark(
        &mut self,
        now: Instant,
        queued: u64,
        threshold: u64,
        interval: Duration,
    ) -> bool {
        if queued <= threshold {
            self.next_mark = None;
            self.marked = 0;
            return false;
        }
        let due = match self.next_mark {
            Some(due) => due,
            None if self.eager => {
                let due = self.last_mark.map_or(now, |t| (t + interval).max(now));
                self.next_mark = Some(due);
                due
            }
            None => {
                self.next_mark = Some(now + interval);
                return false;
            }
        };
        if now < due {
            return false;
        }
        self.marked += 1;
        let step = interval.as_secs_f64() / f64::from(self.marked + 1).sqrt();
        self.next_mark = Some(due + Duration::from_secs_f64(step));
        if self.eager {
            self.last_mark = Some(now);
        }
        true
    }
}

/// A stream socket's write half that can say how many bytes its kernel send
/// queue holds (SIOCOUTQ: written, not yet read by the peer on a Unix
/// socket; not yet acknowledged on TCP). NFD counts them in a stream face's
/// send queue, so a consumer slower than the node sees marks although the
/// face's own queue is empty.
pub trait KernelQueue {
    /// Bytes in the kernel's send queue (`None`: cannot tell).
    fn kernel_queued(&self) -> Option<u64>;
}

impl KernelQueue for tokio::net::unix::OwnedWriteHalf {
    fn kernel_queued(&self) -> Option<u64> {
        use std::os::fd::AsFd;
        crate::sys::outq(self.as_ref().as_fd())
    }
}

/// On TCP the unsent bytes only (SIOCOUTQNSD), as NFD 24.07's TcpTransport
/// on Linux: SIOCOUTQ would also count the bytes in flight, so a long fat
/// link (100 Mbit/s × 20 ms is 250 KB in flight) would read as congestion
/// and be marked without pause.
impl KernelQueue for tokio::net::tcp::OwnedWriteHalf {
    fn kernel_queued(&self) -> Option<u64> {
        use std::os::fd::AsFd;
        crate::sys::outq_unsent(self.as_ref().as_fd())
    }
}

struct Shared {
    closed: AtomicBool,
    events: EventSender,
    id: u64,
}

impl Shared {
    async fn close(&self, reason: String, closer: &Notify) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            if reason.starts_with("protocol") {
                tracing::warn!(face = self.id, "closing face: {reason}");
            } else {
                tracing::debug!(face = self.id, "face closed: {reason}");
            }
            let _ = self
                .events
                .send(FaceEvent::Closed {
                    face: self.id,
                    reason,
                })
                .await;
        }
        closer.notify_waiters();
        closer.notify_one();
    }
}

/// Starts a stream face on a connected socket's halves. The face is
/// announced to the forwarder ([`FaceEvent::Created`]) before its first
/// packet can be, so no packet arrives from an unknown face.
pub async fn spawn<R, W>(
    info: FaceInfo,
    reader: R,
    writer: W,
    limits: FaceLimits,
    events: EventSender,
) -> FaceHandle
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + KernelQueue + Unpin + Send + 'static,
{
    let (handle, rx, closer) = new_handle(info, &limits);
    handle.counters.marking.store(true, Ordering::Relaxed);
    let _ = events.send(FaceEvent::Created(handle.clone())).await;
    let shared = Arc::new(Shared {
        closed: AtomicBool::new(false),
        events,
        id: handle.info.id,
    });
    tokio::spawn(rx_loop(
        reader,
        handle.sink.clone(),
        handle.counters.clone(),
        limits.clone(),
        shared.clone(),
        closer.clone(),
    ));
    tokio::spawn(tx_loop(
        writer,
        rx,
        handle.counters.clone(),
        limits,
        shared,
        closer,
        None,
    ));
    handle
}

async fn rx_loop<R: AsyncRead + Unpin>(
    mut reader: R,
    sink: Arc<crate::SinkSlot>,
    counters: Arc<Counters>,
    limits: FaceLimits,
    shared: Arc<Shared>,
    closer: Arc<Notify>,
) {
    let mut buf = BytesMut::with_capacity(128 * 1024);
    let mut batch = Vec::with_capacity(64);
    let mut reasm = Reassembler::new(
        limits.reassembly_slots,
        Duration::from_millis(limits.reassembly_timeout_ms),
        limits.max_packet,
    );
    let reason = loop {
        if buf.capacity() - buf.len() < 16 * 1024 {
            buf.reserve(128 * 1024);
        }
        let n = tokio::select! {
            r = reader.read_buf(&mut buf) => match r {
                Ok(0) => break "peer closed".to_string(),
                Ok(n) => n,
                Err(e) => break format!("read error: {e}"),
            },
            _ = closer.notified() => break "closed".to_string(),
        };
        Counters::add(&counters.in_bytes, n as u64);
        // Decode everything this read brought, then hand it over at once.
        // The frames of one read arrived together: one clock read for all
        // (it was 2% of the forwarder's CPU when read per frame).
        let now = Instant::now();
        let mut failed = None;
        loop {
            match next_frame(&mut buf, limits.max_packet) {
                Ok(Some(frame)) => match decode_incoming(frame, &mut reasm, now) {
                    Ok(Some((packet, link))) => {
                        count_in(&counters, &packet);
                        batch.push((packet, link));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        failed = Some(format!("protocol error: {e}"));
                        break;
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    failed = Some(format!("protocol error: {e}"));
                    break;
                }
            }
        }
        if !batch.is_empty()
            && sink
                .deliver(&shared.events, shared.id, &mut batch)
                .await
                .is_err()
        {
            break "forwarder gone".to_string();
        }
        if let Some(e) = failed {
            Counters::inc(&counters.in_errors);
            break e;
        }
    };
    shared.close(reason, &closer).await;
}

pub(crate) fn count_in(counters: &Counters, p: &NetPacket) {
    match p {
        NetPacket::Interest(_) => Counters::inc(&counters.in_interests),
        NetPacket::Data(_) => Counters::inc(&counters.in_data),
        NetPacket::Nack(..) => Counters::inc(&counters.in_nacks),
    }
}

pub(crate) fn count_out(counters: &Counters, p: &OutPacket) {
    match p.kind {
        OutKind::Interest => Counters::inc(&counters.out_interests),
        OutKind::Data => Counters::inc(&counters.out_data),
        OutKind::Nack(_) => Counters::inc(&counters.out_nacks),
    }
}

async fn tx_loop<W: AsyncWrite + KernelQueue + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<crate::Queued>,
    counters: Arc<Counters>,
    limits: FaceLimits,
    shared: Arc<Shared>,
    closer: Arc<Notify>,
    mtu: Option<usize>,
) {
    let mut marker = NfdMarker::default();
    let interval = Duration::from_millis(limits.codel_interval_ms);
    let mut seq: u64 = 0;
    let mut frames: Vec<Bytes> = Vec::with_capacity(64);
    let mut batch: Vec<crate::Queued> = Vec::with_capacity(64);
    let reason = loop {
        let first = tokio::select! {
            p = rx.recv() => match p { Some(p) => p, None => break "forwarder gone".to_string() },
            _ = closer.notified() => break "closed".to_string(),
        };
        batch.clear();
        batch.push(first);
        while batch.len() < 64 {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        frames.clear();
        // The face's queue count (kept for `face show` and the marking) loses
        // this batch.
        let batch_bytes: u64 = batch.iter().map(|(p, _, _)| p.wire.len() as u64).sum();
        counters.queued_bytes.fetch_sub(
            batch_bytes.min(counters.queued_bytes.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        let marking = counters.marking.load(Ordering::Relaxed);
        let (interval, threshold) = counters.marking_settings(interval);
        if marking {
            // What the kernel holds, not yet read by the peer: the next
            // packets to enter the queue count it (see `FaceHandle::send_at`).
            let kernel = writer.kernel_queued().unwrap_or(0);
            counters.kernel_queued.store(kernel, Ordering::Relaxed);
        }
        for (mut p, enq, ahead) in batch.drain(..) {
            // Decided as NFD decides when the packet enters its send queue:
            // at its enqueue time, on the bytes ahead of it then.
            if marking
                && p.congestion_mark.is_none()
                && marker.should_mark(enq.into_std(), ahead, threshold, interval)
            {
                p.congestion_mark = Some(1);
                Counters::inc(&counters.out_marked);
            }
            count_out(&counters, &p);
            // Bare packets go out as the buffer they arrived in (no copy).
            encode_outgoing(&p, mtu, &mut seq, &mut frames);
        }
        let total: usize = frames.iter().map(|f| f.len()).sum();
        Counters::add(&counters.out_bytes, total as u64);
        if let Err(e) = write_all_vectored(&mut writer, &mut frames).await {
            break format!("write error: {e}");
        }
    };
    let _ = writer.shutdown().await;
    shared.close(reason, &closer).await;
}

/// Writes every buffer of `frames` in as few `writev` calls as the socket
/// allows (one when the send buffer has room), then leaves `frames` empty.
/// The packets' own buffers are handed to the kernel: nothing is copied in
/// user space.
pub(crate) async fn write_all_vectored<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frames: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    use bytes::Buf;
    // At most this many buffers per call (IOV_MAX is 1024 on Linux).
    const MAX_IOV: usize = 512;
    let mut start = 0;
    while start < frames.len() {
        let end = frames.len().min(start + MAX_IOV);
        let n = {
            let slices: smallvec::SmallVec<[std::io::IoSlice<'_>; 64]> = frames[start..end]
                .iter()
                .map(|f| std::io::IoSlice::new(f))
                .collect();
            writer.write_vectored(&slices).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Skip what was written: whole frames, then part of the next one.
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
        while start < frames.len() && frames[start].is_empty() {
            start += 1;
        }
    }
    frames.clear();
    Ok(())
}

/// Send buffer asked for on accepted Unix stream faces.
pub const UNIX_SEND_BUFFER: usize = 4 << 20;

/// Listens on a Unix stream socket (removing a stale socket file first) and
/// announces every accepted connection as a local, on-demand face.
pub async fn listen_unix(
    path: &std::path::Path,
    limits: FaceLimits,
    events: EventSender,
    ids: Arc<crate::FaceIds>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    if path.exists() {
        // Refuse to steal a socket another live daemon is serving.
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use by another process", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    // Any local user may connect, as to NFD's socket (connecting needs
    // write permission on the socket file); what acts with the node's own
    // rights is kept to its user by the peer's credentials (`peer_uid`).
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    }
    let local = format!("unix://{}", path.display());
    Ok(tokio::spawn(crate::accept::accept_loop(
        listener,
        "unix listener",
        move |sock, _| {
            // A send buffer as deep as the window of a fast local consumer
            // (the default, ~200 KiB, is 25 packets of 8 KiB): the node
            // keeps writing while the application is busy with what it
            // read. Best effort: the kernel caps it at net.core.wmem_max.
            let _ = socket2::SockRef::from(&sock).set_send_buffer_size(UNIX_SEND_BUFFER);
            let info = FaceInfo {
                id: ids.next(),
                remote_uri: "fd://".to_string() + &ids_hint(&sock),
                local_uri: local.clone(),
                scope: crate::Scope::Local,
                persistency: crate::Persistency::OnDemand,
                mtu: None,
                peer_uid: sock.peer_cred().ok().map(|c| c.uid()),
            };
            let (r, w) = sock.into_split();
            let (limits, events) = (limits.clone(), events.clone());
            async move {
                spawn(info, r, w, limits, events).await;
            }
        },
    )))
}

fn ids_hint(sock: &tokio::net::UnixStream) -> String {
    use std::os::fd::AsRawFd;
    sock.as_raw_fd().to_string()
}

fn tcp_uri(a: &std::net::SocketAddr) -> String {
    match a {
        std::net::SocketAddr::V4(_) => format!("tcp4://{a}"),
        std::net::SocketAddr::V6(_) => format!("tcp6://{a}"),
    }
}

async fn tcp_face(
    sock: tokio::net::TcpStream,
    id: u64,
    persistency: crate::Persistency,
    limits: FaceLimits,
    events: EventSender,
) -> std::io::Result<FaceHandle> {
    let _ = sock.set_nodelay(true);
    let info = FaceInfo {
        id,
        remote_uri: tcp_uri(&sock.peer_addr()?),
        local_uri: tcp_uri(&sock.local_addr()?),
        scope: crate::Scope::NonLocal,
        persistency,
        mtu: None,
        peer_uid: None,
    };
    let (r, w) = sock.into_split();
    Ok(spawn(info, r, w, limits, events).await)
}

/// Listens on TCP and announces every accepted connection as a non-local,
/// on-demand face. Returns the bound address.
pub async fn listen_tcp(
    addr: std::net::SocketAddr,
    limits: FaceLimits,
    events: EventSender,
    ids: Arc<crate::FaceIds>,
) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(crate::accept::accept_loop(
        listener,
        "tcp listener",
        move |sock, _| {
            let (id, limits, events) = (ids.next(), limits.clone(), events.clone());
            async move {
                let _ = tcp_face(sock, id, crate::Persistency::OnDemand, limits, events).await;
            }
        },
    ));
    Ok(bound)
}

/// Connects to a TCP peer (the face is announced to the forwarder).
pub async fn connect_tcp(
    remote: std::net::SocketAddr,
    id: u64,
    limits: FaceLimits,
    events: EventSender,
) -> std::io::Result<FaceHandle> {
    connect_tcp_as(remote, id, crate::Persistency::Persistent, limits, events).await
}

/// [`connect_tcp`] with the face's persistency given (a permanent face is
/// re-dialled by the forwarder with the same id when it closes).
pub async fn connect_tcp_as(
    remote: std::net::SocketAddr,
    id: u64,
    persistency: crate::Persistency,
    limits: FaceLimits,
    events: EventSender,
) -> std::io::Result<FaceHandle> {
    let sock = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect(remote),
    )
    .await
    .map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("connecting to {remote} timed out"),
        )
    })??;
    tcp_face(sock, id, persistency, limits, events).await
}

/// Connects to a Unix socket (another forwarder's) and announces the face,
/// non-local (the peer is a forwarder, not an application of this node).
pub async fn connect_unix_as(
    path: &std::path::Path,
    id: u64,
    persistency: crate::Persistency,
    limits: FaceLimits,
    events: EventSender,
) -> std::io::Result<FaceHandle> {
    let sock = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::UnixStream::connect(path),
    )
    .await
    .map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("connecting to {} timed out", path.display()),
        )
    })??;
    let info = FaceInfo {
        id,
        remote_uri: format!("unix://{}", path.display()),
        local_uri: "unix://".into(),
        scope: crate::Scope::NonLocal,
        persistency,
        mtu: None,
        peer_uid: None,
    };
    let (r, w) = sock.into_split();
    Ok(spawn(info, r, w, limits, events).await)
}

#[cfg(test)]
mod marker_tests {
    use super::NfdMarker;
    use std::time::{Duration, Instant};

    const T: u64 = 65_536;
    const I: Duration = Duration::from_millis(100);

    #[test]
    fn marks_as_nfd_24_07_after_one_interval_above_then_every_interval_over_root_n_plus_1() {
        let mut m = NfdMarker::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // At or under the threshold: never.
        assert!(!m.should_mark(at(0), T, T, I));
        // Above: the incident starts at 1 ms and nothing is marked until
        // the queue has stayed above for one interval (101 ms); then the
        // next marks are due interval/√2 ≈ 70.7 ms and interval/√3 ≈
        // 57.7 ms after the one before.
        assert!(!m.should_mark(at(1), T + 1, T, I));
        assert!(!m.should_mark(at(100), T + 1, T, I));
        assert!(m.should_mark(at(101), T + 1, T, I));
        assert!(!m.should_mark(at(102), T + 1, T, I));
        assert!(!m.should_mark(at(171), T + 1, T, I));
        assert!(m.should_mark(at(172), T + 1, T, I));
        assert!(!m.should_mark(at(229), T + 1, T, I));
        assert!(m.should_mark(at(230), T + 1, T, I));
        // The incident ends at or under the threshold; a new one waits a
        // whole interval again.
        assert!(!m.should_mark(at(240), T, T, I));
        assert!(!m.should_mark(at(250), T + 1, T, I));
        assert!(!m.should_mark(at(349), T + 1, T, I));
        assert!(m.should_mark(at(350), T + 1, T, I));
        // A queue that crosses the threshold again and again for less than
        // an interval (a reader descheduled for a moment) is never marked.
        let mut m = NfdMarker::default();
        for ms in 0..2000 {
            let q = if ms % 50 < 40 { T * 4 } else { 0 };
            assert!(!m.should_mark(at(ms), q, T, I), "marked at {ms} ms");
        }
        // Marks per second in a long incident grow as √n, not without bound.
        let mut m = NfdMarker::default();
        let mut n = 0;
        for ms in 0..1100 {
            n += u32::from(m.should_mark(at(ms), T * 4, T, I));
        }
        assert!((10..40).contains(&n), "{n} marks in a second");
    }
}
