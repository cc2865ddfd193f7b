//! The forwarder's state: [`Forwarder`] holds one shard's tables (faces,
//! RIB/FIB, PIT, dead-nonce list, CS, strategy choice, VIP counts) and the
//! helpers every part uses to send and to keep shards in step. What it does
//! with a packet is in `pipeline.rs`, how it runs and shards in `run.rs` and
//! `shard.rs`; management reaches it only through [`Managed`], implemented
//! here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use granary_face::{FaceHandle, FaceId, OutKind, OutPacket, PacketSink, Scope};
use granary_packet::{Data, Interest, Name};
use tokio::time::Instant;

pub use crate::config::{FaceContext, ForwarderConfig, MAX_SHARDS};

use crate::config::FaceMap;
use crate::cs::{ContentStore, CsConfig};
use crate::fib::Tables;
use crate::mgmt::{ClosedFaces, Managed, MgmtState, Totals};
use crate::permanent::{PermanentFace, Target};
use crate::pit::{DeadNonceList, Pit};
use crate::shard::{cs_share, Shard};
use crate::strategy::StrategyChoice;

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
    /// Interests under an owner-only prefix refused because they came from
    /// another user's Unix face ([`ForwarderConfig::owner_only`]).
    pub not_owner: u64,
    /// Interests forwarded by a ForwardingHint (the FIB entry of a hint
    /// name, not of the Interest's name, chose the next hop).
    pub hinted: u64,
    /// Interests whose ForwardingHint was stripped on arrival because a
    /// hint name is in this node's network region.
    pub hint_stripped: u64,
    /// Packet counters of the faces already closed (in/out Interests, Data,
    /// Nacks), so that status/general's totals never go down when a face
    /// closes (NFD's are forwarder-wide; Prometheus counters must not drop).
    pub closed_faces: ClosedFaces,
}

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
    /// NFD management's own state (see [`crate::mgmt`]).
    pub(crate) mgmt: MgmtState,
    /// VIP counts and cache set (idle unless a prefix uses the `vip`
    /// strategy or the CS the `vip` policy).
    pub(crate) vip: crate::vip::Vip,
    /// Nonces for Interests that arrive without one.
    pub(crate) rng: fastrand::Rng,
    /// Where faces hand their packets (set by `run`).
    pub(crate) sink: Option<Weak<dyn PacketSink>>,
    /// The configuration, kept to make the data shards from (`run`).
    pub(crate) cfg: ForwarderConfig,
    /// On the control shard of a sharded forwarder: the data shards, which
    /// it keeps in step with its face table, FIB and strategy choice after
    /// every management command. Only the control shard ever holds two
    /// shard locks (its own, then one data shard's), so there is no cycle.
    pub(crate) siblings: Vec<Arc<Shard<Forwarder>>>,
    /// Sharded: the CS settings as configured (each shard holds a share).
    pub(crate) cs_whole: Option<CsConfig>,
    /// Sharded, control shard: its PIT size, published before an Interest
    /// is forwarded so that Data is also offered to it while it waits.
    pub(crate) pending: Option<Arc<AtomicUsize>>,
    /// When the run loop's timer is armed for.
    pub(crate) armed: Instant,
    /// The time of the batch being processed (one clock read per batch).
    pub(crate) now: Instant,
    /// Permanent faces (control shard): re-dialled when they close, their
    /// routes kept meanwhile (see [`crate::permanent`]).
    pub(crate) permanent: std::collections::HashMap<FaceId, PermanentFace>,
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
            mgmt: MgmtState::new(cfg.trust_anchors.clone(), cfg.channels.clone()),
            vip: crate::vip::Vip::new(cfg.vip_config()),
            rng: fastrand::Rng::with_seed(seed),
            sink: None,
            cfg,
            siblings: Vec::new(),
            cs_whole: None,
            pending: None,
            armed: Instant::now(),
            now: Instant::now(),
            permanent: Default::default(),
        }
    }

    /// Adds a face (in-process faces are added this way before `run`).
    pub fn add_face(&mut self, h: FaceHandle) {
        tracing::info!(face = h.info.id, remote = %h.info.remote_uri, local = %h.info.local_uri, "face up");
        if let Some(p) = self.permanent.get_mut(&h.info.id) {
            if p.ever_up {
                p.state.redials.fetch_add(1, Ordering::Relaxed);
                tracing::info!(face = h.info.id, remote = %h.info.remote_uri, "permanent face re-dialled: its routes work again");
            }
            p.up = true;
            p.ever_up = true;
        }
        if let Some(sink) = &self.sink {
            h.set_sink(sink.clone());
        }
        self.faces.insert(h.info.id, h);
    }

    /// A permanent face to `target` (a static route's face): TCP and Unix
    /// faces are dialled at once and re-dialled with back-off whenever they
    /// close; a UDP face is made through the UDP listener (it has no
    /// connection to lose). Returns the face id to register routes on; the
    /// same id again for a target already known.
    pub fn add_permanent_face(&mut self, target: Target) -> Result<FaceId, String> {
        if let Some((id, _)) = self.permanent.iter().find(|(_, p)| p.target == target) {
            return Ok(*id);
        }
        match &target {
            Target::Udp(a) => {
                let Some(ch) = self.ctx.udp.clone() else {
                    return Err(format!(
                        "face {}: no UDP listener (add listen = [\"udp://IP:PORT\"])",
                        target.uri()
                    ));
                };
                let (h, _new) = ch.connect_with(*a, granary_face::Persistency::Permanent, None);
                let id = h.info.id;
                self.permanent.insert(id, PermanentFace::new(target));
                self.add_face(h);
                Ok(id)
            }
            _ => {
                let id = self.ctx.ids.next();
                let p = PermanentFace::new(target.clone());
                crate::permanent::spawn_dialler(
                    id,
                    target,
                    self.ctx.clone(),
                    p.state.clone(),
                    true,
                );
                self.permanent.insert(id, p);
                Ok(id)
            }
        }
    }

    /// A face that just closed: a permanent one that was up keeps its
    /// routes and is re-dialled (true); any other is forgotten (false).
    pub(crate) fn keep_permanent(&mut self, face: FaceId) -> bool {
        let Some(p) = self.permanent.get_mut(&face) else {
            return false;
        };
        let redial = p.ever_up
            && !matches!(p.target, Target::Udp(_))
            && !p.state.cancel.load(Ordering::Acquire);
        if !redial {
            self.permanent.remove(&face);
            return false;
        }
        if p.up {
            p.up = false;
            tracing::warn!(face, remote = %p.target.uri(), "permanent face down: routes kept, re-dialling with back-off");
            crate::permanent::spawn_dialler(
                face,
                p.target.clone(),
                self.ctx.clone(),
                p.state.clone(),
                false,
            );
        }
        true
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

    /// NFD's `NetworkRegionTable::isInProducerRegion`: true when a hint
    /// name is a prefix of (or equal to) a region name.
    pub(crate) fn in_producer_region(&self, hint: &[Name]) -> bool {
        self.cfg
            .network_region
            .iter()
            .any(|r| hint.iter().any(|h| h.is_prefix_of(r)))
    }

    /// Sharded, control shard: publishes its PIT size for the dispatcher.
    pub(crate) fn publish_pending(&self) {
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

    pub(crate) fn scope(&self, face: FaceId) -> Scope {
        self.faces
            .get(&face)
            .map_or(Scope::NonLocal, |f| f.info.scope)
    }

    /// True unless `face` is a Unix face whose peer is neither the
    /// forwarder's own user nor root.
    pub(crate) fn face_of_owner(&self, face: FaceId) -> bool {
        match self.faces.get(&face).and_then(|f| f.info.peer_uid) {
            None => true,
            Some(uid) => uid == 0 || uid == rustix::process::geteuid().as_raw(),
        }
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

    pub(crate) fn send_nack(
        &self,
        face: FaceId,
        i: &Interest,
        reason: u64,
        pit_token: Option<Bytes>,
    ) {
        self.send_nack_wire(face, i.wire().clone(), reason, pit_token);
    }

    pub(crate) fn send_nack_wire(
        &self,
        face: FaceId,
        wire: Bytes,
        reason: u64,
        pit_token: Option<Bytes>,
    ) {
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
}

impl Managed for Forwarder {
    fn state(&self) -> &MgmtState {
        &self.mgmt
    }

    fn state_mut(&mut self) -> &mut MgmtState {
        &mut self.mgmt
    }

    fn faces(&self) -> &FaceMap {
        &self.faces
    }

    fn vip_face_capacity(&self, face: FaceId) -> Option<u64> {
        Forwarder::vip_face_capacity(self, face)
    }

    fn set_face_rate(&mut self, face: FaceId, rate_bps: Option<u64>) -> bool {
        // Sharded, VIP is unavailable (as its strategy and CS policy).
        if Managed::sharded(self) {
            return false;
        }
        self.vip.set_face_rate(face, rate_bps);
        true
    }

    fn face_rate(&self, face: FaceId) -> Option<u64> {
        self.vip.face_rate(face)
    }

    fn add_face(&mut self, h: FaceHandle) {
        Forwarder::add_face(self, h);
    }

    fn remove_face(&mut self, id: FaceId) -> Option<FaceHandle> {
        if let Some(p) = self.permanent.remove(&id) {
            p.state.cancel.store(true, Ordering::Release);
            if !self.faces.contains_key(&id) {
                // Down: no handle to close, only its routes to drop.
                self.tables.remove_face(id);
                return None;
            }
        }
        let h = self.faces.remove(&id)?;
        self.tables.remove_face(id);
        self.stats.closed_faces.add(&h.counters);
        Some(h)
    }

    fn tables(&self) -> &Tables {
        &self.tables
    }

    fn tables_mut(&mut self) -> &mut Tables {
        &mut self.tables
    }

    fn strategies(&self) -> &StrategyChoice {
        &self.strategies
    }

    fn strategies_mut(&mut self) -> &mut StrategyChoice {
        &mut self.strategies
    }

    fn sharded(&self) -> bool {
        !self.siblings.is_empty()
    }

    fn cs_config(&self) -> &CsConfig {
        self.cs_config_whole()
    }

    fn set_cs_config(&mut self, cfg: CsConfig) {
        self.set_cs_config_whole(cfg);
    }

    fn cs_erase(&mut self, prefix: &Name, limit: usize) -> usize {
        let mut n = self.cs.erase_prefix(prefix, limit);
        for s in &self.siblings {
            n += s.lock().cs.erase_prefix(prefix, limit - n);
        }
        n
    }

    fn closed_faces(&self) -> ClosedFaces {
        self.stats.closed_faces
    }

    fn totals(&self) -> Totals {
        let one = |f: &Forwarder| Totals {
            pit_entries: f.pit.len() as u64,
            cs_entries: f.cs.len() as u64,
            cs_hits: f.cs.hits(),
            cs_misses: f.cs.misses(),
            satisfied: f.stats.satisfied,
            unsatisfied: f.stats.unsatisfied,
            hinted: f.stats.hinted,
            hint_stripped: f.stats.hint_stripped,
            no_route: f.stats.no_route,
        };
        let mut t = one(self);
        for s in &self.siblings {
            let u = one(&s.lock());
            t.pit_entries += u.pit_entries;
            t.cs_entries += u.cs_entries;
            t.cs_hits += u.cs_hits;
            t.cs_misses += u.cs_misses;
            t.satisfied += u.satisfied;
            t.unsatisfied += u.unsatisfied;
            t.hinted += u.hinted;
            t.hint_stripped += u.hint_stripped;
            t.no_route += u.no_route;
        }
        t
    }

    fn face_context(&self) -> &FaceContext {
        &self.ctx
    }

    fn make_permanent(&mut self, id: FaceId, target: Target, up: bool) {
        let mut p = PermanentFace::new(target);
        p.up = up;
        p.ever_up = up;
        self.permanent.insert(id, p);
    }

    fn redial_permanent(&mut self) -> u64 {
        let mut n = 0;
        for p in self.permanent.values().filter(|p| !p.up) {
            p.state.wake.notify_one();
            n += 1;
        }
        n
    }

    fn permanent_faces(&self) -> Vec<crate::mgmt::PermanentStatus> {
        let mut v: Vec<_> = self
            .permanent
            .iter()
            .map(|(id, p)| crate::mgmt::PermanentStatus {
                id: *id,
                uri: p.target.uri(),
                up: p.up,
                failures: p.state.failures.load(Ordering::Relaxed),
                redials: p.state.redials.load(Ordering::Relaxed),
                last_error: p
                    .state
                    .last_error
                    .lock()
                    .map(|e| e.clone())
                    .unwrap_or_default(),
            })
            .collect();
        v.sort_by_key(|p| p.id);
        v
    }

    fn reply(&self, face: FaceId, d: &Data, pit_token: Option<Bytes>) {
        self.send_data(face, d, pit_token, None);
    }

    fn after_command(&mut self) {
        self.sync_shards();
    }
}
