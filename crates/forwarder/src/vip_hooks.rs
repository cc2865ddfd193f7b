//! The forwarder's side of VIP ([`crate::vip`] is the pure bookkeeping):
//! beacons in and out, the `vip` strategy's choice, the `vip` CS policy's
//! admission, and the period tick. The pipelines only call in, one line
//! each.

use std::collections::HashMap;

use granary_face::{FaceId, OutKind, OutPacket, Scope};
use granary_packet::{Interest, InterestFields, Name};

use crate::cs::Policy;
use crate::forwarder::Forwarder;
use crate::strategy::Strategy;
use crate::vip::TickInput;

impl Forwarder {
    /// Whether VIP is in use: a prefix with the `vip` strategy or the
    /// `vip` CS policy.
    fn vip_enabled(&self) -> bool {
        self.cs.config().policy == Policy::Vip
            || self.strategies.iter().any(|(_, s)| *s == Strategy::Vip)
    }

    fn is_local_face(&self, f: FaceId) -> bool {
        self.faces
            .get(&f)
            .is_some_and(|h| h.info.scope == Scope::Local)
    }

    /// FIB next hops of a name: (face, is_local).
    fn vip_hops(&self, name: &Name) -> Vec<(FaceId, bool)> {
        self.tables
            .lookup(name)
            .map(|(_, hops)| {
                hops.iter()
                    .map(|h| (h.face, self.is_local_face(h.face)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The VIP strategy's pick among eligible next hops `hops`.
    pub(crate) fn vip_choose(&self, name: &Name, hops: &[FaceId]) -> Option<FaceId> {
        let with_scope: Vec<(FaceId, bool)> =
            hops.iter().map(|f| (*f, self.is_local_face(*f))).collect();
        self.vip.choose(name, &with_scope)
    }

    /// A face's VIP capacity (VIPs per period) while VIP is in use.
    pub(crate) fn vip_face_capacity(&self, face: FaceId) -> Option<u64> {
        (self.vip.active() && !self.is_local_face(face)).then(|| self.vip.face_capacity(face).0)
    }

    /// Whether the CS admits this Data: always, unless the policy is `vip`;
    /// then VIP's admission rule decides ([`crate::vip::Vip::admit`]), and
    /// the object it displaces is erased first. `local`: the Data comes
    /// from a local producer (this node's own object, never cached by VIP).
    pub(crate) fn vip_admits(&mut self, name: &Name, local: bool) -> bool {
        if self.cs.config().policy != Policy::Vip {
            return true;
        }
        let (admit, victim) = self.vip.admit(name, self.cs.config().max_packets, local);
        if let Some(v) = victim {
            self.cs.erase_prefix(&v, usize::MAX);
        }
        admit
    }

    /// A beacon from a neighbour (never forwarded, never answered).
    pub(crate) fn on_vip_beacon(&mut self, face: FaceId, i: &Interest, now: tokio::time::Instant) {
        if self.is_local_face(face) || !self.vip_enabled() {
            return;
        }
        let Some(p) = i.app_params.clone() else {
            return;
        };
        if let Err(e) = self.vip.on_beacon(face, &p, now.into_std()) {
            tracing::debug!(face, "bad VIP beacon: {e}");
        }
    }

    /// One VIP period: update counts and cache set, erase evicted objects
    /// from the CS, send beacons.
    pub(crate) fn vip_period(&mut self, now: tokio::time::Instant) {
        let active = self.vip_enabled();
        self.vip.set_active(active);
        if !active {
            return;
        }
        let neighbours: Vec<FaceId> = self
            .faces
            .iter()
            .filter(|(_, h)| h.info.scope == Scope::NonLocal)
            .map(|(f, _)| *f)
            .collect();
        // Measured link rates: the bytes each neighbour face received.
        for f in &neighbours {
            if let Some(h) = self.faces.get(f) {
                let b = h
                    .counters
                    .in_bytes
                    .load(std::sync::atomic::Ordering::Relaxed);
                self.vip.observe_face_bytes(*f, b);
            }
        }
        let hops: HashMap<Name, Vec<(FaceId, bool)>> = self
            .vip
            .objects()
            .map(|k| (k.clone(), self.vip_hops(k)))
            .collect();
        let upstreams = |k: &Name, out: &mut Vec<FaceId>| {
            out.extend(
                hops.get(k)
                    .into_iter()
                    .flatten()
                    .filter(|(_, local)| !local)
                    .map(|(f, _)| *f),
            )
        };
        let is_source = |k: &Name| {
            hops.get(k)
                .is_some_and(|h| h.iter().any(|(_, local)| *local))
        };
        let cache_slots = if self.cs.config().policy == Policy::Vip {
            self.cs.config().max_packets
        } else {
            0
        };
        let beacons = self.vip.tick(
            now.into_std(),
            &TickInput {
                neighbours: &neighbours,
                upstreams: &upstreams,
                is_source: &is_source,
                cache_slots,
            },
        );
        let name = self.vip.beacon_name();
        let seq = self.vip.seq();
        for obj in self.vip.take_evicted() {
            self.cs.erase_prefix(&obj, usize::MAX);
        }
        let cs = &self.cs;
        self.vip.retain_held(|k| cs.holds_prefix(k));
        for (face, params) in beacons {
            let mut f = InterestFields::new(name.clone());
            f.app_params = Some(params.encode());
            f.nonce = Some((seq as u32) ^ (face as u32).rotate_left(16));
            f.lifetime = Some(self.vip.config().period.as_millis() as u64);
            f.hop_limit = Some(1);
            let i = f.encode();
            self.send(
                face,
                OutPacket {
                    wire: i.wire().clone(),
                    kind: OutKind::Interest,
                    pit_token: None,
                    congestion_mark: None,
                },
            );
        }
    }
}
