//! The daemon that `granary daemon` runs: the forwarder with its listeners,
//! the repository of `<data-dir>/repo` and the science catalog on
//! in-process faces, the catalog keeper and background scrub threads, and
//! the HTTP gateway.

use std::path::{Path, PathBuf};

use granary_forwarder::daemon::{self, DaemonConfig};
use granary_mgmt::ControlParameters;
use granary_packet::Name;
use granary_science::drs::Trust;

use crate::catalog::catalog_spec;
use crate::control::{nfd, static_route};
use crate::identity::publisher_identity;

/// What `granary daemon`'s flags ask for (each `None` leaves the config
/// file's value, or the default).
#[derive(Debug, Clone)]
pub struct Options {
    /// TOML config file; the flags override it.
    pub config: Option<PathBuf>,
    /// Extra listeners (`tcp://`, `udp://`, `ws://`, `unix://`).
    pub listen: Vec<String>,
    /// Also listen at NFD's socket.
    pub nfd_socket: bool,
    pub cs_capacity: Option<usize>,
    pub cs_policy: Option<String>,
    pub udp_mtu: Option<usize>,
    pub shards: Option<u32>,
    pub max_packet: Option<u32>,
    pub udp_reliability: Option<bool>,
    /// Do not serve `<data-dir>/repo`.
    pub no_repo: bool,
    /// Background scrub rate in MB/s (0: off).
    pub scrub_rate: u64,
    /// Do not serve the catalog.
    pub no_catalog: bool,
    /// DRS rules files tried first.
    pub rules: Vec<PathBuf>,
    /// Which side wins when attributes and names disagree.
    pub trust: Trust,
    /// The HTTP gateway's flags.
    pub http: crate::gateway::Flags,
    /// The node prefix (`--node-prefix`; overrides the config's `node_prefix`).
    pub node_prefix: Option<String>,
    /// Change the node prefix even though keys exist under the old one.
    pub force: bool,
    /// The node's role in the federation (`--role`; overrides the config's
    /// `role`; default storage).
    pub role: Option<granary_catalog::Role>,
}

/// `granary daemon`: starts the forwarder with `socket` as its Unix socket,
/// the repository, the catalog and the HTTP gateway, prints what it listens
/// on and `ready`, and runs until SIGTERM/SIGINT.
pub fn run(args: Options, socket: PathBuf, data_dir: &Path) -> anyhow::Result<()> {
    // One typed config file (every key the daemon reads; an unknown key is
    // an error naming it and the file).
    let file = match &args.config {
        Some(p) => crate::config::NodeConfig::load(p)?,
        None => crate::config::NodeConfig::default(),
    };
    let http_file = file.http_flags();
    let file_prefix = file.node_prefix.clone();
    let file_role = file.role;
    // The federation-wide keys: this node's own (`local`, over the catalog's)
    // or published to the catalog for every node (`publish`).
    let mode = file.federation_settings.unwrap_or_default();
    let (local, publish) = match mode {
        crate::config::SettingsMode::Local => (file.federation(), None),
        crate::config::SettingsMode::Publish => (
            granary_catalog::FederationSettings::default(),
            Some(file.federation()),
        ),
    };
    // Until the catalog is read: the file's values over the defaults.
    let start_settings = crate::settings::overlay(&file.federation(), &Default::default());
    let node_timeout = crate::settings::node_timeout(&start_settings);
    let policy = crate::policy::SharedPolicy::new(crate::settings::policy(&start_settings));
    let mut cfg = file.forwarder;
    let http = crate::gateway::settings(&args.http, &http_file)?;
    // HTTPS's certificate, before anything starts: a bad one is an error.
    let tls = match http.https {
        Some(a) => Some(crate::gateway::tls(&http, data_dir, a)?),
        None => None,
    };
    if args.config.is_none() || cfg.socket == DaemonConfig::default().socket {
        cfg.socket = socket;
    }
    cfg.listen.extend(args.listen);
    // The socket is open to every local user (as NFD's is); the
    // repository's commands that act with this process's rights are kept
    // to its own user and root.
    cfg.owner_only = granary_repo::local_commands::owner_only_prefixes();
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
    // The node prefix first: the catalog and the publisher key are named after it.
    let node = match args.node_prefix.clone().or(file_prefix) {
        Some(p) => {
            let want = Name::from_uri(&p).map_err(|e| anyhow::anyhow!("node prefix {p:?}: {e}"))?;
            crate::identity::set_node_prefix(data_dir, &want, args.force)?
        }
        None => crate::identity::node_prefix(data_dir)?,
    };
    // The publisher key from the first start: sites exchange keys before
    // they publish, and replicate commands are signed with it.
    match crate::identity::ensure_publisher_key(data_dir) {
        Ok((k, true)) => {
            tracing::info!("publisher key {k} made (export it with `granary key export`)")
        }
        Ok((k, false)) => tracing::info!("publisher key {k}"),
        Err(e) => tracing::warn!("no publisher key made at start: {e}"),
    }
    // The node's own prefix is NOT put in its network region (NFD's region
    // is empty unless configured): an Interest hinted to this node follows
    // the hint to the node prefix's captured route, i.e. to its repository,
    // whatever default route the site has (decision 0090, amended).
    let repo_dir = data_dir.join("repo");
    let no_repo = args.no_repo;
    let role = args.role.or(file_role).unwrap_or_default();
    // What this node's client commands use when they are not told.
    if let Err(e) = crate::catalog::write_daemon_settings(
        data_dir,
        &crate::catalog::DaemonSettings {
            catalog: if args.no_catalog {
                None
            } else {
                catalog_spec().map(str::to_string)
            },
            // Only what this node keeps to itself: a client command
            // reads the rest from the catalog, as the daemon does.
            node_timeout: local.node_timeout,
            role: Some(role),
            replication: local.replication.clone(),
        },
    ) {
        tracing::warn!(
            "{}: {e}; client commands here need --catalog and --node-timeout",
            crate::catalog::daemon_settings_file(data_dir).display()
        );
    }
    // The catalog, opened before the runtime starts (its in-memory index is
    // loaded here); a catalog that cannot be opened costs the search, not the node.
    let indexer = if args.no_catalog {
        None
    } else {
        let spec = catalog_spec();
        let s = crate::catalog::settings(data_dir, spec, &args.rules, args.trust);
        let shared =
            spec.is_some_and(|c| c.starts_with("postgres://") || c.starts_with("postgresql://"));
        match granary_search::Indexer::open(data_dir, &s) {
            Ok(ix) => {
                if shared {
                    warn_if_unreachable(&ix, data_dir);
                }
                ix.catalog
                    .set_node_timeout(node_timeout)
                    .map_err(|e| anyhow::anyhow!("node_timeout: {e}"))?;
                // The federation settings: published (if asked), read, and
                // followed while the daemon runs.
                crate::settings::Follower::start(
                    ix.catalog.clone(),
                    local.clone(),
                    publish.clone(),
                    node.to_string(),
                    policy.clone(),
                )
                .spawn()?;
                Some(std::sync::Arc::new(ix))
            }
            // A shared catalog asked for by URL that is wrong (malformed,
            // login refused, no such database): the operator must know at
            // once, not find a node that silently catalogues nothing. One
            // that is only down is not an error (registrations queue until
            // it is back).
            Err(e) if shared => anyhow::bail!(
                "{e}\n(the --catalog URL is wrong; e.g. postgres://USER@HOST1,HOST2/DB?target_session_attrs=read-write; a server that is only down does not stop the node)"
            ),
            Err(e) => {
                tracing::warn!("catalog not served: {e}");
                None
            }
        }
    };
    raise_open_files_limit();
    let gateway_dir = data_dir.to_path_buf();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let r = rt.block_on(async move {
        let running = daemon::start(cfg).await.map_err(|e| anyhow::anyhow!(e))?;
        if !no_repo {
            let repo = attach_repo(
                &running,
                &repo_dir,
                indexer.clone(),
                args.scrub_rate,
                &node,
                role,
            )
            .await?;
            attach_replicate(&running, repo.clone(), &node, &repo_dir).await?;
            // Every storage node on the shared catalog claims the copies
            // offered to it, rules or not; only nodes with rules plan (rules
            // may come later, from the catalog's federation settings).
            let locations = location_catalog(indexer.as_ref());
            start_policy(policy, repo, &node, &repo_dir, &running, locations, role)?;
        }
        if let (Some(ix), Some(socket)) = (&indexer, running.sockets.first()) {
            if catalog_spec().is_some_and(crate::locate::is_shared_spec) {
                crate::locate::redial_on_return(
                    ix.catalog.clone(),
                    node.to_string(),
                    socket.clone(),
                    tokio::runtime::Handle::current(),
                )?;
            }
        }
        if let Some(ix) = &indexer {
            attach_catalog(&running, ix.clone(), &node).await?;
            println!(
                "catalog {}",
                granary_search::protocol::catalog_prefix(&node)
            );
        }
        let gateway = crate::gateway::start(
            &http,
            tls,
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
        // No new HTTP requests; those in flight are dropped with the runtime
        // (their blocking work sees its budget given up and ends).
        for t in &gateway {
            t.abort();
        }
        for s in &running.sockets {
            let _ = std::fs::remove_file(crate::local_files::files_socket(s));
        }
        // The forwarder's own stop is quick; a stuck one does not hold the exit.
        if tokio::time::timeout(STOP_GRACE, running.stop())
            .await
            .is_err()
        {
            tracing::warn!("the forwarder did not stop within {STOP_GRACE:?}; exiting");
        }
        Ok::<_, anyhow::Error>(())
    });
    // Blocking work still running (a catalog call, a preview) is not waited
    // for past a short grace: SIGTERM stops the daemon in under 2 s. An
    // ingest cut short is what a crash leaves, which the store survives
    // (a version appears only by its final rename).
    rt.shutdown_timeout(STOP_GRACE);
    r
}

/// How long the daemon waits for work in flight when it is told to stop.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// The location catalog the replication policy reads (which node holds
/// what, which nodes are up): the node's catalog, when it has one.
fn location_catalog(
    indexer: Option<&std::sync::Arc<granary_search::Indexer>>,
) -> Option<std::sync::Arc<dyn crate::policy::Locations>> {
    let catalog = indexer?.catalog.clone();
    Some(std::sync::Arc::new(CatalogLocations { catalog }))
}

/// [`crate::policy::Locations`] over the location catalog's tables, judging
/// liveness by the catalog handle's node timeout (the federation settings'
/// current one).
struct CatalogLocations {
    catalog: std::sync::Arc<granary_catalog::Catalog>,
}

impl crate::policy::Locations for CatalogLocations {
    fn held_under(&self, prefix: &str) -> Result<Vec<crate::policy::Held>, String> {
        let node_timeout = self.catalog.node_timeout();
        let rows = self
            .catalog
            .replicas(prefix, node_timeout)
            .map_err(|e| e.to_string())?;
        rows.into_iter()
            .map(|r| {
                let holders = self
                    .catalog
                    .locations(&r.name, node_timeout)
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .filter(|l| l.version == r.version && !l.is_cache())
                    .map(|l| l.node)
                    .collect();
                Ok(crate::policy::Held {
                    name: r.name,
                    version: r.version,
                    holders,
                })
            })
            .collect()
    }

    fn up_nodes(&self) -> Result<Vec<String>, String> {
        Ok(self
            .catalog
            .nodes(self.catalog.node_timeout())
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|n| n.up && n.role == granary_catalog::Role::Storage)
            .map(|n| n.prefix)
            .collect())
    }
}

/// Starts the `[[replication]]` policy task, or says why it cannot run:
/// it needs the shared PostgreSQL catalog (the work queue) and the
/// location catalog.
fn start_policy(
    policy: std::sync::Arc<crate::policy::SharedPolicy>,
    repo: std::sync::Arc<granary_repo::Repo>,
    node: &Name,
    repo_dir: &Path,
    running: &daemon::Running,
    locations: Option<std::sync::Arc<dyn crate::policy::Locations>>,
    role: granary_catalog::Role,
) -> anyhow::Result<()> {
    let url =
        catalog_spec().filter(|c| c.starts_with("postgres://") || c.starts_with("postgresql://"));
    let (Some(url), Some(locations), Some(socket), Some(data_dir)) =
        (url, locations, running.sockets.first(), repo_dir.parent())
    else {
        if !policy.get().1.rules.is_empty() {
            tracing::warn!(
                "[[replication]] not enforced: the policy needs a shared PostgreSQL catalog (--catalog postgres://…) and the federation's location catalog"
            );
        }
        return Ok(());
    };
    crate::policy::start(
        crate::policy::Task {
            policy,
            locations,
            url: url.to_string(),
            node: node.clone(),
            repo,
            data_dir: data_dir.to_path_buf(),
            socket: socket.clone(),
            role,
        },
        tokio::runtime::Handle::current(),
    )?;
    Ok(())
}

/// Says at start, clearly, that the shared catalog cannot be reached now:
/// the node runs on (fetches and publishing need no catalog), and catalog
/// changes are queued durably and applied when a server answers.
fn warn_if_unreachable(ix: &granary_search::Indexer, data_dir: &Path) {
    if let Err(e) = ix.catalog.len() {
        if e.is_unavailable() {
            let msg = format!(
                "catalog unreachable at start ({e}); the node runs on: catalog changes are queued in {} and applied when a server answers",
                granary_search::queue::queue_dir(data_dir).display()
            );
            tracing::warn!("{msg}");
        }
    }
}

/// Raises the soft limit on open files to the hard one, as NFD and nginx
/// do: every connection, face and served file takes descriptors, and the
/// usual soft default (1024) is reached by a few hundred clients. Logs the
/// figure; a failure is logged and the daemon runs on with what it has.
fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let cur = getrlimit(Resource::Nofile);
    // No hard limit: Linux takes at most fs.nr_open (1,048,576 by default).
    let hard = cur.maximum.unwrap_or(1 << 20);
    let soft = cur.current.unwrap_or(hard);
    if soft >= hard {
        tracing::info!("open files limit {soft}");
        return;
    }
    let mut want = cur;
    want.current = Some(hard);
    match setrlimit(Resource::Nofile, want) {
        Ok(()) => tracing::info!("open files limit raised from {soft} to {hard} (the hard limit)"),
        Err(e) => tracing::warn!("open files limit {soft}: cannot raise it to {hard}: {e}"),
    }
}

/// Serves `<data-dir>/repo` through an in-process face; its route `/` does
/// not propagate to longer prefixes (so other producers win), and unknown
/// names are Nacked at once.
async fn attach_repo(
    running: &daemon::Running,
    dir: &Path,
    indexer: Option<std::sync::Arc<granary_search::Indexer>>,
    scrub_mb_per_s: u64,
    node: &Name,
    role: granary_catalog::Role,
) -> anyhow::Result<std::sync::Arc<granary_repo::Repo>> {
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
        // The node's own prefix: Interests under it (or hinted to it by a
        // router whose region does not hold it) reach this repository.
        // Capture: a shorter route (a default route `/` to a gateway) is not
        // inherited under it, else the forwarder could send names under
        // this node's prefix (its replicate and catalog services) away.
        (
            "rib",
            "register",
            static_route(
                node.clone(),
                route | granary_mgmt::values::route_flags::CAPTURE,
                0,
            ),
        ),
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
    if let Some(id) = dir.parent().and_then(|d| publisher_identity(d).ok()) {
        repo = repo.with_publisher(id);
    }
    if let Some(ix) = indexer {
        catalog_keeper(ix.clone(), dir)?;
        crate::locate::heartbeat(ix.clone(), node.to_string(), role)?;
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
    // Applications on the node read held versions from the file itself
    // (short-circuit local reads, decision 0100), checked against the
    // manifest they fetch over NDN, by whichever Unix socket they use.
    let store = std::sync::Arc::new(granary_store::Store::open(dir)?);
    for socket in &running.sockets {
        match crate::local_files::serve(store.clone(), socket) {
            Ok(at) => tracing::info!("local file socket {}", at.display()),
            Err(e) => tracing::warn!(
                "no local file socket ({e}): applications on this node fetch held versions over NDN"
            ),
        }
    }
    tokio::spawn(granary_repo::serve(repo.clone(), app));
    Ok(repo)
}

/// Serves replicate commands (`<node prefix>/granary/replicate`) on an
/// in-process face; replications fetch through the daemon's own socket and
/// store into `repo`.
async fn attach_replicate(
    running: &daemon::Running,
    repo: std::sync::Arc<granary_repo::Repo>,
    node: &Name,
    repo_dir: &Path,
) -> anyhow::Result<()> {
    let (Some(socket), Some(data_dir)) = (running.sockets.first(), repo_dir.parent()) else {
        return Ok(());
    };
    let app = in_process_face(running, "replicate").await?;
    let service = crate::replicate::Service::new(node, repo, data_dir, socket);
    service.register(&app).await;
    tokio::spawn(service.run(app));
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
