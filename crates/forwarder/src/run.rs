//! How a forwarder runs: [`Forwarder::run`], its task (face events,
//! timers, housekeeping, VIP periods), the hand-off of faces' packets to a
//! shard under its lock ([`PacketSink`] for [`Shard<Forwarder>`]), and with
//! `shards > 1` the data shards and their timer loops.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use granary_face::{FaceEvent, FaceId, LinkFields, NetPacket, PacketSink};
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;

use crate::config::MAX_SHARDS;
use crate::forwarder::Forwarder;
use crate::shard::{cs_share, Dispatch, Shard};

/// One shard of a forwarder (the whole of an unsharded one).
type Shared = Shard<Forwarder>;

impl Shared {
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
            // A permanent face keeps its routes while it is re-dialled.
            let keep_routes = fw.permanent.contains_key(&face);
            drop(fw);
            for s in data {
                let mut fw = s.lock();
                fw.faces.remove(&face);
                if !keep_routes {
                    fw.tables.remove_face(face);
                }
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

impl Forwarder {
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
}
