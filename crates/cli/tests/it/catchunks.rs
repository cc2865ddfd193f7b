//! An ndncatchunks-style consumer against a Granary node: what NDN's own
//! tool sees when it fetches a default (FastCDC) object straight from the
//! node's Unix socket.
//!
//! The consumer is written here after ndncatchunks' adaptive pipeline
//! (ndn-tools 24.07, CUBIC, its defaults): RDR version discovery, an initial
//! window of 2, RTO per RFC 6298 (200 ms floor, doubled on a timeout), a
//! window decrease at most once per round trip on a timeout or a congestion
//! mark, Duplicate Nacks ignored, Congestion Nacks taken as timeouts, any
//! other Nack fatal. It counts what the tool prints: congestion marks,
//! timeouts, retransmitted segments. It uses no Granary client code, only
//! the packet codec and the NDNLPv2 decoder (for the CongestionMark field).
//! The node's side is read by management afterwards (faces/list): the
//! fetch passes when the node signalled congestion with marks and dropped
//! nothing, whatever the load made the consumer ask again.

use crate::common;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::*;
use granary_face::{
    framing::next_frame,
    link::{decode_incoming, Reassembler},
    NetPacket,
};
use granary_packet::{types::nack_reason, Component, InterestFields, Name};

/// What the consumer reports.
#[derive(Debug, Default)]
struct Report {
    bytes: Vec<u8>,
    segments: u64,
    marks: u64,
    mark_decreases: u64,
    timeouts: u64,
    retransmissions: u64,
    max_cwnd: f64,
    /// Packets the node's faces dropped from a full send queue, read while
    /// the consumer's face was still open.
    node_drops: u64,
}

const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
const INIT_CWND: f64 = 2.0;
const MIN_RTO: Duration = Duration::from_millis(200);
const MAX_RTO: Duration = Duration::from_secs(60);
const MAX_RETRIES: u32 = 15;
const LIFETIME_MS: u64 = 4000;

/// RFC 6298 retransmission timer, as ndn-cxx's RttEstimator (alpha 1/8,
/// beta 1/4, k 4, initial RTO 1 s).
struct Rto {
    srtt: Option<f64>,
    rttvar: f64,
    rto: Duration,
}

impl Rto {
    fn new() -> Rto {
        Rto {
            srtt: None,
            rttvar: 0.0,
            rto: Duration::from_secs(1),
        }
    }
    fn sample(&mut self, rtt: Duration) {
        let r = rtt.as_secs_f64();
        let (srtt, var) = match self.srtt {
            None => (r, r / 2.0),
            Some(s) => (
                0.875 * s + 0.125 * r,
                0.75 * self.rttvar + 0.25 * (s - r).abs(),
            ),
        };
        self.srtt = Some(srtt);
        self.rttvar = var;
        self.rto = Duration::from_secs_f64(srtt + 4.0 * var).clamp(MIN_RTO, MAX_RTO);
    }
    fn backoff(&mut self) {
        self.rto = (self.rto * 2).min(MAX_RTO);
    }
    fn srtt(&self) -> f64 {
        self.srtt.unwrap_or(1.0).max(1e-6)
    }
}

struct Cubic {
    cwnd: f64,
    ssthresh: f64,
    wmax: f64,
    last_decrease: Instant,
}

impl Cubic {
    fn increase(&mut self, srtt: f64) {
        if self.cwnd < self.ssthresh {
            self.cwnd += 1.0;
            return;
        }
        if self.wmax <= 0.0 {
            self.wmax = self.cwnd;
        }
        let t = self.last_decrease.elapsed().as_secs_f64();
        let k = (self.wmax * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        let w_cubic = CUBIC_C * (t - k).powi(3) + self.wmax;
        let w_est =
            self.wmax * CUBIC_BETA + 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) * (t / srtt);
        let inc = (w_cubic.max(w_est) - self.cwnd).max(0.0);
        self.cwnd += inc / self.cwnd;
    }
    fn decrease(&mut self) {
        self.wmax = self.cwnd;
        self.ssthresh = (self.cwnd * CUBIC_BETA).max(INIT_CWND);
        self.cwnd = self.ssthresh;
        self.last_decrease = Instant::now();
    }
}

#[derive(PartialEq)]
enum State {
    InFlight,
    InRetxQueue,
}

struct Seg {
    sent: Instant,
    retx: u32,
    state: State,
}

struct Conn {
    sock: UnixStream,
    buf: BytesMut,
    reasm: Reassembler,
    /// Interests not written yet: a window's worth goes out in one write,
    /// as ndn-cxx's transport queues them.
    out: Vec<u8>,
}

impl Conn {
    fn send(&mut self, name: &Name, can_be_prefix: bool, must_be_fresh: bool) {
        let mut f = InterestFields::new(name.clone());
        f.can_be_prefix = can_be_prefix;
        f.must_be_fresh = must_be_fresh;
        f.nonce = Some(rand_u32());
        f.lifetime = Some(LIFETIME_MS);
        self.out.extend_from_slice(f.encode().wire());
    }

    fn flush(&mut self) {
        if !self.out.is_empty() {
            self.sock.write_all(&self.out).unwrap();
            self.out.clear();
        }
    }

    /// Packets that arrive within `wait` (with their CongestionMark).
    fn recv(&mut self, wait: Duration) -> Vec<(NetPacket, bool)> {
        self.flush();
        self.sock.set_read_timeout(Some(wait)).unwrap();
        let mut chunk = vec![0u8; 1 << 20];
        let mut out = Vec::new();
        match self.sock.read(&mut chunk) {
            Ok(0) => panic!("the node closed the face"),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("read: {e}"),
        }
        while let Some(frame) = next_frame(&mut self.buf, 1 << 20).unwrap() {
            if let Some((p, link)) =
                decode_incoming(frame, &mut self.reasm, Instant::now()).unwrap()
            {
                out.push((p, link.congestion_mark.unwrap_or(0) > 0));
            }
        }
        out
    }
}

/// The first TLV element of `b` (NDN variable-length type and length).
fn first_tlv(b: &[u8]) -> &[u8] {
    fn var(b: &[u8], at: usize) -> (u64, usize) {
        match b[at] {
            253 => (u64::from(u16::from_be_bytes([b[at + 1], b[at + 2]])), 3),
            254 => (
                u64::from(u32::from_be_bytes(b[at + 1..at + 5].try_into().unwrap())),
                5,
            ),
            x => (u64::from(x), 1),
        }
    }
    let (_, t) = var(b, 0);
    let (len, l) = var(b, t);
    &b[..t + l + len as usize]
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u32
}

/// Fetches `name` (unversioned) as ndncatchunks does; panics on a fatal error
/// or when it does not finish within `deadline`.
fn catchunks(socket: &Path, name: &str, deadline: Duration) -> Report {
    let started = Instant::now();
    let mut c = Conn {
        sock: UnixStream::connect(socket).unwrap(),
        buf: BytesMut::new(),
        reasm: Reassembler::new(16, Duration::from_secs(1), 1 << 20),
        out: Vec::new(),
    };
    // Version discovery (RDR): NAME/32=metadata, CanBePrefix, MustBeFresh.
    let meta = Name::from_uri(name)
        .unwrap()
        .append(&Component::keyword(b"metadata"));
    c.send(&meta, true, true);
    let versioned = loop {
        assert!(started.elapsed() < deadline, "no RDR metadata for {name}");
        let got = c.recv(Duration::from_millis(50));
        if let Some(d) = got.into_iter().find_map(|(p, _)| match p {
            NetPacket::Data(d) => Some(d),
            _ => None,
        }) {
            // The content starts with the versioned Name (other fields may follow).
            break Name::decode(&Bytes::copy_from_slice(first_tlv(d.content()))).unwrap();
        }
    };
    let mut rto = Rto::new();
    let mut cc = Cubic {
        cwnd: INIT_CWND,
        ssthresh: f64::MAX,
        wmax: 0.0,
        last_decrease: Instant::now(),
    };
    let mut r = Report::default();
    let mut segs: HashMap<u64, Seg> = HashMap::new();
    let mut got: BTreeMap<u64, Bytes> = BTreeMap::new();
    let mut retx_queue: VecDeque<u64> = VecDeque::new();
    let mut in_flight: usize = 0;
    let mut next: u64 = 0;
    let mut last: Option<u64> = None;
    let (mut high_interest, mut high_data, mut rec_point) = (0u64, 0u64, 0u64);
    let mut last_rto_check = Instant::now();
    loop {
        if last.is_some_and(|l| got.len() as u64 == l + 1) {
            break;
        }
        assert!(
            started.elapsed() < deadline,
            "not finished after {deadline:?}: {} segments of {last:?} received, {in_flight} in flight, {} to retransmit, {r:?}",
            got.len(),
            retx_queue.len()
        );
        // Send while the window has room: retransmissions first.
        while (in_flight as f64) < cc.cwnd.floor() {
            let (seg, retx) = if let Some(s) = retx_queue.pop_front() {
                if !segs.contains_key(&s) {
                    continue;
                }
                (s, true)
            } else if last.is_none_or(|l| next <= l) {
                next += 1;
                (next - 1, false)
            } else {
                break;
            };
            let e = segs.entry(seg).or_insert(Seg {
                sent: Instant::now(),
                retx: 0,
                state: State::InFlight,
            });
            if retx {
                e.retx += 1;
                assert!(e.retx <= MAX_RETRIES, "segment {seg}: retries exhausted");
                r.retransmissions += 1;
            }
            e.sent = Instant::now();
            e.state = State::InFlight;
            in_flight += 1;
            high_interest = high_interest.max(seg);
            c.send(&versioned.append(&Component::segment(seg)), false, false);
        }
        for (p, marked) in c.recv(Duration::from_millis(5)) {
            match p {
                NetPacket::Data(d) => {
                    let Some(seg) = d.name().last().and_then(|x| x.as_segment()) else {
                        continue;
                    };
                    if let Some(l) = d.final_block_id().and_then(|x| x.as_ref().as_segment()) {
                        last = Some(l);
                    }
                    let Some(s) = segs.remove(&seg) else {
                        continue; // already received
                    };
                    high_data = high_data.max(seg);
                    if s.state == State::InFlight {
                        in_flight -= 1;
                    }
                    if s.retx == 0 {
                        rto.sample(s.sent.elapsed());
                    }
                    got.insert(seg, Bytes::copy_from_slice(d.content()));
                    if marked {
                        r.marks += 1;
                        if high_data > rec_point {
                            rec_point = high_interest;
                            r.mark_decreases += 1;
                            cc.decrease();
                        }
                    } else {
                        cc.increase(rto.srtt());
                    }
                    r.max_cwnd = r.max_cwnd.max(cc.cwnd);
                }
                NetPacket::Nack(i, reason) => {
                    let Some(seg) = i.name.last().and_then(|x| x.as_segment()) else {
                        continue;
                    };
                    match reason {
                        nack_reason::DUPLICATE => {}
                        nack_reason::CONGESTION => {
                            if let Some(s) = segs.get_mut(&seg) {
                                if s.state == State::InFlight {
                                    s.state = State::InRetxQueue;
                                    in_flight -= 1;
                                    retx_queue.push_back(seg);
                                }
                            }
                        }
                        other => panic!("segment {seg}: Nack {other}"),
                    }
                }
                NetPacket::Interest(_) => {}
            }
        }
        // Timeouts, checked every 10 ms as ndncatchunks does.
        if last_rto_check.elapsed() >= Duration::from_millis(10) {
            last_rto_check = Instant::now();
            let now = Instant::now();
            let mut late: Vec<u64> = segs
                .iter()
                .filter(|(_, s)| s.state == State::InFlight && now - s.sent > rto.rto)
                .map(|(k, _)| *k)
                .collect();
            late.sort_unstable();
            for seg in late {
                if let Some(s) = segs.get_mut(&seg) {
                    s.state = State::InRetxQueue;
                }
                in_flight -= 1;
                r.timeouts += 1;
                retx_queue.push_back(seg);
                if seg > rec_point {
                    rec_point = high_interest;
                    cc.decrease();
                    rto.backoff();
                }
            }
        }
    }
    r.segments = got.len() as u64;
    for b in got.into_values() {
        r.bytes.extend_from_slice(&b);
    }
    // The node's own account (faces/list, Granary's NOutQueueDrops), asked on
    // another connection while this consumer's face still exists.
    r.node_drops = node_queue_drops(socket);
    drop(c);
    r
}

/// Packets every face of the node at `socket` dropped from a full send queue.
fn node_queue_drops(socket: &Path) -> u64 {
    use granary_mgmt::{decode_dataset, FaceStatus};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = granary_app::Client::connect(socket).await.unwrap();
        let list = c
            .dataset(&Name::from_uri("/localhost/nfd/faces/list").unwrap())
            .await
            .unwrap();
        decode_dataset::<FaceStatus>(&list)
            .unwrap()
            .iter()
            .map(|f| f.n_out_queue_drops.unwrap_or(0))
            .sum()
    })
}

/// The size: at 32 MiB the whole object could be in flight before
/// any queue had stayed long for NFD's marking interval (100 ms), so the
/// check saw neither marks nor losses.
const OBJECT_MIB: usize = 512;

/// One fetch at a time: two nodes and two consumers on a 2-core machine
/// would measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fetch_default_object(mib: usize, chunking: Option<&str>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The node at speed: a debug build serves several times slower than
    // what users run, and the consumer would measure that.
    let d = Daemon::start_release(&[]);
    let f = d.dir.path().join("obj");
    let data: Vec<u8> = (0..mib << 20)
        .map(|i: usize| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&f, &data).unwrap();
    let mut put = vec!["put", f.to_str().unwrap(), "/catchunks/obj"];
    if let Some(c) = chunking {
        put.extend(["--chunking", c]);
    }
    d.ok(&put);
    let r = catchunks(&d.socket, "/catchunks/obj", Duration::from_secs(120));
    let what = chunking.unwrap_or("default (FastCDC)");
    eprintln!(
        "{what}: {} segments, {} marks ({} window decreases), {} timeouts, {} retransmitted, largest window {:.0}, {} dropped by the node",
        r.segments, r.marks, r.mark_decreases, r.timeouts, r.retransmissions, r.max_cwnd, r.node_drops
    );
    assert!(r.bytes == data, "{what}: the fetched bytes differ");
    // The window grows until the node's send queue passes NFD's threshold:
    // the node must say so with marks, not with losses.
    assert!(
        r.marks > 0,
        "{what}: no congestion mark reached the consumer"
    );
    // And no packet was lost at the node: what the consumer asked again it
    // asked because its own timer fired (a starved consumer on a loaded
    // machine), never because the node's queue overflowed. (How many it
    // asked again depends on the machine's load; the count is printed above.)
    assert_eq!(
        r.node_drops, 0,
        "{what}: the node dropped {} packets from a full send queue instead of marking",
        r.node_drops
    );
}

#[test]
fn catchunks_style_cubic_consumer_fastcdc_object() {
    fetch_default_object(OBJECT_MIB, None);
}

#[test]
fn catchunks_style_cubic_consumer_fixed_object() {
    fetch_default_object(OBJECT_MIB, Some("fixed"));
}
