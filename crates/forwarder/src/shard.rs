//! Sharding: the cell one shard's state lives in ([`Shard`]: a lock and a
//! way to wake its timer loop), the dispatcher that sorts a face's packets
//! by shard ([`Dispatch`]), and how the CS capacity is split over shards.
//!
//! Nothing here knows the forwarder's pipelines: a shard is any
//! [`PacketSink`], its state any `T`. The forwarder builds its shards and
//! runs them in `run.rs`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use granary_face::{FaceId, LinkFields, NetPacket, PacketSink};
use granary_packet::{Interest, Name};
use tokio::sync::Notify;

use crate::cs::CsConfig;
use crate::scope::is_local_name;

/// One shard's state behind its lock, and a way to wake its timer loop
/// when a face's packets armed an earlier timer.
pub(crate) struct Shard<T> {
    state: std::sync::Mutex<T>,
    /// Notified when the shard's timer loop must look at its timers again.
    pub(crate) wake: Notify,
}

impl<T> Shard<T> {
    pub(crate) fn new(state: T) -> Shard<T> {
        Shard {
            state: std::sync::Mutex::new(state),
            wake: Notify::new(),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, T> {
        // A panic while forwarding leaves the tables as consistent as it
        // found them between packets; keep forwarding.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
pub(crate) struct Dispatch<S> {
    /// The control shard.
    pub(crate) control: Arc<S>,
    /// The data shards.
    pub(crate) data: Vec<Arc<S>>,
    /// The control shard's PIT size, which it publishes (see
    /// `Forwarder::publish_pending`): while it is not 0, Data go there too.
    pub(crate) pending: Arc<AtomicUsize>,
}

type Batch = Vec<(NetPacket, LinkFields)>;

thread_local! {
    /// Per-thread scratch for sorting a batch by shard (kept, so sorting
    /// allocates nothing once warm).
    static GROUPS: RefCell<Vec<Batch>> = const { RefCell::new(Vec::new()) };
}

impl<S: PacketSink> Dispatch<S> {
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

    fn shard(&self, group: usize) -> &S {
        if group == 0 {
            &self.control
        } else {
            &self.data[group - 1]
        }
    }
}

impl<S: PacketSink> PacketSink for Dispatch<S> {
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
pub(crate) fn cs_share(whole: &CsConfig, n: usize) -> CsConfig {
    let mut c = whole.clone();
    c.max_packets = whole.max_packets.div_ceil(n);
    c.max_bytes = whole.max_bytes.div_ceil(n);
    c
}
