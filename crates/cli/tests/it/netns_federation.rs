//! Forwarding hints across network namespaces (carepo's topology: a site
//! behind a slow WAN link, a gateway router, clients on a LAN). The site
//! publishes under its node prefix /site/a; the router's only route to it is
//! a static `[[route]]` on a permanent UDP face; the client routes everything
//! to the router. Needs root (see netns/mod.rs).

use crate::common;
use crate::netns;

use common::noise;
use netns::Node;

#[test]
fn a_hinted_get_crosses_a_router_with_only_a_static_route_to_the_site() {
    use granary_testbed::topology::CarepoFig3;
    let Some((mut tb, _turn)) = netns::testbed(|_| {}) else {
        return;
    };
    let t = CarepoFig3::build(&mut tb, 1).unwrap();
    let site = Node::start(&mut tb, t.server, &["--node-prefix", "/site/a"]);
    let to_site = tb.udp_path(t.wan, t.gateway, 6363).unwrap();
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        conf.path(),
        format!(
            "node_prefix = \"/site/r\"\n\n[[route]]\nprefix = \"/site/a\"\nface = \"udp4://{to_site}\"\ncost = 5\n"
        ),
    )
    .unwrap();
    let router = Node::start(
        &mut tb,
        t.gateway,
        &["--config", conf.path().to_str().unwrap()],
    );
    let client = Node::start(&mut tb, t.clients[0], &[]);
    let gw_lan = tb.lan_addr(t.lan, t.gateway).unwrap();
    client.ok(&["route", "add", "/", &format!("udp4://{gw_lan}:6363")]);

    let bytes = noise(120_000, 7);
    let f = site.dir.path().join("x");
    std::fs::write(&f, &bytes).unwrap();
    site.ok(&["put", f.to_str().unwrap(), "/cmip6/x", "--sign", "digest"]);

    // The router's face to the site is permanent and up.
    let faces = router.ok(&["face", "list"]);
    let line = faces
        .lines()
        .find(|l| l.contains(&format!("remote=udp4://{to_site} ")))
        .unwrap_or_else(|| panic!("no face to the site: {faces}"));
    assert!(line.contains("persistency=permanent state=up"), "{line}");

    let get = |extra: &[&str], out: &str| {
        let mut args = vec![
            "get",
            "/cmip6/x",
            "-o",
            out,
            "--integrity-only",
            "--no-publish",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        client.cli(&args)
    };
    // By name: the router has no route for /cmip6.
    let o = get(&[], client.dir.path().join("n").to_str().unwrap());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NoRoute") && err.contains("--fwhint"), "{err}");
    // By hint: over the WAN, byte for byte.
    let out = client.dir.path().join("x");
    let o = get(&["--fwhint", "/site/a"], out.to_str().unwrap());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    let status = router.ok(&["status"]);
    let forwarded: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("hinted"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{status}"));
    assert!(forwarded > 0, "{status}");
    eprintln!("netns federation: router forwarded {forwarded} hinted Interest(s)");
}

/// The catalog's servers of the WAN test: the primary and its standby.
struct Servers {
    primary: common::pgcluster::PgCluster,
    standby: crate::catalog_ha::Standby,
}

impl granary_measure::federation_wan::Failover for Servers {
    fn stop_primary(&mut self) {
        self.primary.stop().unwrap();
    }
    fn promote_standby(&mut self) {
        self.standby.promote();
    }
}

/// bench/federation30.sh's driver at its smallest: 6 sites in 3 regions
/// (WAN round trips 20, 80 and 200 ms, rate-limited links), a PostgreSQL
/// primary and standby, 3 publishers, 2 replicas, 4 consumers on the
/// regions' campus nodes; a publishing site killed and the primary failed
/// over while they fetch. Its invariants must hold: every acknowledged
/// version held by an up site that serves it (`federation check`), no
/// consumer given bytes of no published version, every version on 2 up
/// sites, every fetch served (retried while the catalog fails over).
#[test]
fn six_sites_in_three_regions_lose_nothing_through_a_site_kill_and_a_catalog_failover() {
    if std::env::var("GRANARY_SKIP_NETNS").as_deref() == Ok("1") {
        eprintln!(
            "\n!!!!!!!! SKIPPED: netns test (GRANARY_SKIP_NETNS=1); nothing was tested !!!!!!!!\n"
        );
        return;
    }
    let _turn = netns::TURN.lock().unwrap_or_else(|e| e.into_inner());
    let primary = common::pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    primary.create_db("wan");
    let standby = crate::catalog_ha::Standby::of(primary.port());
    let url = format!(
        // One `host` parameter per host in a URL's query (tokio-postgres).
        "postgres://postgres@/wan?host={}&host={}&port={},{}&target_session_attrs=read-write",
        primary.socket_dir().display(),
        standby.socket_dir().display(),
        primary.port(),
        standby.port
    );
    let work = tempfile::tempdir().unwrap();
    let o = granary_measure::federation_wan::Opts {
        granary: netns::bin().into(),
        regions: 3,
        sites_per_region: 2,
        publishers: 3,
        consumers: 4,
        files_per_publisher: 3,
        file_kib: vec![256, 640],
        replicas: 2,
        consume_secs: 40,
        think_ms: 300,
        zipf: 1.0,
        node_timeout: 5,
        wan_rtt_ms: [20, 80, 200],
        wan_mbit: 20,
        access_mbit: 50,
        url,
        work: work.path().to_path_buf(),
        seed: 47,
    };
    let mut servers = Servers { primary, standby };
    let r = granary_measure::federation_wan::run(&o, &mut servers).unwrap();
    eprintln!("{}", r.table());
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(r.fetches > 0 && r.fetch_failed == 0, "{}", r.table());
    assert_eq!(r.never_replicated, 0, "{}", r.table());
    assert_eq!(r.versions_published, 3 * 3 + 3 + 1, "{}", r.table());
}
