//! The forwarding pipelines. Every table sits behind one lock per shard:
//! faces forward what they read on their own tasks, a batch per read and one
//! lock per batch ([`PacketSink`]); the forwarder's own task keeps the event
//! channel, the timers and management. With `shards > 1` the PIT and CS are
//! split by name hash over that many shards plus a control shard (see
//! [`Forwarder::run`] and docs/architecture.md, "Forwarder decisions").

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use granary_face::udp::UdpChannel;
use granary_face::{
    Counters, EventSender, FaceEvent, FaceHandle, FaceId, FaceIds, FaceLimits, LinkFields,
    NetPacket, OutKind, OutPacket, PacketSink, Scope,
};
use granary_packet::types::nack_reason;
use granary_packet::{Data, Interest, Name};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::cs::{ContentStore, CsConfig};
use crate::fib::Tables;
use crate::namehash::{hash_name, NameHashes};
use crate::pit::{DeadNonceList, EntryId, InRecord, OutRecord, Pit, PitKey};
use crate::strategy::{Strategy, StrategyChoice, SUPPRESS_INITIAL, SUPPRESS_MAX};
use smallvec::SmallVec;

/// Forwarder limits and defaults.
#[derive(Debug, Clone)]
pub struct ForwarderConfig {
    /// Content Store configuration.
    pub cs: CsConfig,
    /// PIT capacity (entries).
    pub pit_max: usize,
    /// Dead-nonce list lifetime.
    pub dead_nonce_lifetime: Duration,
    /// Dead-nonce list capacity.
    pub dead_nonce_max: usize,
    /// Certificates whose keys may sign management commands arriving on
    /// non-local faces (`/localhop/nfd`).
    pub trust_anchors: Vec<granary_security::Certificate>,
    /// Local URIs of the listeners (the faces/channels dataset).
    pub channels: Vec<String>,
    /// Forwarding shards: 1 (the default) keeps every table behind one
    /// lock; N > 1 splits the PIT, CS and dead-nonce list over N shards by a
    /// hash of the name, so N cores forward at once (see [`Forwarder::run`]).
    pub shards: usize,
}

/// The most shards a forwarder takes (a shard is a PIT, a CS and a lock).
pub const MAX_SHARDS: usize = 64;

impl Default for ForwarderConfig {
    fn default() -> Self {
        ForwarderConfig {
            cs: CsConfig::default(),
            pit_max: 1 << 20,
            dead_nonce_lifetime: Duration::from_secs(6),
            dead_nonce_max: 1 << 18,
            trust_anchors: Vec::new(),
            channels: Vec::new(),
            shards: 1,
        }
    }
}

/// What the forwarder needs to create faces on command.
#[derive(Clone)]
pub struct FaceContext {
    /// Channel every face reports to.
    pub events: EventSender,
    /// Face id allocator.
    pub ids: Arc<FaceIds>,
    /// Limits for new faces.
    pub limits: FaceLimits,
    /// UDP channel for `udp4://` faces, if listening.
    pub udp: Option<UdpChannel>,
}

/// Forwarder-wide counters (faces keep their own).
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// PIT entries satisfied by Data.
    pub satisfied: u64,
    /// PIT entries that expired.
    pub unsatisfied: u64,
    /// Nacks NoRoute generated.
    pub no_route: u64,
    /// Loops detected (Nack Duplicate sent).
    pub loops: u64,
    /// Interests dropped for scope or HopLimit.
    pub scope_drops: u64,
}

/// The face table, looked up several times per packet. Keyed by foldhash, not
/// `std`'s SipHash (replacing it took 9 % off the daemon's instructions per
/// exchange, callgrind 10,854 → 9,883): face ids are allocated by this node,
/// never taken from the network, so there is no hash flooding to defend
/// against (foldhash is seeded per process anyway).
pub(crate) type FaceMap = HashMap<FaceId, FaceHandle, foldhash::fast::RandomState>;

/// The forwarder.
pub struct Forwarder {
    pub(crate) faces: FaceMap,
    pub(crate) tables: Tables,
    pub(crate) pit: Pit,
    pub(crate) dnl: DeadNonceList,
    pub(crate) cs: ContentStore,
    pub(crate) strategies: StrategyChoice,
    pub(crate) ctx: FaceContext,
    pub(crate) stats: Stats,
    pub(crate) started: std::time::SystemTime,
    pub(crate) mgmt: crate::mgmt::MgmtState,
    pub(crate) trust: Vec<granary_security::Certificate>,
    pub(crate) replay: granary_security::ReplayChecker,
    /// Listener URIs (faces/channels).
    pub(crate) channels: Vec<String>,
    /// VIP counts and cache set (idle unless a prefix uses the `vip`
    /// strategy or the CS the `vip` policy).
    pub(crate) vip: crate::vip::Vip,
    /// Nonces for Interests that arrive without one.
    rng: fastrand::Rng,
    /// Where faces hand their packets (set by `run`).
    sink: Option<Weak<dyn PacketSink>>,
    /// The configuration, kept to make the data shards from (`run`).
    cfg: ForwarderConfig,
    /// On the control shard of a sharded forwarder: the data shards, which
    /// it keeps in step with its face table, FIB and strategy choice after
    /// every management command. Only the control shard ever holds two
    /// shard locks (its own, then one data shard's), so there is no cycle.
    pub(crate) siblings: Vec<Arc<Shared>>,
    /// Sharded: the CS settings as configured (each shard holds a share).
    pub(crate) cs_whole: Option<CsConfig>,
    /// Sharded, control shard: its PIT size, published before an Interest
    /// is forwarded so that Data is also offered to it while it waits.
    pending: Option<Arc<AtomicUsize>>,
    /// When the run loop's timer is armed for.
    armed: Instant,
    /// The time of the batch being processed (one clock read per batch).
    now: Instant,
}

/// The forwarder (or one shard of it) as its faces see it: the tables behind
/// one lock, and a way to wake its timer loop when a face's packets armed an
/// earlier timer.
pub(crate) struct Shared {
    fw: std::sync::Mutex<Forwarder>,
    wake: Notify,
}

impl Shared {
    fn new(fw: Forwarder) -> Shared {
        Shared {
            fw: std::sync::Mutex::new(fw),
            wake: Notify::new(),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Forwarder> {
        // A panic while forwarding leaves the tables as consistent as it
        // found them between packets; keep forwarding.
        self.fw.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When this shard's timer loop must wake next (its earliest PIT
    /// timer, or an hour), recorded so that faces wake it for earlier ones.
    fn arm(&self) -> Instant {
        let mut fw = self.lock();
        let next = fw
            .pit
            .next_timer()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        fw.armed = next;
        next
    }

    fn after_batch(&self, fw: &Forwarder) {
        if fw.pit.next_timer().is_some_and(|t| t < fw.armed) {
            self.wake.notify_one();
        }
        fw.publish_pending();
    }
}

impl PacketSink for Shared {
    fn deliver(&self, face: FaceId, batch: &mut Vec<(NetPacket, LinkFields)>) {
        let mut fw = self.lock();
        let now = Instant::now();
        fw.now = now;
        // By reference: the packets stay where the face decoded them (no
        // moves of the decoded structs); dropped together afterwards.
        for (packet, link) in batch.iter() {
            fw.on_packet(face, packet, link, now);
        }
        batch.clear();
        self.after_batch(&fw);
    }

    fn deliver_one(&self, face: FaceId, packet: NetPacket, link: LinkFields) {
        let mut fw = self.lock();
        let now = Instant::now();
        fw.now = now;
        fw.on_packet(face, &packet, &link, now);
        self.after_batch(&fw);
    }
}

/// Where a sharded forwarder sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The control shard only.
    Control,
    /// Data shard `i` only.
    Data(usize),
    /// Data shard `i`, and a copy to the control shard (a Data while the
    /// control shard has PIT entries: one may be a CanBePrefix Interest it
    /// matches).
    Both(usize),
}

/// The sink of a sharded forwarder: sorts each batch by shard and runs each
/// shard's share under that shard's lock, one lock at a time.
///
/// - Interests that cannot be prefixes go to the data shard of their name's
///   hash (a trailing implicit digest left out), Data to the data shard of
///   theirs: an exact Interest and the Data that satisfies it meet, and so
///   do a Data and the CS lookups for its name.
/// - CanBePrefix Interests, and everything under `/localhost` and
///   `/localhop` (management, local commands), go to the control shard; a
///   Data is also offered to the control shard while its PIT holds entries.
/// - A Nack goes where its Interest went.
struct Dispatch {
    control: Arc<Shared>,
    data: Vec<Arc<Shared>>,
    /// The control shard's PIT size ([`Forwarder::publish_pending`]).
    pending: Arc<AtomicUsize>,
}

type Batch = Vec<(NetPacket, LinkFields)>;

thread_local! {
    /// Per-thread scratch for sorting a batch by shard (kept, so sorting
    /// allocates nothing once warm).
    static GROUPS: RefCell<Vec<Batch>> = const { RefCell::new(Vec::new()) };
}

fn is_local_name(n: &Name) -> bool {
    is_localhost(n) || is_localhop(n)
}

impl Dispatch {
    fn shard_of(&self, name: &Name, strip_digest: bool) -> usize {
        let v = name.value();
        let end = match name.last() {
            Some(c) if strip_digest && c.typ == granary_packet::types::COMP_IMPLICIT_DIGEST => {
                v.len() - c.wire.len()
            }
            _ => v.len(),
        };
        use std::hash::BuildHasher;
        let h = crate::namehash::state().hash_one(&v[..end]);
        (h % self.data.len() as u64) as usize
    }

    fn interest_target(&self, i: &Interest) -> Target {
        if i.can_be_prefix || is_local_name(&i.name) {
            Target::Control
        } else {
            Target::Data(self.shard_of(&i.name, true))
        }
    }

    fn target(&self, p: &NetPacket) -> Target {
        match p {
            NetPacket::Interest(i) | NetPacket::Nack(i, _) => self.interest_target(i),
            NetPacket::Data(d) if is_local_name(d.name()) => Target::Control,
            NetPacket::Data(d) => {
                let i = self.shard_of(d.name(), false);
                if self.pending.load(Ordering::Acquire) > 0 {
                    Target::Both(i)
                } else {
                    Target::Data(i)
                }
            }
        }
    }

    fn shard(&self, group: usize) -> &Shared {
        if group == 0 {
            &self.control
        } else {
            &self.data[group - 1]
        }
    }
}

impl PacketSink for Dispatch {
    fn deliver(&self, face: FaceId, batch: &mut Vec<(NetPacket, LinkFields)>) {
        GROUPS.with(|cell| {
            let Ok(mut groups) = cell.try_borrow_mut() else {
                // Not reentered today; if it ever is, go one by one.
                for (p, l) in batch.drain(..) {
                    self.deliver_one(face, p, l);
                }
                return;
            };
            groups.resize_with(self.data.len() + 1, Vec::new);
            for (p, l) in batch.drain(..) {
                match self.target(&p) {
                    Target::Control => groups[0].push((p, l)),
                    Target::Data(i) => groups[i + 1].push((p, l)),
                    Target::Both(i) => {
                        groups[0].push((p.clone(), l.clone()));
                        groups[i + 1].push((p, l));
                    }
                }
            }
            for (g, packets) in groups.iter_mut().enumerate() {
                if !packets.is_empty() {
                    self.shard(g).deliver(face, packets);
                }
            }
        });
    }

    fn deliver_one(&self, face: FaceId, packet: NetPacket, link: LinkFields) {
        match self.target(&packet) {
            Target::Control => self.control.deliver_one(face, packet, link),
            Target::Data(i) => self.data[i].deliver_one(face, packet, link),
            Target::Both(i) => {
                self.data[i].deliver_one(face, packet.clone(), link.clone());
                self.control.deliver_one(face, packet, link);
            }
        }
    }
}

/// The CS settings of one of `n` data shards: the capacities split evenly.
fn cs_share(whole: &CsConfig, n: usize) -> CsConfig {
    let mut c = whole.clone();
    c.max_packets = whole.max_packets.div_ceil(n);
    c.max_bytes = whole.max_bytes.div_ceil(n);
    c
}

/// A data shard's timer loop: PIT expiry and route expiry.
async fn shard_loop(cell: Arc<Shared>) {
    let mut housekeeping = tokio::time::interval(Duration::from_millis(500));
    loop {
        let next = cell.arm();
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {
                let now = Instant::now();
                let mut fw = cell.lock();
                fw.now = now;
                fw.on_timers(now);
            }
            _ = cell.wake.notified() => {}
            _ = housekeeping.tick() => {
                let now = Instant::now();
                cell.lock().tables.expire(now);
            }
        }
    }
}

/// The control task's handling of one event in a sharded forwarder: faces
/// are added to every shard before any can receive their packets (the data
/// shards first; the control shard, last, installs the sink) and removed
/// from every shard; packets go through the dispatcher.
fn sharded_event(ev: FaceEvent, control: &Shared, data: &[Arc<Shared>], sink: &dyn PacketSink) {
    let now = Instant::now();
    match ev {
        FaceEvent::Created(h) => {
            for s in data {
                s.lock().faces.insert(h.info.id, h.clone());
            }
            control.lock().add_face(h);
        }
        FaceEvent::Closed { face, reason } => {
            let mut fw = control.lock();
            fw.now = now;
            fw.on_event(FaceEvent::Closed { face, reason }, now);
            drop(fw);
            for s in data {
                let mut fw = s.lock();
                fw.faces.remove(&face);
                fw.tables.remove_face(face);
            }
        }
        FaceEvent::Packet { face, packet, link } => sink.deliver_one(face, packet, link),
        ev @ FaceEvent::Send { .. } => {
            let mut fw = control.lock();
            fw.now = now;
            fw.on_event(ev, now);
        }
    }
}

fn is_localhost(n: &Name) -> bool {
    n.get(0)
        .is_some_and(|c| c.typ == granary_packet::types::COMP_GENERIC && c.value == b"localhost")
}

fn is_localhop(n: &Name) -> bool {
    n.get(0)
        .is_some_and(|c| c.typ == granary_packet::types::COMP_GENERIC && c.value == b"localhop")
}

impl Forwarder {
    /// A forwarder with no faces yet.
    pub fn new(cfg: ForwarderConfig, ctx: FaceContext) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(42);
        Forwarder {
            faces: FaceMap::default(),
            tables: Tables::default(),
            pit: Pit::new(cfg.pit_max),
            dnl: DeadNonceList::new(cfg.dead_nonce_lifetime, cfg.dead_nonce_max),
            cs: ContentStore::new(cfg.cs.clone(), seed),
            strategies: StrategyChoice::default(),
            ctx,
            stats: Stats::default(),
            started: std::time::SystemTime::now(),
            mgmt: Default::default(),
            trust: cfg.trust_anchors.clone(),
            replay: granary_security::ReplayChecker::default(),
            channels: cfg.channels.clone(),
            vip: crate::vip::Vip::new(crate::vip::VipConfig::default()),
            rng: fastrand::Rng::with_seed(seed),
            sink: None,
            cfg,
            siblings: Vec::new(),
            cs_whole: None,
            pending: None,
            armed: Instant::now(),
            now: Instant::now(),
        }
    }

    /// Adds a face (in-process faces are added this way before `run`).
    pub fn add_face(&mut self, h: FaceHandle) {
        tracing::info!(face = h.info.id, remote = %h.info.remote_uri, local = %h.info.local_uri, "face up");
        if let Some(sink) = &self.sink {
            h.set_sink(sink.clone());
        }
        self.faces.insert(h.info.id, h);
    }

    /// Registers a route directly (for in-process producers).
    pub fn add_route(&mut self, prefix: Name, face: FaceId, cost: u64) {
        self.tables.register(
            prefix,
            crate::fib::Route {
                face,
                origin: 0,
                cost,
                flags: crate::fib::CHILD_INHERIT,
                expires: None,
            },
        );
    }

    /// Runs until `shutdown` is notified or every face sender is gone.
    ///
    /// The forwarder moves into a mutex shared with its faces: once a face
    /// is known (its [`FaceEvent::Created`] handled), it forwards what it
    /// reads on its own task, under the lock, one batch per read
    /// ([`PacketSink`]). This task keeps the event channel (face creation
    /// and closing, packets of faces not yet known, UDP and WebSocket
    /// packets), the PIT timers and housekeeping.
    ///
    /// With `shards = N > 1`, this forwarder becomes the control shard
    /// (management, `/localhost` and `/localhop`, CanBePrefix Interests) and
    /// N data shards are made beside it, each with its own PIT, CS (an Nth
    /// of the capacity), dead-nonce list, lock and timer task, and a copy of
    /// the face table, FIB and strategy choice that the control shard keeps
    /// in step. Faces hand their batches to a dispatcher that sorts them by
    /// shard (see [`Dispatch`]).
    pub async fn run(mut self, mut events: mpsc::Receiver<FaceEvent>, shutdown: Arc<Notify>) {
        let vip_every = self.vip.config().period;
        let n = self.cfg.shards.clamp(1, MAX_SHARDS);
        let mut data: Vec<Arc<Shared>> = Vec::new();
        let pending = Arc::new(AtomicUsize::new(0));
        if n > 1 {
            let whole = self.cs.config().clone();
            let share = cs_share(&whole, n);
            for _ in 0..n {
                let mut cfg = self.cfg.clone();
                cfg.pit_max = cfg.pit_max.div_ceil(n);
                cfg.dead_nonce_max = cfg.dead_nonce_max.div_ceil(n);
                cfg.cs = share.clone();
                let mut shard = Forwarder::new(cfg, self.ctx.clone());
                shard.faces = self.faces.clone();
                shard.tables = self.tables.clone();
                shard.strategies = self.strategies.clone();
                data.push(Arc::new(Shared::new(shard)));
            }
            self.cs.set_config(share);
            self.cs_whole = Some(whole);
            self.siblings = data.clone();
            self.pending = Some(pending.clone());
        }
        let control = Arc::new(Shared::new(self));
        let sink: Arc<dyn PacketSink> = if data.is_empty() {
            control.clone()
        } else {
            Arc::new(Dispatch {
                control: control.clone(),
                data: data.clone(),
                pending,
            })
        };
        {
            let weak = Arc::downgrade(&sink);
            for s in &data {
                s.lock().sink = Some(weak.clone());
            }
            let mut fw = control.lock();
            for f in fw.faces.values() {
                f.set_sink(weak.clone());
            }
            fw.sink = Some(weak);
        }
        let timers: Vec<tokio::task::JoinHandle<()>> = data
            .iter()
            .map(|s| tokio::spawn(shard_loop(s.clone())))
            .collect();
        let mut housekeeping = tokio::time::interval(Duration::from_millis(500));
        let mut vip_period = tokio::time::interval(vip_every);
        loop {
            let next = control.arm();
            tokio::select! {
                ev = events.recv() => {
                    let Some(ev) = ev else { break };
                    if data.is_empty() {
                        let mut fw = control.lock();
                        let now = Instant::now();
                        fw.now = now;
                        fw.on_event(ev, now);
                        // Drain what is already queued before looking at timers.
                        for _ in 0..256 {
                            match events.try_recv() {
                                Ok(ev) => fw.on_event(ev, now),
                                Err(_) => break,
                            }
                        }
                        control.after_batch(&fw);
                    } else {
                        sharded_event(ev, &control, &data, sink.as_ref());
                        for _ in 0..256 {
                            match events.try_recv() {
                                Ok(ev) => sharded_event(ev, &control, &data, sink.as_ref()),
                                Err(_) => break,
                            }
                        }
                    }
                }
                _ = tokio::time::sleep_until(next) => {
                    let now = Instant::now();
                    let mut fw = control.lock();
                    fw.now = now;
                    fw.on_timers(now);
                    fw.publish_pending();
                }
                // A face's packets armed a timer earlier than `next`.
                _ = control.wake.notified() => {}
                _ = vip_period.tick() => {
                    let now = Instant::now();
                    let mut fw = control.lock();
                    fw.now = now;
                    fw.vip_period(now);
                }
                _ = housekeeping.tick() => {
                    let now = Instant::now();
                    let mut fw = control.lock();
                    fw.tables.expire(now);
                    fw.mgmt.expire(now);
                }
                _ = shutdown.notified() => break,
            }
        }
        for t in timers {
            t.abort();
        }
        let fw = control.lock();
        for f in fw.faces.values() {
            f.close();
        }
    }

    /// Sharded, control shard: publishes its PIT size for the dispatcher.
    fn publish_pending(&self) {
        if let Some(p) = &self.pending {
            p.store(self.pit.len(), Ordering::Release);
        }
    }

    /// Sharded, control shard: brings every data shard's face table, FIB,
    /// strategy choice and CS settings in line with its own (after a
    /// management command; commands are rare, tables small).
    pub(crate) fn sync_shards(&mut self) {
        if self.siblings.is_empty() {
            return;
        }
        let share = self.cs.config().clone();
        for s in &self.siblings {
            let mut fw = s.lock();
            fw.faces.clone_from(&self.faces);
            fw.tables.clone_from(&self.tables);
            fw.strategies.clone_from(&self.strategies);
            if fw.cs.config() != &share {
                fw.cs.set_config(share.clone());
            }
        }
    }

    /// The CS lookup of an Interest with no PIT entry. Sharded, control
    /// shard: a CanBePrefix Interest comes here, while the Data that may
    /// satisfy it were cached on the data shards of their names' hashes, so
    /// those are searched too (its own CS first, then each data shard's
    /// under its lock, one at a time); one hit or one miss is counted.
    fn cs_find(&mut self, i: &Interest, now: Instant) -> Option<Bytes> {
        let now = now.into_std();
        if self.siblings.is_empty() || !i.can_be_prefix {
            return self.cs.find_wire(i, now);
        }
        if let Some(wire) = self.cs.find_wire_or_pass(i, now) {
            return Some(wire);
        }
        for s in &self.siblings {
            if let Some(wire) = s.lock().cs.find_wire_or_pass(i, now) {
                return Some(wire);
            }
        }
        self.cs.count_miss();
        None
    }

    /// A figure summed over this shard and its siblings (datasets).
    pub(crate) fn shards_sum(&self, f: impl Fn(&Forwarder) -> u64) -> u64 {
        f(self) + self.siblings.iter().map(|s| f(&s.lock())).sum::<u64>()
    }

    /// The CS settings as configured (sharded: the whole, not this shard's share).
    pub(crate) fn cs_config_whole(&self) -> &CsConfig {
        self.cs_whole.as_ref().unwrap_or(self.cs.config())
    }

    /// Applies CS settings: sharded, each shard takes its share.
    pub(crate) fn set_cs_config_whole(&mut self, cfg: CsConfig) {
        if self.siblings.is_empty() {
            self.cs.set_config(cfg);
        } else {
            self.cs.set_config(cs_share(&cfg, self.siblings.len()));
            self.cs_whole = Some(cfg);
            self.sync_shards();
        }
    }

    /// True when PIT and CS are split over data shards.
    pub(crate) fn sharded(&self) -> bool {
        !self.siblings.is_empty()
    }

    pub(crate) fn on_event(&mut self, ev: FaceEvent, now: Instant) {
        self.now = now;
        match ev {
            FaceEvent::Created(h) => self.add_face(h),
            FaceEvent::Closed { face, reason } => {
                tracing::info!(face, "face down: {reason}");
                self.faces.remove(&face);
                self.tables.remove_face(face);
            }
            FaceEvent::Packet { face, packet, link } => self.on_packet(face, &packet, &link, now),
            FaceEvent::Send { face, packet } => {
                if let Some(h) = self.faces.get(&face) {
                    h.send(packet);
                }
            }
        }
    }

    fn on_packet(&mut self, face: FaceId, packet: &NetPacket, link: &LinkFields, now: Instant) {
        self.now = now;
        if !self.faces.contains_key(&face) {
            return;
        }
        match packet {
            NetPacket::Interest(i) => self.on_interest(face, i, link, now),
            NetPacket::Data(d) => self.on_data(face, d, link, now),
            NetPacket::Nack(i, r) => self.on_nack(face, i, *r, now),
        }
    }

    fn scope(&self, face: FaceId) -> Scope {
        self.faces
            .get(&face)
            .map_or(Scope::NonLocal, |f| f.info.scope)
    }

    pub(crate) fn send(&self, face: FaceId, p: OutPacket) {
        if let Some(f) = self.faces.get(&face) {
            f.send_at(p, self.now);
        }
    }

    pub(crate) fn send_data(
        &self,
        face: FaceId,
        d: &Data,
        pit_token: Option<Bytes>,
        mark: Option<u64>,
    ) {
        self.send(
            face,
            OutPacket {
                wire: d.wire().clone(),
                kind: OutKind::Data,
                pit_token,
                congestion_mark: mark,
            },
        );
    }

    fn send_nack(&self, face: FaceId, i: &Interest, reason: u64, pit_token: Option<Bytes>) {
        self.send_nack_wire(face, i.wire().clone(), reason, pit_token);
    }

    fn send_nack_wire(&self, face: FaceId, wire: Bytes, reason: u64, pit_token: Option<Bytes>) {
        self.send(
            face,
            OutPacket {
                wire,
                kind: OutKind::Nack(reason),
                pit_token,
                congestion_mark: None,
            },
        );
    }

    fn on_interest(&mut self, face: FaceId, i: &Interest, link: &LinkFields, now: Instant) {
        let local = self.scope(face) == Scope::Local;
        if crate::vip::is_beacon(&i.name) {
            self.on_vip_beacon(face, i, now);
            return;
        }
        if local && self.vip.active() && self.strategies.find(&i.name) == Strategy::Vip {
            self.vip.on_request(&i.name);
        }
        if !local && (is_localhost(&i.name) || i.hop_limit == Some(0)) {
            self.stats.scope_drops += 1;
            return;
        }
        if is_localhost(&i.name) || is_localhop(&i.name) {
            if let Some(handled) = self.handle_mgmt(face, i, link, now) {
                if handled {
                    return;
                }
            }
        }
        let nonce = match i.nonce {
            Some(n) => n,
            None => self.rng.u32(..),
        };
        // The name is hashed once here; the dead-nonce list, PIT, FIB and
        // strategy choice all use these hashes.
        let hashes = NameHashes::of(&i.name);
        if self.dnl.contains_hashed(hashes.full(), nonce, now) {
            self.stats.loops += 1;
            self.send_nack(face, i, nack_reason::DUPLICATE, link.pit_token.clone());
            return;
        }
        let key = PitKey::of(i);
        // Loop: the same nonce already seen from another face, or sent upstream.
        if let Some(e) = self
            .pit
            .find(&key, hashes.full())
            .and_then(|id| self.pit.entry(id))
        {
            let looped = e
                .in_records
                .iter()
                .any(|r| r.nonce == nonce && r.face != face)
                || e.out_records.iter().any(|r| r.nonce == nonce);
            if looped {
                self.stats.loops += 1;
                self.send_nack(face, i, nack_reason::DUPLICATE, link.pit_token.clone());
                return;
            }
        } else if let Some(wire) = self.cs_find(i, now) {
            self.send(
                face,
                OutPacket {
                    wire,
                    kind: OutKind::Data,
                    pit_token: link.pit_token.clone(),
                    congestion_mark: None,
                },
            );
            return;
        }
        let lifetime = Duration::from_millis(i.lifetime_ms());
        let Some((id, _new)) = self.pit.find_or_insert(&key, hashes.full(), now) else {
            self.send_nack(face, i, nack_reason::CONGESTION, link.pit_token.clone());
            return;
        };
        // Sharded, control shard: Data must be offered here before the
        // Interest can have reached its producer.
        self.publish_pending();
        let Some(entry) = self.pit.entry_mut(id) else {
            return;
        };
        let expiry = now + lifetime;
        match entry.in_records.iter_mut().find(|r| r.face == face) {
            Some(r) => {
                r.nonce = nonce;
                r.expiry = expiry;
                r.pit_token = link.pit_token.clone();
                r.wire = i.wire().clone();
            }
            None => entry.in_records.push(InRecord {
                face,
                nonce,
                expiry,
                pit_token: link.pit_token.clone(),
                wire: i.wire().clone(),
            }),
        }
        if expiry > entry.expiry {
            entry.expiry = expiry;
            self.pit.schedule_id(id, expiry);
        }
        self.forward(
            face,
            id,
            &hashes,
            i,
            nonce,
            link.next_hop_face_id.filter(|_| local),
            link.pit_token.clone(),
            now,
        );
    }

    /// Strategy: choose upstreams for a (possibly retransmitted) Interest.
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        from: FaceId,
        id: EntryId,
        hashes: &NameHashes,
        i: &Interest,
        nonce: u32,
        next_hop: Option<FaceId>,
        pit_token: Option<Bytes>,
        now: Instant,
    ) {
        let from_local = self.scope(from) == Scope::Local;
        let localhost = is_localhost(&i.name);
        let localhop = is_localhop(&i.name);
        let eligible = |f: FaceId, faces: &FaceMap| -> bool {
            if f == from {
                return false;
            }
            match faces.get(&f) {
                None => false,
                Some(h) => {
                    let out_local = h.info.scope == Scope::Local;
                    // /localhost only between local faces; /localhop from a non-local
                    // face only to local ones.
                    out_local || !(localhost || (localhop && !from_local))
                }
            }
        };
        let mut hops: SmallVec<[FaceId; 4]> = SmallVec::new();
        match next_hop {
            Some(f) if self.faces.contains_key(&f) => hops.push(f),
            _ => {
                if let Some((_, nh)) = self.tables.lookup_hashed(&i.name, hashes) {
                    hops.extend(
                        nh.iter()
                            .map(|h| h.face)
                            .filter(|f| eligible(*f, &self.faces)),
                    );
                }
            }
        }
        let strategy = self.strategies.find_hashed(&i.name, hashes);
        let vip_choice = (strategy == Strategy::Vip)
            .then(|| self.vip_choose(&i.name, &hops))
            .flatten();
        let Some(entry) = self.pit.entry_mut(id) else {
            return;
        };
        if hops.is_empty() {
            // Nothing to try: NoRoute to this downstream.
            entry.in_records.retain(|r| r.face != from);
            let empty = entry.in_records.is_empty();
            if empty {
                self.pit.remove_id(id);
            }
            self.stats.no_route += 1;
            self.send_nack(from, i, nack_reason::NO_ROUTE, pit_token);
            return;
        }
        let first = entry.out_records.is_empty();
        if !first {
            // Retransmission: suppressed within the interval.
            if now < entry.suppress_until {
                return;
            }
            entry.suppress_interval = (entry.suppress_interval * 2).min(SUPPRESS_MAX);
        } else {
            entry.suppress_interval = SUPPRESS_INITIAL;
        }
        entry.suppress_until = now + entry.suppress_interval;
        let mut targets: SmallVec<[FaceId; 4]> = SmallVec::new();
        match strategy {
            Strategy::Multicast => targets = hops,
            Strategy::BestRoute => {
                let unused = hops
                    .iter()
                    .copied()
                    .find(|f| !entry.out_records.iter().any(|r| r.face == *f));
                targets.push(unused.unwrap_or(hops[0]));
            }
            Strategy::Vip => targets.push(vip_choice.unwrap_or(hops[0])),
        }
        let wire = if i.nonce != Some(nonce) || i.hop_limit.is_some() {
            i.with_nonce_and_hop_limit(nonce, i.hop_limit.map(|h| h.saturating_sub(1)))
                .wire()
                .clone()
        } else {
            i.wire().clone()
        };
        for t in targets {
            match entry.out_records.iter_mut().find(|r| r.face == t) {
                Some(r) => {
                    r.nonce = nonce;
                    r.sent = now;
                    r.nack = None;
                }
                None => entry.out_records.push(OutRecord {
                    face: t,
                    nonce,
                    sent: now,
                    nack: None,
                }),
            }
            if let Some(f) = self.faces.get(&t) {
                f.send_at(
                    OutPacket {
                        wire: wire.clone(),
                        kind: OutKind::Interest,
                        pit_token: None,
                        congestion_mark: None,
                    },
                    now,
                );
            }
        }
    }

    fn on_data(&mut self, face: FaceId, d: &Data, link: &LinkFields, now: Instant) {
        if is_localhost(d.name()) && self.scope(face) != Scope::Local {
            self.stats.scope_drops += 1;
            return;
        }
        let hashes = NameHashes::of(d.name());
        let mut ids: SmallVec<[EntryId; 4]> = SmallVec::new();
        self.pit.matches_into(d, &hashes, &mut ids);
        if ids.is_empty() {
            return; // unsolicited
        }
        // A local producer may say that a Data is not worth caching (NDNLPv2
        // CachePolicy NoCache): the repository does so for segments it can
        // rebuild for the price of one SHA-256.
        let no_cache = link.cache_policy == Some(granary_face::CACHE_POLICY_NO_CACHE)
            && self.scope(face) == Scope::Local;
        if !no_cache && self.cs.admits() && self.vip_admits(d.name()) {
            self.cs.insert(d, now.into_std());
        }
        let mut sent_to: SmallVec<[FaceId; 4]> = SmallVec::new();
        // A satisfied Interest goes to the dead-nonce list only when a copy
        // still looping could not be answered with this Data from a cache:
        // MustBeFresh and a FreshnessPeriod shorter than the list's lifetime
        // (NFD's rule, `Forwarder::insertDeadNonceList`). Unsatisfied ones
        // (expired, Nacked) always go.
        let short_fresh = d.freshness_period() < self.dnl.lifetime_ms();
        for id in ids {
            let hash = self.pit.name_hash(id);
            let Some(e) = self.pit.remove_id(id) else {
                continue;
            };
            self.stats.satisfied += 1;
            if e.key.must_be_fresh && short_fresh {
                for r in &e.out_records {
                    self.dnl.add_hashed(hash, r.nonce, now);
                }
            }
            for r in e.in_records {
                if r.expiry < now || sent_to.contains(&r.face) {
                    continue;
                }
                sent_to.push(r.face);
                self.send_data(r.face, d, r.pit_token, link.congestion_mark);
            }
        }
    }

    fn on_nack(&mut self, face: FaceId, i: &Interest, reason: u64, now: Instant) {
        let key = PitKey::of(i);
        let hash = hash_name(&key.name);
        let Some(id) = self.pit.find(&key, hash) else {
            return;
        };
        let Some(e) = self.pit.entry_mut(id) else {
            return;
        };
        let Some(out) = e
            .out_records
            .iter_mut()
            .find(|r| r.face == face && Some(r.nonce) == i.nonce)
        else {
            return;
        };
        out.nack = Some(reason);
        if e.out_records.iter().any(|r| r.nack.is_none()) {
            return;
        }
        // Every upstream said no: pass on the least severe reason.
        let least = e
            .out_records
            .iter()
            .filter_map(|r| r.nack)
            .min_by_key(|r| match *r {
                nack_reason::CONGESTION => 0,
                nack_reason::DUPLICATE => 1,
                nack_reason::NO_ROUTE => 2,
                _ => 3,
            });
        let Some(e) = self.pit.remove_id(id) else {
            return;
        };
        for r in &e.out_records {
            self.dnl.add_hashed(hash, r.nonce, now);
        }
        for r in e.in_records {
            self.send_nack_wire(
                r.face,
                r.wire,
                least.unwrap_or(nack_reason::NO_ROUTE),
                r.pit_token,
            );
        }
    }

    fn on_timers(&mut self, now: Instant) {
        self.now = now;
        for e in self.pit.expired(now) {
            self.stats.unsatisfied += 1;
            let hash = hash_name(&e.key.name);
            for r in &e.out_records {
                self.dnl.add_hashed(hash, r.nonce, now);
            }
        }
    }

    /// Sum of a counter over all faces.
    pub(crate) fn face_total(&self, f: impl Fn(&Counters) -> &std::sync::atomic::AtomicU64) -> u64 {
        self.faces
            .values()
            .map(|h| Counters::get(f(&h.counters)))
            .sum()
    }
}
