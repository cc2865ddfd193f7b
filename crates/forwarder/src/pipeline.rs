//! The forwarding pipelines: what a forwarder (one shard of it) does with
//! an Interest, a Data, a Nack, a face event and its timers. `/localhost`
//! and `/localhop` Interests go to management ([`crate::mgmt::handle`])
//! before the PIT; VIP beacons and the VIP strategy and CS policy go
//! through `vip_hooks.rs`.

use std::time::Duration;

use bytes::Bytes;
use granary_face::{FaceEvent, FaceId, LinkFields, NetPacket, OutKind, OutPacket, Scope};
use granary_packet::types::nack_reason;
use granary_packet::{Data, Interest, Name};
use smallvec::SmallVec;
use tokio::time::Instant;

use crate::config::FaceMap;
use crate::forwarder::Forwarder;
use crate::namehash::{hash_name, NameHashes};
use crate::pit::{EntryId, InRecord, OutRecord, PitKey};
use crate::scope::{is_localhop, is_localhost};
use crate::strategy::{Strategy, SUPPRESS_INITIAL, SUPPRESS_MAX};

impl Forwarder {
    /// A face event from the forwarder's channel: a face up or down, a
    /// packet of a face not yet known to the sink, a reply to send.
    pub(crate) fn on_event(&mut self, ev: FaceEvent, now: Instant) {
        self.now = now;
        match ev {
            FaceEvent::Created(h) => self.add_face(h),
            FaceEvent::Closed { face, reason } => {
                tracing::info!(face, "face down: {reason}");
                if let Some(h) = self.faces.remove(&face) {
                    self.stats.closed_faces.add(&h.counters);
                }
                if !self.keep_permanent(face) {
                    self.tables.remove_face(face);
                }
            }
            FaceEvent::Packet { face, packet, link } => self.on_packet(face, &packet, &link, now),
            FaceEvent::Send { face, packet } => {
                if let Some(h) = self.faces.get(&face) {
                    h.send(packet);
                }
            }
        }
    }

    /// One packet from a known face, into its pipeline.
    pub(crate) fn on_packet(
        &mut self,
        face: FaceId,
        packet: &NetPacket,
        link: &LinkFields,
        now: Instant,
    ) {
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
        if !self.cfg.owner_only.is_empty()
            && is_localhost(&i.name)
            && self.cfg.owner_only.iter().any(|p| p.is_prefix_of(&i.name))
            && !self.face_of_owner(face)
        {
            self.stats.not_owner += 1;
            tracing::debug!(name = %i.name, face, "owner-only command from another user: refused");
            self.send_nack(face, i, nack_reason::NO_ROUTE, link.pit_token.clone());
            return;
        }
        if is_localhost(&i.name) || is_localhop(&i.name) {
            if let Some(handled) = crate::mgmt::handle(self, face, i, link, now) {
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
        // NFD's order: after the dead-nonce list, before the PIT. A hint
        // naming this node's region has done its job: the Interest goes on
        // by name (and without the hint). The PIT ignores hints either way.
        let stripped = !i.forwarding_hint.is_empty() && self.in_producer_region(&i.forwarding_hint);
        if stripped {
            self.stats.hint_stripped += 1;
            tracing::debug!(name = %i.name, hint = ?hint_uris(i), "forwarding hint reached the producer region: stripped");
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
            stripped,
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
        stripped: bool,
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
        // Set when a hint name's FIB entry chose the next hops.
        let mut by_hint: Option<&Name> = None;
        match next_hop {
            Some(f) if self.faces.contains_key(&f) => hops.push(f),
            _ if !stripped && !i.forwarding_hint.is_empty() => {
                // NFD's `Strategy::lookupFib`: the first hint name whose
                // longest-prefix match has next hops (here: next hops on
                // faces that are up); the Interest's own name is not looked up.
                for h in &i.forwarding_hint {
                    if let Some((_, nh)) = self.tables.lookup(h) {
                        hops.extend(
                            nh.iter()
                                .map(|h| h.face)
                                .filter(|f| eligible(*f, &self.faces)),
                        );
                    }
                    if !hops.is_empty() {
                        by_hint = Some(h);
                        break;
                    }
                }
            }
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
        if let Some(h) = by_hint {
            self.stats.hinted += 1;
            tracing::debug!(name = %i.name, hint = %h, faces = ?targets, "forwarded by forwarding hint");
        }
        let wire = if stripped {
            i.without_forwarding_hint(nonce, i.hop_limit.map(|h| h.saturating_sub(1)))
                .wire()
                .clone()
        } else if i.nonce != Some(nonce) || i.hop_limit.is_some() {
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
        if !no_cache
            && self.cs.admits()
            && self.vip_admits(d.name(), self.scope(face) == Scope::Local)
        {
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

    pub(crate) fn on_timers(&mut self, now: Instant) {
        self.now = now;
        for e in self.pit.expired(now) {
            self.stats.unsatisfied += 1;
            let hash = hash_name(&e.key.name);
            for r in &e.out_records {
                self.dnl.add_hashed(hash, r.nonce, now);
            }
        }
    }
}

/// A hint's names as URIs (for log lines).
fn hint_uris(i: &Interest) -> Vec<String> {
    i.forwarding_hint.iter().map(|n| n.to_string()).collect()
}
