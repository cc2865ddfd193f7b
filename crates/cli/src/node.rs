//! `granary daemon` and the management commands that talk to it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::Bytes;
use clap::{Args, Subcommand};
use granary_app::{Client, Reply};
use granary_forwarder::daemon::{self, DaemonConfig};
use granary_mgmt::{
    decode_dataset, ControlParameters, CsInfo, FaceStatus, FibEntry, GeneralStatus, RibEntry,
    StrategyChoice, TlvElement,
};
use granary_packet::{InterestFields, Name};
use serde::Deserialize;

#[derive(Args)]
pub struct DaemonArgs {
    /// TOML config file (keys: socket, nfd_socket, listen, cs_capacity,
    /// cs_bytes, cs_policy, pit_max, send_queue, max_packet, udp_mtu,
    /// udp_reliability, shards).
    /// Flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Extra listener: tcp://IP:PORT, udp://IP:PORT, ws://IP:PORT (WebSocket
    /// face, one packet per binary message, as NFD's) or unix:///PATH
    /// (repeatable).
    #[arg(long = "listen", value_name = "URI")]
    listen: Vec<String>,
    /// Also listen at /run/nfd/nfd.sock so unmodified NFD apps use this node.
    #[arg(long)]
    nfd_socket: bool,
    /// Content Store capacity in packets.
    #[arg(long)]
    cs_capacity: Option<usize>,
    /// Content Store replacement policy (vip: the objects with the highest
    /// VIP counts, see `granary strategy set PREFIX vip`).
    #[arg(long, value_parser = ["lru", "lfu", "fifo", "random", "vip"])]
    cs_policy: Option<String>,
    /// UDP MTU in bytes (packets above it are fragmented).
    #[arg(long)]
    udp_mtu: Option<usize>,
    /// Forwarding shards. 1 (the default) keeps the PIT and CS behind one
    /// lock, the cheapest per packet. N splits them over N shards by a hash
    /// of each name, so N cores can forward at once: worth it on machines
    /// with 4 or more cores under heavy load. The CS and PIT capacities are
    /// split evenly; the vip strategy and CS policy need 1.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    shards: Option<u32>,
    /// Largest packet accepted or sent, bytes (default 8800, the NDN
    /// interop limit; raise it on Granary-to-Granary paths for larger
    /// segments, e.g. `put --segment-size 32768` needs ≥ 33000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1024..=16_777_216))]
    max_packet: Option<u32>,
    /// NDNLPv2 link reliability on every UDP face (TxSequence/Ack; a lost
    /// fragment is sent again by the hop that lost it, so random loss on a
    /// WAN link no longer halves the consumer's window). On by default:
    /// peers that ignore it (python-ndn, NDNts, NFD without reliability)
    /// are unaffected, as frames are only sent again to a peer that Acks.
    /// `--udp-reliability false` turns it off.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    udp_reliability: Option<bool>,
    /// Do not serve the repository in <data-dir>/repo.
    #[arg(long)]
    no_repo: bool,
    /// Scrub the repository in the background at no more than this many
    /// MB/s (one thread): every stored version is re-hashed against the
    /// hashes taken at ingest and its manifest, then again after an hour;
    /// damage is logged and recorded as `granary repo scrub` does. Off by
    /// default (0): the serve-time check already refuses bad segments
    /// signed per packet or with DigestSha256; this finds damage in what is
    /// not served, and under NullSignature segments.
    #[arg(long, value_name = "MB_PER_S", default_value_t = 0)]
    scrub_rate: u64,
    /// Do not serve the science catalog (it is served under
    /// /localhost/granary/catalog and <node prefix>/catalog).
    #[arg(long)]
    no_catalog: bool,
    /// DRS rules and attribute trust for what the daemon catalogs.
    #[command(flatten)]
    catalog: crate::science::CatalogArgs,
    /// The HTTP gateway.
    #[command(flatten)]
    http: crate::http::HttpArgs,
}

/// The node's prefix, from `<data-dir>/node.toml` (`node_prefix = "/…"`);
/// at first use it is made from the host name and a random suffix
/// (`/granary/<host>-<4 hex digits>`) and written there, so it stays the same.
pub fn node_prefix(data_dir: &Path) -> anyhow::Result<Name> {
    let file = data_dir.join("node.toml");
    if let Ok(text) = std::fs::read_to_string(&file) {
        let v: toml::Value =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        if let Some(p) = v.get("node_prefix").and_then(|p| p.as_str()) {
            return Name::from_uri(p)
                .map_err(|e| anyhow::anyhow!("{}: node_prefix: {e}", file.display()));
        }
    }
    let host: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let host = if host.is_empty() {
        "node".to_string()
    } else {
        host
    };
    let mut r = [0u8; 2];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut r))
            .map_err(|e| anyhow::anyhow!("/dev/urandom: {e}"))?;
    }
    let uri = format!("/granary/{host}-{:02x}{:02x}", r[0], r[1]);
    std::fs::create_dir_all(data_dir)?;
    granary_store::write_atomic(&file, format!("node_prefix = \"{uri}\"\n").as_bytes())?;
    Name::from_uri(&uri).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn socket_path(socket: Option<&PathBuf>, data_dir: &Path) -> PathBuf {
    socket
        .cloned()
        .unwrap_or_else(|| data_dir.join("granary.sock"))
}

pub fn run_daemon(args: DaemonArgs, socket: PathBuf, data_dir: &Path) -> anyhow::Result<()> {
    let mut http_file = crate::http::HttpArgs::default();
    let mut cfg = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
            let mut t = toml::from_str::<toml::Table>(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            http_file = crate::http::take_config_keys(&mut t)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            DaemonConfig::deserialize(t).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => DaemonConfig::default(),
    };
    let http = crate::http::settings(&args.http, &http_file)?;
    if args.config.is_none() || cfg.socket == DaemonConfig::default().socket {
        cfg.socket = socket;
    }
    cfg.listen.extend(args.listen);
    if args.nfd_socket {
        cfg.nfd_socket = Some(PathBuf::from(daemon::NFD_SOCKET));
    }
    if let Some(c) = args.cs_capacity {
        cfg.cs_capacity = c;
    }
    if let Some(p) = args.cs_policy {
        cfg.cs_policy = p;
    }
    if let Some(m) = args.udp_mtu {
        cfg.udp_mtu = m;
    }
    if let Some(n) = args.shards {
        cfg.shards = n as usize;
    }
    if let Some(on) = args.udp_reliability {
        cfg.udp_reliability = on;
    }
    if let Some(m) = args.max_packet {
        cfg.max_packet = m as usize;
    }
    if cfg.trust_dir.is_none() {
        cfg.trust_dir = Some(data_dir.join("keychain").join("trust"));
    }
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", data_dir.display()))?;
    let repo_dir = data_dir.join("repo");
    let no_repo = args.no_repo;
    // The catalog, opened before the runtime starts (its in-memory index is
    // loaded here); a catalog that cannot be opened costs the search, not the node.
    let indexer = if args.no_catalog {
        None
    } else {
        let s = crate::science::settings(data_dir, crate::science::catalog_spec(), &args.catalog);
        match granary_search::Indexer::open(data_dir, &s) {
            Ok(ix) => Some(std::sync::Arc::new(ix)),
            Err(e) => {
                tracing::warn!("catalog not served: {e}");
                None
            }
        }
    };
    let node = node_prefix(data_dir)?;
    let gateway_dir = data_dir.to_path_buf();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let running = daemon::start(cfg).await.map_err(|e| anyhow::anyhow!(e))?;
        if !no_repo {
            attach_repo(&running, &repo_dir, indexer.clone(), args.scrub_rate).await?;
        }
        if let Some(ix) = &indexer {
            attach_catalog(&running, ix.clone(), &node).await?;
            println!(
                "catalog {}",
                granary_search::protocol::catalog_prefix(&node)
            );
        }
        let _gateway = crate::http::start(
            &http,
            &running,
            &gateway_dir,
            indexer.as_ref().map(|ix| ix.catalog.clone()),
        )
        .await;
        for s in &running.sockets {
            println!("listening unix://{}", s.display());
        }
        for a in &running.tcp {
            println!("listening tcp://{a}");
        }
        if let Some(a) = running.udp {
            println!("listening udp://{a}");
        }
        for a in &running.ws {
            println!("listening ws://{a}");
        }
        println!("ready");
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
        tracing::info!("shutting down");
        running.stop().await;
        Ok::<_, anyhow::Error>(())
    })
}

/// Serves `<data-dir>/repo` through an in-process face; its route `/` does
/// not propagate to longer prefixes (so other producers win), and unknown
/// names are Nacked at once.
async fn attach_repo(
    running: &daemon::Running,
    dir: &Path,
    indexer: Option<std::sync::Arc<granary_search::Indexer>>,
    scrub_mb_per_s: u64,
) -> anyhow::Result<()> {
    let store = granary_store::Store::open(dir)?;
    let keychain = dir
        .parent()
        .and_then(|d| granary_security::KeyChain::open(d.join("keychain")).ok());
    // Renames a killed `mv` left half done are completed before anything
    // is served (the catalog's start-up check then follows the files).
    let renamed = match &keychain {
        Some(kc) => granary_repo::rename::recover(&store, kc),
        None => Vec::new(),
    };
    let app = in_process_face(running, "repo").await?;
    // Names no other producer claims (cost 100, no ChildInherit).
    let route = granary_mgmt::values::route_flags::CHILD_INHERIT;
    let cmds = [
        ("rib", "register", static_route(Name::new(), 0, 100)),
        // Hash requests from neighbours (one hop, /localhop), answered from
        // the hash index. A high cost: this node's own apps reach its
        // neighbours first (their routes cost less) and the repository only
        // when there is no other route; a neighbour's request may go only to
        // local faces, so it reaches the repository whatever the cost.
        (
            "rib",
            "register",
            static_route(
                Name::from_uri(granary_repo::HASH_PREFIX)?,
                route,
                granary_repo::HASH_ROUTE_COST,
            ),
        ),
        // The node's own hash lookups (dedup fetch asks its store first;
        // ChildInherit, the register default it had before).
        (
            "rib",
            "register",
            static_route(Name::from_uri(granary_repo::LOCAL_HASH_PREFIX)?, route, 0),
        ),
        // Hash requests go to every neighbour with a route and to the own
        // repository at once (multicast): the own repository's Nack must not
        // end a request a neighbour could answer.
        ("strategy-choice", "set", {
            let mut p = ControlParameters::new();
            p.name = Some(Name::from_uri(granary_repo::HASH_PREFIX)?);
            p.strategy = Some(granary_forwarder::strategy::Strategy::Multicast.name());
            p
        }),
    ];
    for (module, verb, p) in cmds {
        let cmd = granary_mgmt::make_command(&nfd(), module, verb, &p).encode();
        app.send(granary_face::NetPacket::Interest(cmd), Default::default())
            .await;
    }
    tracing::info!(
        "repository {} ({:?} metadata)",
        dir.display(),
        store.backend()
    );
    let mut repo = granary_repo::Repo::new(store, keychain);
    for (o, n) in renamed {
        tracing::warn!("completed an interrupted rename of {o} to {n}");
        // Gone from here: a copy of it is not kept back under the old name.
        repo.removed_here(&o, None);
    }
    // A publisher key made by the daemon's put is named after the node.
    if let Some(id) = dir
        .parent()
        .and_then(|d| crate::key::publisher_identity(d).ok())
    {
        repo = repo.with_publisher(id);
    }
    if let Some(ix) = indexer {
        catalog_keeper(ix.clone(), dir)?;
        repo = repo.with_observer(ix);
    }
    let repo = std::sync::Arc::new(repo);
    if scrub_mb_per_s > 0 {
        // Its own store handle: the scrub never waits on the serving path.
        let store = granary_store::Store::open(dir)?;
        let rate = scrub_mb_per_s.saturating_mul(1_000_000);
        std::thread::Builder::new()
            .name("scrub".into())
            .spawn(move || {
                granary_repo::scrub::background(&store, rate, std::time::Duration::from_secs(3600))
            })?;
        tracing::info!("background scrub at up to {scrub_mb_per_s} MB/s");
    }
    tokio::spawn(granary_repo::serve(repo, app));
    Ok(())
}

/// How often the catalog keeper looks for queued changes to apply.
const CATALOG_QUEUE_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps the catalog with the files, on a thread of its own: first a check
/// of files against catalog, repairing (a publish killed between its files
/// and its catalog entry, a catalog restored from an old backup), then, for
/// as long as the daemon runs, the changes queued while the catalog was
/// unavailable, applied as soon as it takes them. A check the catalog could
/// not answer is tried again until it can.
fn catalog_keeper(ix: std::sync::Arc<granary_search::Indexer>, dir: &Path) -> anyhow::Result<()> {
    let store = granary_store::Store::open(dir)?;
    std::thread::Builder::new()
        .name("catalog-keeper".into())
        .spawn(move || {
            let mut checked = false;
            let mut last_warning = String::new();
            loop {
                if !checked {
                    let t = std::time::Instant::now();
                    match ix.check(&store, true) {
                        Ok(c) => {
                            checked = true;
                            let msg = format!(
                                "catalog check: {} stored version(s), {} catalogued, {} missing and {} without a file repaired, {} queued change(s) applied in {:.2} s",
                                c.files,
                                c.catalogued,
                                c.missing.len(),
                                c.extra.len(),
                                c.queue_applied,
                                t.elapsed().as_secs_f64()
                            );
                            if c.missing.is_empty() && c.extra.is_empty() {
                                tracing::info!("{msg}");
                            } else {
                                tracing::warn!("{msg}");
                            }
                        }
                        Err(e) => {
                            if e != last_warning {
                                tracing::warn!("catalog check not done yet: {e}; retrying");
                                last_warning = e;
                            }
                        }
                    }
                } else if !ix.queue.is_empty() {
                    ix.drain(&store);
                }
                std::thread::sleep(CATALOG_QUEUE_PERIOD);
            }
        })?;
    Ok(())
}

/// A new in-process face of the forwarder, announced before it is used.
async fn in_process_face(
    running: &daemon::Running,
    name: &str,
) -> anyhow::Result<granary_face::internal::AppFace> {
    let (handle, app) = granary_face::internal::pair(
        running.ids.next(),
        name,
        &running.limits,
        running.events.clone(),
    );
    running
        .events
        .send(granary_face::FaceEvent::Created(handle))
        .await
        .map_err(|_| anyhow::anyhow!("forwarder stopped"))?;
    Ok(app)
}

/// Serves the catalog on an in-process face under
/// `/localhost/granary/catalog` and `<node prefix>/catalog`.
async fn attach_catalog(
    running: &daemon::Running,
    ix: std::sync::Arc<granary_search::Indexer>,
    node: &Name,
) -> anyhow::Result<()> {
    let app = in_process_face(running, "catalog").await?;
    let service = granary_search::service::Service::new(
        ix.catalog.clone(),
        vec![
            Name::from_uri(granary_search::protocol::LOCAL_PREFIX)?,
            granary_search::protocol::catalog_prefix(node),
        ],
    );
    service.register(&app).await;
    tokio::spawn(service.run(app));
    Ok(())
}

#[derive(Subcommand)]
pub enum FaceCmd {
    /// List faces with counters.
    List,
    /// One face (faces/query with its FaceId, as `nfdc face show`).
    Show {
        /// Face id.
        id: u64,
    },
    /// The listeners (faces/channels, as `nfdc channel list`).
    Channels,
    /// Change a face's congestion marking (faces/update, as `nfdc face
    /// update`): marking is on by default for stream faces (Unix, TCP).
    Update {
        /// Face id.
        id: u64,
        /// Mark Data (NDNLPv2 CongestionMark) when the face's send queue
        /// stays long: on or off.
        #[arg(long, value_parser = ["on", "off"])]
        congestion_marking: Option<String>,
        /// BaseCongestionMarkingInterval in ms (default 100).
        #[arg(long)]
        marking_interval_ms: Option<u64>,
        /// DefaultCongestionThreshold: bytes queued before the face is
        /// congested (default 65536).
        #[arg(long)]
        marking_threshold: Option<u64>,
    },
    /// Create a face to a remote node: tcp4://IP:PORT or udp4://IP:PORT.
    Create {
        /// Remote FaceUri.
        uri: String,
        /// NDNLPv2 link reliability on a UDP face (LpReliabilityEnabled):
        /// lost fragments are retransmitted hop by hop.
        #[arg(long)]
        reliable: bool,
    },
    /// Destroy a face.
    Destroy {
        /// Face id.
        id: u64,
    },
}

#[derive(Subcommand)]
pub enum RouteCmd {
    /// List the RIB (routes) and FIB (next hops).
    List,
    /// Add a route: PREFIX via FACE-ID (or a FaceUri, created if needed).
    Add {
        /// Name prefix.
        prefix: String,
        /// Face id, or tcp4://… / udp4://… (the face is created first).
        face: String,
        /// Cost.
        #[arg(long, default_value_t = 0)]
        cost: u64,
        /// Origin (255 = static).
        #[arg(long, default_value_t = 255)]
        origin: u64,
        /// When FACE is a udp4:// URI: create it with NDNLPv2 link
        /// reliability (see `face create --reliable`).
        #[arg(long)]
        reliable: bool,
    },
    /// Remove a route.
    Remove {
        /// Name prefix.
        prefix: String,
        /// Face id.
        face: u64,
        /// Origin.
        #[arg(long, default_value_t = 255)]
        origin: u64,
    },
}

#[derive(Subcommand)]
pub enum CsCmd {
    /// Content Store capacity, entries, hits and misses.
    Info,
    /// Change capacity or admit/serve.
    Config {
        /// Capacity in packets.
        #[arg(long)]
        capacity: Option<u64>,
        /// Admit new Data (on/off).
        #[arg(long)]
        admit: Option<Toggle>,
        /// Serve from the CS (on/off).
        #[arg(long)]
        serve: Option<Toggle>,
        /// Replacement policy: lru, lfu, fifo, random, or vip (admission and
        /// eviction by VIP cache scores; pair it with `granary strategy set
        /// PREFIX vip`). A Granary extension: sent as the Strategy element
        /// /localhost/granary/cs-policy/NAME, which NFD does not have.
        #[arg(long, value_parser = ["lru", "lfu", "fifo", "random", "vip"])]
        policy: Option<String>,
    },
    /// Drop the cached packets under a prefix (as `nfdc cs erase`).
    Erase {
        /// Name prefix.
        prefix: String,
        /// Erase at most this many packets (default: all under the prefix).
        #[arg(long)]
        count: Option<u64>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Toggle {
    On,
    Off,
}

pub(crate) fn nfd() -> Name {
    Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap_or_default()
}

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

fn rt() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub(crate) async fn dataset(c: &mut Client, uri: &str) -> anyhow::Result<Bytes> {
    Ok(c.dataset(&name(uri)?).await?)
}

pub fn status(socket: &Path) -> anyhow::Result<()> {
    rt()?.block_on(async {
        let mut c = Client::connect(socket).await?;
        let g = GeneralStatus::decode(&dataset(&mut c, "/localhost/nfd/status/general").await?)?;
        let up = (g.current_timestamp.saturating_sub(g.start_timestamp)) / 1000;
        println!("version          {}", g.nfd_version);
        println!("uptime           {up} s");
        println!("fib entries      {}", g.n_fib_entries);
        println!("pit entries      {}", g.n_pit_entries);
        println!("cs entries       {}", g.n_cs_entries);
        println!(
            "interests        in {}  out {}",
            g.n_in_interests, g.n_out_interests
        );
        println!("data             in {}  out {}", g.n_in_data, g.n_out_data);
        println!(
            "nacks            in {}  out {}",
            g.n_in_nacks, g.n_out_nacks
        );
        println!(
            "satisfied        {}  unsatisfied {}",
            g.n_satisfied_interests, g.n_unsatisfied_interests
        );
        Ok(())
    })
}

pub fn face(socket: &Path, cmd: FaceCmd) -> anyhow::Result<()> {
    rt()?.block_on(async {
        let mut c = Client::connect(socket).await?;
        match cmd {
            FaceCmd::Update {
                id,
                congestion_marking,
                marking_interval_ms,
                marking_threshold,
            } => {
                let mut p = ControlParameters::new();
                p.face_id = Some(id);
                if let Some(m) = &congestion_marking {
                    p.set_flag_bit(
                        granary_mgmt::values::face_flags::CONGESTION_MARKING_ENABLED,
                        m == "on",
                        true,
                    );
                }
                p.base_congestion_marking_interval = marking_interval_ms.map(|ms| ms * 1_000_000);
                p.default_congestion_threshold = marking_threshold;
                let r = c.command(&nfd(), "faces", "update", &p).await?;
                let _ = r;
                println!("updated face {id}");
            }
            FaceCmd::Channels => {
                for ch in decode_dataset::<granary_mgmt::ChannelStatus>(
                    &dataset(&mut c, "/localhost/nfd/faces/channels").await?,
                )? {
                    println!("{}", ch.local_uri);
                }
            }
            FaceCmd::Show { .. } | FaceCmd::List => {
                let uri = match &cmd {
                    FaceCmd::Show { id } => {
                        let f = granary_mgmt::FaceQueryFilter {
                            face_id: Some(*id),
                            ..Default::default()
                        };
                        use granary_mgmt::TlvElement;
                        name("/localhost/nfd/faces/query")?
                            .append(&granary_packet::Component::generic(&f.encode()))
                    }
                    _ => name("/localhost/nfd/faces/list")?,
                };
                let faces = decode_dataset::<FaceStatus>(&c.dataset(&uri).await?)?;
                if let (FaceCmd::Show { id }, true) = (&cmd, faces.is_empty()) {
                    anyhow::bail!("no face {id}");
                }
                for f in faces {
                    println!(
                        "faceid={} remote={} local={} scope={} in={}i/{}d/{}n out={}i/{}d/{}n bytes={}/{}{}{}",
                        f.face_id,
                        f.uri,
                        f.local_uri,
                        if f.face_scope == 1 { "local" } else { "non-local" },
                        f.n_in_interests,
                        f.n_in_data,
                        f.n_in_nacks,
                        f.n_out_interests,
                        f.n_out_data,
                        f.n_out_nacks,
                        f.n_in_bytes,
                        f.n_out_bytes,
                        if f.flags & granary_mgmt::values::face_flags::LP_RELIABILITY_ENABLED != 0 {
                            " reliable"
                        } else {
                            ""
                        },
                        if f.flags & granary_mgmt::values::face_flags::CONGESTION_MARKING_ENABLED != 0 {
                            " congestion-marking"
                        } else {
                            ""
                        }
                    );
                }
            }
            FaceCmd::Create { uri, reliable } => {
                let id = create_face(&mut c, &uri, reliable).await?;
                println!("{id}");
            }
            FaceCmd::Destroy { id } => {
                let mut p = ControlParameters::new();
                p.face_id = Some(id);
                c.command(&nfd(), "faces", "destroy", &p).await?;
                println!("destroyed face {id}");
            }
        }
        Ok(())
    })
}

pub(crate) async fn create_face(c: &mut Client, uri: &str, reliable: bool) -> anyhow::Result<u64> {
    let mut p = ControlParameters::new();
    p.uri = Some(uri.to_string());
    if reliable {
        p.set_flag_bit(
            granary_mgmt::values::face_flags::LP_RELIABILITY_ENABLED,
            true,
            true,
        );
    }
    match c.command(&nfd(), "faces", "create", &p).await {
        Ok(r) => r
            .face_id
            .ok_or_else(|| anyhow::anyhow!("no FaceId in the response")),
        Err(granary_app::Error::Refused { code: 409, .. }) => {
            // Already there: look it up.
            let faces =
                decode_dataset::<FaceStatus>(&dataset(c, "/localhost/nfd/faces/list").await?)?;
            let canonical = uri
                .replacen("tcp://", "tcp4://", 1)
                .replacen("udp://", "udp4://", 1);
            faces
                .iter()
                .find(|f| f.uri == canonical)
                .map(|f| f.face_id)
                .ok_or_else(|| anyhow::anyhow!("face exists but is not listed"))
        }
        Err(e) => Err(e.into()),
    }
}

/// ControlParameters of a static route for the repository's face.
fn static_route(name: Name, flags: u64, cost: u64) -> ControlParameters {
    let mut p = ControlParameters::new();
    p.name = Some(name);
    p.flags = Some(flags);
    p.cost = Some(cost);
    p.origin = Some(granary_mgmt::values::route_origin::STATIC);
    p
}

pub fn route(socket: &Path, cmd: RouteCmd) -> anyhow::Result<()> {
    rt()?.block_on(async {
        let mut c = Client::connect(socket).await?;
        match cmd {
            RouteCmd::List => {
                for r in
                    decode_dataset::<RibEntry>(&dataset(&mut c, "/localhost/nfd/rib/list").await?)?
                {
                    for rt in r.routes {
                        println!(
                            "route {} face={} origin={} cost={} flags={}",
                            r.name, rt.face_id, rt.origin, rt.cost, rt.flags
                        );
                    }
                }
                for f in
                    decode_dataset::<FibEntry>(&dataset(&mut c, "/localhost/nfd/fib/list").await?)?
                {
                    let hops: Vec<String> = f
                        .next_hops
                        .iter()
                        .map(|h| format!("{}({})", h.face_id, h.cost))
                        .collect();
                    println!("fib {} nexthops={}", f.name, hops.join(","));
                }
            }
            RouteCmd::Add {
                prefix,
                face,
                cost,
                origin,
                reliable,
            } => {
                let face_id = match face.parse::<u64>() {
                    Ok(id) => id,
                    Err(_) => create_face(&mut c, &face, reliable).await?,
                };
                let mut p = ControlParameters::new();
                p.name = Some(name(&prefix)?);
                p.face_id = Some(face_id);
                p.cost = Some(cost);
                p.origin = Some(origin);
                let r = c.command(&nfd(), "rib", "register", &p).await?;
                println!(
                    "route {} via face {} cost {}",
                    prefix,
                    r.face_id.unwrap_or(face_id),
                    r.cost.unwrap_or(cost)
                );
            }
            RouteCmd::Remove {
                prefix,
                face,
                origin,
            } => {
                let mut p = ControlParameters::new();
                p.name = Some(name(&prefix)?);
                p.face_id = Some(face);
                p.origin = Some(origin);
                c.command(&nfd(), "rib", "unregister", &p).await?;
                println!("removed route {prefix} via face {face}");
            }
        }
        Ok(())
    })
}

pub fn strategy(
    socket: &Path,
    prefix: Option<String>,
    strategy: Option<String>,
) -> anyhow::Result<()> {
    rt()?.block_on(async {
        let mut c = Client::connect(socket).await?;
        if let (Some(prefix), Some(s)) = (prefix, strategy) {
            let full = if s.starts_with('/') {
                s
            } else {
                format!("/localhost/nfd/strategy/{s}")
            };
            let mut p = ControlParameters::new();
            p.name = Some(name(&prefix)?);
            p.strategy = Some(name(&full)?);
            let r = c.command(&nfd(), "strategy-choice", "set", &p).await?;
            println!(
                "{prefix} -> {}",
                r.strategy.map(|s| s.to_string()).unwrap_or(full)
            );
        }
        for s in decode_dataset::<StrategyChoice>(
            &dataset(&mut c, "/localhost/nfd/strategy-choice/list").await?,
        )? {
            println!("{} {}", s.name, s.strategy);
        }
        Ok(())
    })
}

pub fn cs(socket: &Path, cmd: CsCmd) -> anyhow::Result<()> {
    rt()?.block_on(async {
        let mut c = Client::connect(socket).await?;
        if let CsCmd::Erase { prefix, count } = &cmd {
            let mut p = ControlParameters::new();
            p.name = Some(name(prefix)?);
            p.count = *count;
            let r = c.command(&nfd(), "cs", "erase", &p).await?;
            println!("erased {} packet(s) under {prefix}", r.count.unwrap_or(0));
            return Ok(());
        }
        if let CsCmd::Config {
            capacity,
            admit,
            serve,
            policy,
        } = cmd
        {
            let mut p = ControlParameters::new();
            p.capacity = capacity;
            if let Some(pol) = &policy {
                p.strategy = Some(name(&format!(
                    "{}/{pol}",
                    granary_forwarder::vip::CS_POLICY_PREFIX
                ))?);
            }
            let (mut flags, mut mask) = (0, 0);
            if let Some(a) = admit {
                mask |= 1;
                flags |= matches!(a, Toggle::On) as u64;
            }
            if let Some(s) = serve {
                mask |= 2;
                flags |= (matches!(s, Toggle::On) as u64) << 1;
            }
            if mask != 0 {
                p.flags = Some(flags);
                p.mask = Some(mask);
            }
            let r = c.command(&nfd(), "cs", "config", &p).await?;
            if let Some(s) = r.strategy {
                println!("policy={}", s.to_string().rsplit('/').next().unwrap_or(""));
            }
        }
        let i = CsInfo::decode(&dataset(&mut c, "/localhost/nfd/cs/info").await?)?;
        println!(
            "capacity={} admit={} serve={} entries={} hits={} misses={}",
            i.capacity,
            i.flags & 1 != 0,
            i.flags & 2 != 0,
            i.n_entries,
            i.n_hits,
            i.n_misses
        );
        Ok(())
    })
}

/// `granary peek NAME`: one Interest, print what came back.
pub fn peek(
    socket: &Path,
    uri: &str,
    can_be_prefix: bool,
    must_be_fresh: bool,
    lifetime: u64,
    hex_out: bool,
) -> anyhow::Result<()> {
    rt()?.block_on(async {
        let mut c = Client::connect(socket).await?;
        let mut f = InterestFields::new(name(uri)?);
        f.can_be_prefix = can_be_prefix;
        f.must_be_fresh = must_be_fresh;
        f.lifetime = Some(lifetime);
        let t = Instant::now();
        match c.express(f).await? {
            Reply::Data(d) => {
                eprintln!(
                    "data {} ({} bytes content, {}, {:.1} ms)",
                    d.name(),
                    d.content().len(),
                    granary_packet::types::sig_type::name(d.sig_info().sig_type),
                    t.elapsed().as_secs_f64() * 1e3
                );
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let written = if hex_out {
                    writeln!(out, "{}", hex::encode(d.content()))
                } else {
                    out.write_all(d.content())
                };
                match written.and_then(|_| out.flush()) {
                    // A reader that stopped early (`| head`) is not an error.
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                    _ => Ok(()),
                }
            }
            Reply::Nack(r) => anyhow::bail!(
                "nack {} for {uri}",
                granary_packet::types::nack_reason::name(r)
            ),
        }
    })
}

/// Content of `size` bytes derived from a name (SHA-256 of its URI, repeated).
pub fn synthetic_content(name: &Name, size: usize) -> Vec<u8> {
    let seed = granary_packet::sha256(name.to_string().as_bytes());
    seed.iter().copied().cycle().take(size).collect()
}

/// `granary serve`: register a prefix, answer every Interest under it.
pub fn serve(
    socket: &Path,
    prefix: &str,
    size: usize,
    freshness: u64,
    delay_ms: u64,
) -> anyhow::Result<()> {
    let prefix = name(prefix)?;
    rt()?.block_on(async move {
        let mut c = Client::connect(socket).await?;
        c.register(&prefix).await?;
        println!("ready");
        let mut served = 0u64;
        c.serve(|i| {
            if delay_ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            }
            served += 1;
            println!("served {} #{served}", i.name);
            let b = granary_packet::DataBuilder::new(i.name.clone())
                .content(synthetic_content(&i.name, size))
                .freshness_period(freshness);
            b.sign_with(32, |m| {
                Ok::<_, std::convert::Infallible>(Bytes::copy_from_slice(&granary_packet::sha256(
                    m,
                )))
            })
            .ok()
        })
        .await?;
        Ok(())
    })
}
