//! What a forwarder is made with: its configuration ([`ForwarderConfig`]),
//! what it needs to create faces on command ([`FaceContext`]), and the type
//! of its face table.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use granary_face::udp::UdpChannel;
use granary_face::{EventSender, FaceHandle, FaceId, FaceIds, FaceLimits};

use crate::cs::CsConfig;

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
    /// hash of the name, so N cores forward at once (see `Forwarder::run`).
    pub shards: usize,
    /// The network region (NFD's `tables.network_region`): an Interest
    /// whose ForwardingHint names a prefix of one of these has reached its
    /// producer's region, and its hint is stripped (it is forwarded by name).
    pub network_region: Vec<granary_packet::Name>,
    /// VIP slot: counts are exchanged and updated once per period.
    pub vip_period: Duration,
    /// Size of one VIP data object in bytes (the paper's z): a face's VIP
    /// capacity is `max(1, ⌊rate · vip_period / (8 · vip_object_bytes)⌋)`.
    pub vip_object_bytes: u64,
    /// Prefixes under `/localhost` whose Interests are taken only from the
    /// forwarder's own user (or root): commands that act with the node's
    /// rights, such as the repository's `put` of a file path. An Interest
    /// under one of them from a Unix face whose peer is another user is
    /// answered with Nack NoRoute. Faces without a peer user id (in-process
    /// ones) are the node's own.
    pub owner_only: Vec<granary_packet::Name>,
}

impl ForwarderConfig {
    /// The VIP parameters of this configuration (slot and object size;
    /// the rest as [`crate::vip::VipConfig::default`]).
    pub fn vip_config(&self) -> crate::vip::VipConfig {
        crate::vip::VipConfig {
            period: self.vip_period,
            object_bytes: self.vip_object_bytes.max(1),
            ..Default::default()
        }
    }
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
            network_region: Vec::new(),
            vip_period: crate::vip::VipConfig::default().period,
            vip_object_bytes: crate::vip::VipConfig::default().object_bytes,
            owner_only: Vec::new(),
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

/// The face table, looked up several times per packet. Keyed by foldhash, not
/// `std`'s SipHash (replacing it took 9 % off the daemon's instructions per
/// exchange, callgrind 10,854 → 9,883): face ids are allocated by this node,
/// never taken from the network, so there is no hash flooding to defend
/// against (foldhash is seeded per process anyway).
pub(crate) type FaceMap = HashMap<FaceId, FaceHandle, foldhash::fast::RandomState>;
