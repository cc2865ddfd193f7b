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
    /// capacity is ⌊rate · slot / (8 · z)⌋), node_prefix, node_timeout (seconds of
    /// silence before other nodes take this one for down; default 60),
    /// network_region = ["/prefix",
    /// …], and static routes as `[[route]]` tables with prefix, face
    /// (tcp4://IP:PORT, udp4://IP:PORT or unix:///path) and cost, each on a
    /// permanent face re-dialled with back-off, and replication policies as
    /// `[[replication]]` tables with prefix and replicas (copies on up
    /// nodes; needs a postgres:// catalog); see docs/federation.md).
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
    // Granary's forwarding counters (an NFD answers no such dataset).
    if let Some(text) = fwd {
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' '))
                .unwrap_or("?")
                .to_string()
        };
        println!(
            "hinted           forwarded {}  stripped in region {}",
            get("hinted_interests"),
            get("hint_stripped")
        );
        println!("no-route nacks   {}", get("no_route_nacks"));
    }
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
                let persistency = match f.face_persistency {
                    granary_mgmt::values::face_persistency::ON_DEMAND => "on-demand",
                    granary_mgmt::values::face_persistency::PERSISTENT => "persistent",
                    granary_mgmt::values::face_persistency::PERMANENT => "permanent",
                    _ => "?",
                };
                let state = match down {
                    Some(why) => format!("down ({why})"),
                    None => "up".to_string(),
                };
                println!(
                    "faceid={} remote={} local={} scope={} persistency={} state={} in={}i/{}d/{}n out={}i/{}d/{}n bytes={}/{}{}{}{}{}",
                    f.face_id,
                    f.uri,
                    f.local_uri,
                    if f.face_scope == 1 { "local" } else { "non-local" },
                    persistency,
                    state,
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
                    },
                    f.n_out_congestion_marks
                        .map(|n| format!(" marked={n}"))
                        .unwrap_or_default(),
                    f.vip_capacity
                        .map(|v| format!(" vip-capacity={v}/period"))
                        .unwrap_or_default()
                );
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
            for r in rib {
                for rt in r.routes {
                    println!(
                        "route {} face={} origin={} cost={} flags={}",
                        r.name, rt.face_id, rt.origin, rt.cost, rt.flags
                    );
                }
            }
            for f in fib {
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

pub fn strategy(
    socket: &Path,
    prefix: Option<String>,
    strategy: Option<String>,
) -> anyhow::Result<()> {
    let set = prefix.as_deref().zip(strategy.as_deref());
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
#[allow(clippy::too_many_arguments)]
pub fn peek(
    socket: &Path,
    uri: &str,
    can_be_prefix: bool,
    must_be_fresh: bool,
    lifetime: u64,
    hex_out: bool,
    fwhint: &[String],
    payload: Option<Vec<u8>>,
) -> anyhow::Result<()> {
    let mut f = InterestFields::new(name(uri)?);
    f.forwarding_hint = granary_node::fetch::hint_names(fwhint)?;
    f.can_be_prefix = can_be_prefix;
    f.must_be_fresh = must_be_fresh;
    f.lifetime = Some(lifetime);
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
        (Reply::Nack(r), _) => anyhow::bail!(
            "nack {} for {uri}",
            granary_packet::types::nack_reason::name(r)
        ),
    }
}

/// `granary serve`: register a prefix, answer every Interest under it.
pub fn serve(
    socket: &Path,
    prefix: &str,
    size: usize,
    freshness: u64,
    delay_ms: u64,
) -> anyhow::Result<()> {
    let mut served = 0u64;
    mgmt::serve(
        socket,
        &name(prefix)?,
        size,
        freshness,
        delay_ms,
        || println!("ready"),
        |n| {
            served += 1;
            println!("served {n} #{served}");
        },
    )
}
