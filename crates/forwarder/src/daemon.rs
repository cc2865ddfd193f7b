//! `granary daemon`: binds the listeners, starts the forwarder, stops cleanly.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use granary_face::udp::{UdpChannel, DEFAULT_MTU};
use granary_face::{FaceIds, FaceLimits};
use serde::Deserialize;
use tokio::sync::{mpsc, Notify};

use crate::cs::{CsConfig, Policy};
use crate::forwarder::{FaceContext, Forwarder, ForwarderConfig};

/// Where NFD listens; `--nfd-socket` also listens here.
pub const NFD_SOCKET: &str = "/run/nfd/nfd.sock";

/// Daemon settings (TOML file and command-line flags share these names).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// Unix socket for local apps and the CLI.
    pub socket: PathBuf,
    /// Also listen at /run/nfd/nfd.sock (or this path) for unmodified NFD apps.
    pub nfd_socket: Option<PathBuf>,
    /// Extra listeners: `tcp://IP:PORT`, `udp://IP:PORT`, `unix:///path`.
    pub listen: Vec<String>,
    /// CS capacity in packets.
    pub cs_capacity: usize,
    /// CS capacity in bytes.
    pub cs_bytes: usize,
    /// CS replacement policy: lru, lfu, fifo, random.
    pub cs_policy: String,
    /// PIT capacity in entries.
    pub pit_max: usize,
    /// Send queue per face, in packets.
    pub send_queue: usize,
    /// Largest packet accepted (bytes).
    pub max_packet: usize,
    /// UDP MTU (bytes per datagram).
    pub udp_mtu: usize,
    /// NDNLPv2 link reliability on every UDP face (default on: frames are
    /// only sent again to a peer that Acks, so other peers are unaffected).
    pub udp_reliability: bool,
    /// Forwarding shards (1: every table behind one lock; N: the PIT and CS
    /// split over N shards by name hash, so N cores forward at once).
    pub shards: usize,
    /// Directory of trust-anchor certificates (`*.cert`, binary) for
    /// commands from non-local faces; usually `<data-dir>/keychain/trust`.
    pub trust_dir: Option<PathBuf>,
    /// NFD's `tables.network_region`: name prefixes of this node's region.
    /// An Interest whose ForwardingHint names a prefix of one of them is
    /// forwarded by its name, without the hint.
    pub network_region: Vec<String>,
    /// Static routes (`[[route]]`), each on a permanent face that is dialled
    /// at start and re-dialled with back-off when the peer comes back.
    pub route: Vec<StaticRoute>,
    /// VIP slot in milliseconds (10 to 60000; default 100).
    pub vip_slot_ms: u64,
    /// Size of one VIP data object in bytes (default 8192): a face's VIP
    /// capacity is its rate times the slot over 8 × this.
    pub vip_object_bytes: u64,
    /// Prefixes under `/localhost` taken only from the node's own user
    /// (see [`ForwarderConfig::owner_only`]); set by the program that runs
    /// the daemon, not by its configuration file.
    #[serde(skip)]
    pub owner_only: Vec<String>,
}

/// The VIP slot and object size of a daemon configuration, checked.
pub fn vip_params(cfg: &DaemonConfig) -> Result<(Duration, u64), String> {
    if !(10..=60_000).contains(&cfg.vip_slot_ms) {
        return Err(format!(
            "vip_slot_ms: {} is not between 10 and 60000",
            cfg.vip_slot_ms
        ));
    }
    if cfg.vip_object_bytes == 0 {
        return Err("vip_object_bytes must be at least 1".into());
    }
    Ok((Duration::from_millis(cfg.vip_slot_ms), cfg.vip_object_bytes))
}

/// Names from their URIs; an error names the setting (`what`) and the URI.
fn names(uris: &[String], what: &str) -> Result<Vec<granary_packet::Name>, String> {
    uris.iter()
        .map(|u| granary_packet::Name::from_uri(u).map_err(|e| format!("{what} {u:?}: {e}")))
        .collect()
}

/// One `[[route]]` of the config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticRoute {
    /// Name prefix.
    pub prefix: String,
    /// Next hop: `tcp4://IP:PORT`, `udp4://IP:PORT` or `unix:///path`.
    pub face: String,
    /// Route cost (default 0).
    #[serde(default)]
    pub cost: u64,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        let cs = CsConfig::default();
        let limits = FaceLimits::default();
        DaemonConfig {
            socket: PathBuf::from("granary.sock"),
            nfd_socket: None,
            listen: Vec::new(),
            cs_capacity: cs.max_packets,
            cs_bytes: cs.max_bytes,
            cs_policy: cs.policy.to_string(),
            pit_max: ForwarderConfig::default().pit_max,
            send_queue: limits.send_queue,
            max_packet: limits.max_packet,
            udp_mtu: DEFAULT_MTU,
            udp_reliability: true,
            shards: 1,
            trust_dir: None,
            network_region: Vec::new(),
            route: Vec::new(),
            vip_slot_ms: crate::vip::VipConfig::default().period.as_millis() as u64,
            vip_object_bytes: crate::vip::VipConfig::default().object_bytes,
            owner_only: Vec::new(),
        }
    }
}

/// A started daemon.
pub struct Running {
    /// Notify to stop.
    pub shutdown: Arc<Notify>,
    /// The forwarder task.
    pub task: tokio::task::JoinHandle<()>,
    /// Unix sockets listened on.
    pub sockets: Vec<PathBuf>,
    /// TCP addresses bound.
    pub tcp: Vec<SocketAddr>,
    /// UDP address bound.
    pub udp: Option<SocketAddr>,
    /// WebSocket addresses bound (`ws://`).
    pub ws: Vec<SocketAddr>,
    /// Channel to the forwarder, for in-process faces added later.
    pub events: granary_face::EventSender,
    /// Face id allocator.
    pub ids: Arc<FaceIds>,
    /// Face limits in force.
    pub limits: FaceLimits,
}

impl Running {
    /// Stops the forwarder and removes the socket files.
    pub async fn stop(self) {
        self.shutdown.notify_one();
        let _ = self.task.await;
        for s in &self.sockets {
            let _ = std::fs::remove_file(s);
        }
    }
}

fn parse_addr(uri: &str, scheme: &str) -> Result<SocketAddr, String> {
    uri.strip_prefix(scheme)
        .and_then(|rest| rest.trim_end_matches('/').parse().ok())
        .ok_or_else(|| format!("listener {uri:?}: expected {scheme}IP:PORT"))
}

/// Binds every listener and starts the forwarder.
pub async fn start(cfg: DaemonConfig) -> Result<Running, String> {
    let policy: Policy = cfg.cs_policy.parse().map_err(|e| format!("{e}"))?;
    let (vip_period, vip_object_bytes) = vip_params(&cfg)?;
    if !(1..=crate::forwarder::MAX_SHARDS).contains(&cfg.shards) {
        return Err(format!(
            "shards: {} is not between 1 and {}",
            cfg.shards,
            crate::forwarder::MAX_SHARDS
        ));
    }
    if cfg.shards > 1 && policy == Policy::Vip {
        return Err("the vip CS policy needs one forwarding shard (--shards 1)".into());
    }
    let limits = FaceLimits {
        send_queue: cfg.send_queue.max(1),
        max_packet: cfg.max_packet,
        ..Default::default()
    };
    let mut trust_anchors = Vec::new();
    if let Some(dir) = &cfg.trust_dir {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let path = e.path();
                if path.extension().is_some_and(|x| x == "cert") {
                    let bytes =
                        std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    let cert = granary_security::Certificate::decode(bytes.into())
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    tracing::info!("trust anchor {}", cert.name());
                    trust_anchors.push(cert);
                }
            }
        }
    }
    let network_region = names(&cfg.network_region, "network_region")?;
    let owner_only = names(&cfg.owner_only, "owner-only prefix")?;
    // Static routes are checked before anything is bound.
    let mut routes = Vec::new();
    for r in &cfg.route {
        let prefix = granary_packet::Name::from_uri(&r.prefix)
            .map_err(|e| format!("route prefix {:?}: {e}", r.prefix))?;
        let target = crate::permanent::Target::parse(&r.face)
            .map_err(|e| format!("route {}: {e}", r.prefix))?;
        routes.push((prefix, target, r.cost));
    }
    let mut fcfg = ForwarderConfig {
        network_region,
        trust_anchors,
        owner_only,
        cs: CsConfig {
            max_packets: cfg.cs_capacity,
            max_bytes: cfg.cs_bytes,
            policy,
            admit: true,
            serve: true,
        },
        pit_max: cfg.pit_max,
        shards: cfg.shards,
        vip_period,
        vip_object_bytes,
        ..Default::default()
    };
    let (events_tx, events_rx) = mpsc::channel(8192);
    let ids = Arc::new(FaceIds::default());
    let mut sockets = vec![cfg.socket.clone()];
    sockets.extend(cfg.nfd_socket.clone());
    let mut tcp = Vec::new();
    let mut ws = Vec::new();
    let mut udp = None;
    let mut udp_channel = None;
    for l in &cfg.listen {
        if l.starts_with("tcp://") || l.starts_with("tcp4://") || l.starts_with("tcp6://") {
            let scheme = &l[..l.find("://").unwrap_or(0) + 3];
            let a = parse_addr(l, scheme)?;
            let bound =
                granary_face::stream::listen_tcp(a, limits.clone(), events_tx.clone(), ids.clone())
                    .await
                    .map_err(|e| format!("listen {l}: {e}"))?;
            tcp.push(bound);
        } else if l.starts_with("udp://") || l.starts_with("udp4://") || l.starts_with("udp6://") {
            if udp_channel.is_some() {
                return Err("only one UDP listener is supported".into());
            }
            let scheme = &l[..l.find("://").unwrap_or(0) + 3];
            let a = parse_addr(l, scheme)?;
            let ch = UdpChannel::bind(
                a,
                cfg.udp_mtu,
                limits.clone(),
                events_tx.clone(),
                ids.clone(),
            )
            .await
            .map_err(|e| format!("listen {l}: {e}"))?;
            ch.set_reliability(cfg.udp_reliability);
            udp = Some(ch.local_addr());
            udp_channel = Some(ch);
        } else if l.starts_with("ws://") {
            let a = parse_addr(l, "ws://")?;
            let bound =
                granary_face::ws::listen_ws(a, limits.clone(), events_tx.clone(), ids.clone())
                    .await
                    .map_err(|e| format!("listen {l}: {e}"))?;
            ws.push(bound);
        } else if let Some(p) = l.strip_prefix("unix://") {
            sockets.push(PathBuf::from(p));
        } else {
            return Err(format!(
                "listener {l:?}: use tcp://IP:PORT, udp://IP:PORT, ws://IP:PORT or unix:///path"
            ));
        }
    }
    for s in &sockets {
        granary_face::stream::listen_unix(s, limits.clone(), events_tx.clone(), ids.clone())
            .await
            .map_err(|e| format!("listen on {}: {e}", s.display()))?;
    }
    fcfg.channels = sockets
        .iter()
        .map(|s| format!("unix://{}", s.display()))
        .chain(tcp.iter().map(|a| match a {
            std::net::SocketAddr::V4(_) => format!("tcp4://{a}"),
            std::net::SocketAddr::V6(_) => format!("tcp6://{a}"),
        }))
        .chain(udp.iter().map(|a| match a {
            std::net::SocketAddr::V4(_) => format!("udp4://{a}"),
            std::net::SocketAddr::V6(_) => format!("udp6://{a}"),
        }))
        .collect();
    let ctx = FaceContext {
        events: events_tx.clone(),
        ids: ids.clone(),
        limits: limits.clone(),
        udp: udp_channel,
    };
    let mut fw = Forwarder::new(fcfg, ctx);
    for (prefix, target, cost) in routes {
        let uri = target.uri();
        let face = fw.add_permanent_face(target)?;
        tracing::info!("static route {prefix} via permanent face {face} ({uri}) cost {cost}");
        fw.tables.register(
            prefix,
            crate::fib::Route {
                face,
                origin: granary_mgmt::values::route_origin::STATIC,
                cost,
                flags: crate::fib::CHILD_INHERIT,
                expires: None,
            },
        );
    }
    let shutdown = Arc::new(Notify::new());
    let task = tokio::spawn(fw.run(events_rx, shutdown.clone()));
    Ok(Running {
        shutdown,
        task,
        sockets,
        tcp,
        udp,
        ws,
        events: events_tx,
        ids,
        limits,
    })
}

#[cfg(test)]
mod vip_config_tests {
    use super::*;
    use crate::vip::{vips_per_slot, Vip};

    #[test]
    fn vip_slot_and_object_size_set_the_face_capacity() {
        // The paper's setting: 1 s slots, 5 MB objects, a 500 Mb/s link:
        // ⌊500e6 · 1 / (8 · 5e6)⌋ = 12 objects per slot.
        let cfg: DaemonConfig =
            toml::from_str("vip_slot_ms = 1000\nvip_object_bytes = 5000000").unwrap();
        let (period, bytes) = vip_params(&cfg).unwrap();
        assert_eq!((period, bytes), (Duration::from_secs(1), 5_000_000));
        let fcfg = ForwarderConfig {
            vip_period: period,
            vip_object_bytes: bytes,
            ..Default::default()
        };
        let mut v: Vip = Vip::new(fcfg.vip_config());
        v.set_face_rate(7, Some(500_000_000));
        assert_eq!(v.face_capacity(7).0, 12);
        assert_eq!(vips_per_slot(500_000_000, period, bytes), 12);
        // The defaults: 100 ms, 8192 bytes: 40 Mb/s is 61 per slot.
        let d = DaemonConfig::default();
        assert_eq!((d.vip_slot_ms, d.vip_object_bytes), (100, 8192));
        let (p, b) = vip_params(&d).unwrap();
        assert_eq!(vips_per_slot(40_000_000, p, b), 61);
        // Out of range: a clear error.
        for bad in [
            "vip_slot_ms = 0",
            "vip_slot_ms = 60001",
            "vip_object_bytes = 0",
        ] {
            let cfg: DaemonConfig = toml::from_str(bad).unwrap();
            assert!(vip_params(&cfg).is_err(), "{bad}");
        }
    }
}
