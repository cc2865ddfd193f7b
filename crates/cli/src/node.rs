//! `granary daemon`'s flags and the management commands that talk to the
//! running daemon (the daemon itself is `granary_node::daemon`, the requests
//! `granary_node::mgmt`): flags in, answers printed.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use granary_app::Reply;
use granary_node::mgmt;
use granary_packet::{InterestFields, Name};

#[derive(Args)]
pub struct DaemonArgs {
    /// TOML config file (keys: socket, nfd_socket, listen, cs_capacity,
    /// cs_bytes, cs_policy, pit_max, send_queue, max_packet, udp_mtu,
    /// udp_reliability, shards, vip_slot_ms (VIP slot, 10–60000 ms; default
    /// 100), vip_object_bytes (VIP object size z, default 8192: a face's VIP
    /// capacity is ⌊rate · slot / (8 · z)⌋), node_prefix, role (storage,
    /// router or client), node_timeout (seconds of silence before other nodes
    /// take this one for down; default 60), network_region = ["/prefix",
    /// …], static routes as `[[route]]` tables with prefix, face
    /// (tcp4://IP:PORT, udp4://IP:PORT or unix:///path) and cost, each on a
    /// permanent face re-dialled with back-off, replication policies as
    /// `[[replication]]` tables with prefix and replicas (copies on up
    /// storage nodes; needs a postgres:// catalog), replication_period,
    /// replication_retry, replication_attempts, federation_settings ("local":
    /// these federation keys stay this node's; "publish": written to the
    /// catalog's federation settings at start), and the HTTP keys http, https,
    /// tls_cert, tls_key, http_max_conns, http_max_conns_per_client,
    /// http_max_websockets, http_header_timeout, http_idle_timeout,
    /// http_deadline; see docs/federation.md). An unknown key is an error.
    /// Flags override it; the catalog's federation settings fill what neither
    /// gives.
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
    catalog: crate::args::CatalogArgs,
    /// The HTTP gateway.
    #[command(flatten)]
    http: crate::args::HttpArgs,
    /// This node's name prefix (config key `node_prefix`), e.g. /site/a:
    /// its catalog is served as PREFIX/catalog, its publisher key is made
    /// under it, it is registered towards the repository and is in the
    /// node's network region. Kept in <data-dir>/node.toml; made as
    /// /granary/<host>-<hex> at first start when not given.
    #[arg(long, value_name = "PREFIX")]
    node_prefix: Option<String>,
    /// With --node-prefix: change the prefix even though the keychain holds
    /// keys under the old one (what they signed stays signed by them).
    #[arg(long)]
    force: bool,
    /// What this node is for in the federation (config key `role`):
    /// `storage` (the default: holds data, a replica target and source),
    /// `router` or `client` (what they keep is a cache, never counted as a
    /// replica, and they are never offered copies). Kept in the catalog's
    /// row of the node with each heartbeat.
    #[arg(long, value_name = "ROLE", value_parser = ["storage", "router", "client"])]
    role: Option<String>,
}

/// `granary daemon`: the flags handed to `granary_node::daemon`.
pub fn run_daemon(args: DaemonArgs, socket: PathBuf, data_dir: &Path) -> anyhow::Result<()> {
    let opts = granary_node::daemon::Options {
        config: args.config,
        listen: args.listen,
        nfd_socket: args.nfd_socket,
        cs_capacity: args.cs_capacity,
        cs_policy: args.cs_policy,
        udp_mtu: args.udp_mtu,
        shards: args.shards,
        max_packet: args.max_packet,
        udp_reliability: args.udp_reliability,
        no_repo: args.no_repo,
        scrub_rate: args.scrub_rate,
        no_catalog: args.no_catalog,
        trust: args.catalog.trust(),
        rules: args.catalog.rules,
        http: args.http.flags(),
        node_prefix: args.node_prefix,
        force: args.force,
        role: args
            .role
            .as_deref()
            .map(granary_catalog::Role::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--role: {e}"))?,
    };
    granary_node::daemon::run(opts, socket, data_dir)
}

/// `granary strategy`'s flags.
#[derive(clap::Args)]
pub struct StrategyArgs {
    /// `set` to change a choice (omit to list).
    #[arg(value_parser = ["set", "list"])]
    pub action: Option<String>,
    /// Name prefix.
    pub prefix: Option<String>,
    /// Strategy: best-route, multicast, or a full strategy name.
    pub strategy: Option<String>,
}

/// `granary peek`'s flags.
#[derive(clap::Args)]
pub struct PeekArgs {
    /// Name.
    pub name: String,
    /// CanBePrefix.
    #[arg(long)]
    pub prefix: bool,
    /// MustBeFresh.
    #[arg(long)]
    pub fresh: bool,
    /// InterestLifetime in ms.
    #[arg(long, default_value_t = 4000)]
    pub lifetime: u64,
    /// Print the content as hex.
    #[arg(long)]
    pub hex: bool,
    /// ForwardingHint (as ndnpeek's --fwhint; repeatable, in order).
    #[arg(long = "fwhint", value_name = "NAME")]
    pub fwhint: Vec<String>,
    /// ApplicationParameters from FILE (`-`: standard input), as
    /// ndnpeek's --payload; the name gets its ParametersSha256Digest.
    #[arg(short = 'P', long, value_name = "FILE")]
    pub payload: Option<PathBuf>,
}

/// `granary serve`'s flags.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Name prefix to register.
    pub prefix: String,
    /// Content size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// FreshnessPeriod in ms.
    #[arg(long, default_value_t = 10_000)]
    pub freshness: u64,
    /// Wait this long before answering each Interest (ms).
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
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
        /// The face's Data rate (tc units: 100mbit, 500kbit, or bits/s; 0:
        /// measure it), from which VIP derives the face's capacity
        /// (FaceRate, a Granary extension of faces/update).
        #[arg(long, value_parser = parse_face_rate)]
        rate: Option<u64>,
    },
    /// Create a face to a remote node: tcp4://IP:PORT or udp4://IP:PORT.
    Create {
        /// Remote FaceUri.
        uri: String,
        /// NDNLPv2 link reliability on a UDP face (LpReliabilityEnabled):
        /// lost fragments are retransmitted hop by hop.
        #[arg(long)]
        reliable: bool,
        /// Permanent persistency (NFD's): the face is re-dialled with
        /// back-off when the peer goes away, its routes kept meanwhile.
        #[arg(long)]
        permanent: bool,
        /// The face's Data rate for VIP's capacity, as in `face update`.
        #[arg(long, value_parser = parse_face_rate)]
        rate: Option<u64>,
    },
    /// Destroy a face.
    Destroy {
        /// Face id.
        id: u64,
    },
}

/// `--rate` of `face create`/`face update`: tc units or bits/s; 0 = measure.
fn parse_face_rate(s: &str) -> Result<u64, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    granary_testbed::relay::parse_rate(s)
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
        /// When FACE is a URI: create it permanent (re-dialled with
        /// back-off when the peer goes away; see `face create --permanent`).
        #[arg(long)]
        permanent: bool,
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

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn status(socket: &Path) -> anyhow::Result<()> {
    let (g, fwd) = mgmt::status(socket)?;
    print!("{}", mgmt::status_text(&g, fwd.as_deref()));
    Ok(())
}

pub fn face(socket: &Path, cmd: FaceCmd) -> anyhow::Result<()> {
    match cmd {
        FaceCmd::Update {
            id,
            congestion_marking,
            marking_interval_ms,
            marking_threshold,
            rate,
        } => {
            let marking = congestion_marking.map(|m| m == "on");
            mgmt::face_update(
                socket,
                id,
                marking,
                marking_interval_ms,
                marking_threshold,
                rate,
            )?;
            println!("updated face {id}");
        }
        FaceCmd::Channels => {
            for uri in mgmt::channels(socket)? {
                println!("{uri}");
            }
        }
        FaceCmd::Show { .. } | FaceCmd::List => {
            let id = match &cmd {
                FaceCmd::Show { id } => Some(*id),
                _ => None,
            };
            let faces = mgmt::faces(socket, id)?;
            if let (Some(id), true) = (id, faces.is_empty()) {
                anyhow::bail!("no face {id}");
            }
            for (f, down) in faces {
                println!("{}", mgmt::face_line(&f, down.as_deref()));
            }
        }
        FaceCmd::Create {
            uri,
            reliable,
            permanent,
            rate,
        } => println!(
            "{}",
            mgmt::face_create(socket, &uri, reliable, permanent, rate)?
        ),
        FaceCmd::Destroy { id } => {
            mgmt::face_destroy(socket, id)?;
            println!("destroyed face {id}");
        }
    }
    Ok(())
}

pub fn route(socket: &Path, cmd: RouteCmd) -> anyhow::Result<()> {
    match cmd {
        RouteCmd::List => {
            let (rib, fib) = mgmt::routes(socket)?;
            print!("{}", mgmt::routes_text(&rib, &fib));
        }
        RouteCmd::Add {
            prefix,
            face,
            cost,
            origin,
            reliable,
            permanent,
        } => {
            let (face_id, cost) =
                mgmt::route_add(socket, &prefix, &face, cost, origin, reliable, permanent)?;
            println!("route {prefix} via face {face_id} cost {cost}");
        }
        RouteCmd::Remove {
            prefix,
            face,
            origin,
        } => {
            mgmt::route_remove(socket, &prefix, face, origin)?;
            println!("removed route {prefix} via face {face}");
        }
    }
    Ok(())
}

pub fn strategy(socket: &Path, a: StrategyArgs) -> anyhow::Result<()> {
    if a.action.as_deref() == Some("set") && (a.prefix.is_none() || a.strategy.is_none()) {
        anyhow::bail!("usage: granary strategy set PREFIX STRATEGY");
    }
    let set = a.prefix.as_deref().zip(a.strategy.as_deref());
    let (chosen, list) = mgmt::strategy(socket, set)?;
    if let (Some((prefix, _)), Some(s)) = (set, chosen) {
        println!("{prefix} -> {s}");
    }
    for s in list {
        println!("{} {}", s.name, s.strategy);
    }
    Ok(())
}

pub fn cs(socket: &Path, cmd: CsCmd) -> anyhow::Result<()> {
    if let CsCmd::Erase { prefix, count } = &cmd {
        let n = mgmt::cs_erase(socket, prefix, *count)?;
        println!("erased {n} packet(s) under {prefix}");
        return Ok(());
    }
    let on = |t: Option<Toggle>| t.map(|t| matches!(t, Toggle::On));
    let (policy, i) = match cmd {
        CsCmd::Config {
            capacity,
            admit,
            serve,
            policy,
        } => mgmt::cs(
            socket,
            capacity,
            on(admit),
            on(serve),
            policy.as_deref(),
            true,
        )?,
        _ => mgmt::cs(socket, None, None, None, None, false)?,
    };
    if let Some(p) = policy {
        println!("policy={p}");
    }
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
}

/// `granary peek NAME`: one Interest, print what came back.
pub fn peek(socket: &Path, a: &PeekArgs) -> anyhow::Result<()> {
    let payload = a
        .payload
        .as_ref()
        .map(|p| crate::args::read_input(Some(p)))
        .transpose()?;
    let mut f = InterestFields::new(name(&a.name)?);
    f.forwarding_hint = granary_node::fetch::hint_names(&a.fwhint)?;
    f.can_be_prefix = a.prefix;
    f.must_be_fresh = a.fresh;
    f.lifetime = Some(a.lifetime);
    f.app_params = payload.map(bytes::Bytes::from);
    match mgmt::peek(socket, f)? {
        (Reply::Data(d), t) => {
            eprintln!(
                "data {} ({} bytes content, {}, {:.1} ms)",
                d.name(),
                d.content().len(),
                granary_packet::types::sig_type::name(d.sig_info().sig_type),
                t.as_secs_f64() * 1e3
            );
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let written = if a.hex {
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
        (Reply::Nack(r), _) => anyhow::bail!(
            "nack {} for {}",
            granary_packet::types::nack_reason::name(r),
            a.name
        ),
    }
}

/// `granary serve`: register a prefix, answer every Interest under it.
pub fn serve(socket: &Path, a: &ServeArgs) -> anyhow::Result<()> {
    let mut served = 0u64;
    mgmt::serve(
        socket,
        &name(&a.prefix)?,
        a.size,
        a.freshness,
        a.delay_ms,
        || println!("ready"),
        |n| {
            served += 1;
            println!("served {n} #{served}");
        },
    )
}
