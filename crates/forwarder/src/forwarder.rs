//! The forwarding pipelines, run on one task that owns every table: faces
//! hand it decoded packets through one bounded channel; it answers through
//! the faces' bounded send queues. No locks on the data path.

use std::collections::HashMap;
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
}

impl Default for ForwarderConfig {
    fn default() -> Self {
        ForwarderConfig {
            cs: CsConfig::default(),
            pit_max: 1 << 20,
            dead_nonce_lifetime: Duration::from_secs(6),
            dead_nonce_max: 1 << 18,
            trust_anchors: Vec::new(),
            channels: Vec::new(),
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
    rng: u64,
    /// Where faces hand their packets (set by `run`).
    sink: Option<Weak<dyn PacketSink>>,
    /// When the run loop's timer is armed for.
    armed: Instant,
    /// The time of the batch being processed (one clock read per batch).
    now: Instant,
}

/// The forwarder as its faces see it: the tables behind one lock, and a
/// way to wake the run loop when a face's packets armed an earlier timer.
struct Shared {
    fw: std::sync::Mutex<Forwarder>,
    wake: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Forwarder> {
        // A panic while forwarding leaves the tables as consistent as it
        // found them between packets; keep forwarding.
        self.fw.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn after_batch(&self, fw: &Forwarder) {
        if fw.pit.next_timer().is_some_and(|t| t < fw.armed) {
            self.wake.notify_one();
        }
    }
}

impl PacketSink for Shared {
    fn deliver(&self, face: FaceId, batch: &mut Vec<(NetPacket, LinkFields)>) {
        let mut fw = self.lock();
        let now = Instant::now();
        fw.now = now;
        for (packet, link) in batch.drain(..) {
            fw.on_packet(face, packet, link, now);
        }
        self.after_batch(&fw);
    }

    fn deliver_one(&self, face: FaceId, packet: NetPacket, link: LinkFields) {
        let mut fw = self.lock();
        let now = Instant::now();
        fw.now = now;
        fw.on_packet(face, packet, link, now);
        self.after_batch(&fw);
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
            trust: cfg.trust_anchors,
            replay: granary_security::ReplayChecker::default(),
            channels: cfg.channels,
            vip: crate::vip::Vip::new(crate::vip::VipConfig::default()),
            rng: seed,
            sink: None,
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
    /// and closing, packets of faces not yet known), the PIT timers and
    /// housekeeping.
    pub async fn run(self, mut events: mpsc::Receiver<FaceEvent>, shutdown: Arc<Notify>) {
        let vip_every = self.vip.config().period;
        let cell = Arc::new(Shared {
            fw: std::sync::Mutex::new(self),
            wake: Notify::new(),
        });
        {
            let weak: Weak<Shared> = Arc::downgrade(&cell);
            let weak: Weak<dyn PacketSink> = weak;
            let mut fw = cell.lock();
            for f in fw.faces.values() {
                f.set_sink(weak.clone());
            }
            fw.sink = Some(weak);
        }
        let mut housekeeping = tokio::time::interval(Duration::from_millis(500));
        let mut vip_period = tokio::time::interval(vip_every);
        loop {
            let next = {
                let mut fw = cell.lock();
                let next = fw
                    .pit
                    .next_timer()
                    .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                fw.armed = next;
                next
            };
            tokio::select! {
                ev = events.recv() => {
                    let Some(ev) = ev else { break };
                    let mut fw = cell.lock();
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
                }
                _ = tokio::time::sleep_until(next) => {
                    let now = Instant::now();
                    let mut fw = cell.lock();
                    fw.now = now;
                    fw.on_timers(now);
                }
                // A face's packets armed a timer earlier than `next`.
                _ = cell.wake.notified() => {}
                _ = vip_period.tick() => {
                    let now = Instant::now();
                    let mut fw = cell.lock();
                    fw.now = now;
                    fw.vip_period(now);
                }
                _ = housekeeping.tick() => {
                    let now = Instant::now();
                    let mut fw = cell.lock();
                    fw.tables.expire(now);
                    fw.mgmt.expire(now);
                }
                _ = shutdown.notified() => break,
            }
        }
        let fw = cell.lock();
        for f in fw.faces.values() {
            f.close();
        }
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
            FaceEvent::Packet { face, packet, link } => self.on_packet(face, packet, link, now),
            FaceEvent::Send { face, packet } => {
                if let Some(h) = self.faces.get(&face) {
                    h.send(packet);
                }
            }
        }
    }

    fn on_packet(&mut self, face: FaceId, packet: NetPacket, link: LinkFields, now: Instant) {
        self.now = now;
        if !self.faces.contains_key(&face) {
            return;
        }
        match packet {
            NetPacket::Interest(i) => self.on_interest(face, i, link, now),
            NetPacket::Data(d) => self.on_data(face, d, link, now),
            NetPacket::Nack(i, r) => self.on_nack(face, i, r, now),
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

    fn on_interest(&mut self, face: FaceId, i: Interest, link: LinkFields, now: Instant) {
        let local = self.scope(face) == Scope::Local;
        if crate::vip::is_beacon(&i.name) {
            self.on_vip_beacon(face, &i, now);
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
            if let Some(handled) = self.handle_mgmt(face, &i, &link, now) {
                if handled {
                    return;
                }
            }
        }
        let nonce = match i.nonce {
            Some(n) => n,
            None => splitmix(&mut self.rng) as u32,
        };
        // The name is hashed once here; the dead-nonce list, PIT, FIB and
        // strategy choice all use these hashes.
        let hashes = NameHashes::of(&i.name);
        if self.dnl.contains_hashed(hashes.full(), nonce, now) {
            self.stats.loops += 1;
            self.send_nack(face, &i, nack_reason::DUPLICATE, link.pit_token);
            return;
        }
        let key = PitKey::of(&i);
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
                self.send_nack(face, &i, nack_reason::DUPLICATE, link.pit_token);
                return;
            }
        } else if let Some(wire) = self.cs.find_wire(&i, now.into_std()) {
            self.send(
                face,
                OutPacket {
                    wire,
                    kind: OutKind::Data,
                    pit_token: link.pit_token,
                    congestion_mark: None,
                },
            );
            return;
        }
        let lifetime = Duration::from_millis(i.lifetime_ms());
        let Some((id, _new)) = self.pit.find_or_insert(&key, hashes.full(), now) else {
            self.send_nack(face, &i, nack_reason::CONGESTION, link.pit_token);
            return;
        };
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
            &i,
            nonce,
            link.next_hop_face_id.filter(|_| local),
            link.pit_token,
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

    fn on_data(&mut self, face: FaceId, d: Data, link: LinkFields, now: Instant) {
        if is_localhost(d.name()) && self.scope(face) != Scope::Local {
            self.stats.scope_drops += 1;
            return;
        }
        let hashes = NameHashes::of(d.name());
        let mut ids: SmallVec<[EntryId; 4]> = SmallVec::new();
        self.pit.matches_into(&d, &hashes, &mut ids);
        if ids.is_empty() {
            return; // unsolicited
        }
        // A local producer may say that a Data is not worth caching (NDNLPv2
        // CachePolicy NoCache): the repository does so for segments it can
        // rebuild for the price of one SHA-256.
        let no_cache = link.cache_policy == Some(granary_face::CACHE_POLICY_NO_CACHE)
            && self.scope(face) == Scope::Local;
        if !no_cache && self.cs.admits() && self.vip_admits(d.name()) {
            self.cs.insert(d.clone(), now.into_std());
        }
        let mut sent_to: SmallVec<[FaceId; 4]> = SmallVec::new();
        for id in ids {
            let hash = self.pit.name_hash(id);
            let Some(e) = self.pit.remove_id(id) else {
                continue;
            };
            self.stats.satisfied += 1;
            for r in &e.out_records {
                self.dnl.add_hashed(hash, r.nonce, now);
            }
            for r in e.in_records {
                if r.expiry < now || sent_to.contains(&r.face) {
                    continue;
                }
                sent_to.push(r.face);
                self.send_data(r.face, &d, r.pit_token, link.congestion_mark);
            }
        }
    }

    fn on_nack(&mut self, face: FaceId, i: Interest, reason: u64, now: Instant) {
        let key = PitKey::of(&i);
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
