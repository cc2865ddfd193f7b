//! The location catalog (federation) on both back ends: per-node removal, rename and
//! rebuild, the last location taking its record, heartbeats and the node timeout.

use std::time::Duration;

use granary_catalog::{Catalog, Error, NewLocation, Record, Role};

const LONG: Duration = Duration::from_secs(60);

fn rec(name: &str, version: u64, node: &str) -> Record {
    Record {
        name: name.into(),
        version,
        title: name.rsplit('/').next().unwrap_or_default().into(),
        size: 100,
        manifest_digest: Some(format!("digest-{name}-{version}")),
        node: Some(node.into()),
        ..Default::default()
    }
}

fn nodes_of(cat: &Catalog, name: &str, version: Option<u64>) -> Vec<String> {
    let mut v: Vec<String> = cat
        .locate(name, version, LONG)
        .unwrap()
        .into_iter()
        .map(|l| l.node)
        .collect();
    v.sort();
    v
}

/// Two nodes (`a`, `b`: two handles on one catalog) publish, replicate, remove and
/// rename; each acts on its own locations only.
pub fn per_node_changes(spec: &str) {
    let a = Catalog::open(spec).unwrap();
    let b = Catalog::open(spec).unwrap();
    a.heartbeat("/site/a", true).unwrap();
    b.heartbeat("/site/b", true).unwrap();
    // a publishes four files; b holds copies of two of them and publishes one.
    let recs: Vec<Record> = ["x", "y", "z", "w"]
        .iter()
        .map(|n| rec(&format!("/cmip6/d/{n}.nc"), 1, "/site/a"))
        .collect();
    a.upsert_many(&recs).unwrap();
    b.register_location(
        "/cmip6/d/x.nc",
        1,
        "/site/b",
        Some("digest-/cmip6/d/x.nc-1"),
    )
    .unwrap();
    b.register_locations(&[NewLocation {
        name: "/cmip6/d/y.nc".into(),
        version: 1,
        node: "/site/b".into(),
        manifest_digest: Some("digest-/cmip6/d/y.nc-1".into()),
    }])
    .unwrap();
    b.upsert(&rec("/cmip6/e/v.nc", 3, "/site/b")).unwrap();
    assert_eq!(a.len().unwrap(), 5);
    assert_eq!(nodes_of(&a, "/cmip6/d/x.nc", None), ["/site/a", "/site/b"]);
    assert_eq!(nodes_of(&b, "/cmip6/d/z.nc", Some(1)), ["/site/a"]);
    assert_eq!(nodes_of(&b, "/cmip6/d/z.nc", Some(2)), Vec::<String>::new());
    let l = &a.locate("/cmip6/e/v.nc", None, LONG).unwrap()[0];
    assert_eq!((l.version, l.node.as_str()), (3, "/site/b"));
    assert_eq!(l.manifest_digest.as_deref(), Some("digest-/cmip6/e/v.nc-3"));
    assert!(l.up && l.seen_ms > 1_600_000_000_000, "{l:?}");
    // Registering again is idempotent.
    b.register_location(
        "/cmip6/d/x.nc",
        1,
        "/site/b",
        Some("digest-/cmip6/d/x.nc-1"),
    )
    .unwrap();
    assert_eq!(a.locations("/cmip6/d/x.nc", LONG).unwrap().len(), 2);

    // a removes x: b still holds it, the record stays; b removes it: the record goes.
    assert_eq!(a.remove_for("/site/a", "/cmip6/d/x.nc", None).unwrap(), 1);
    assert!(b.get("/cmip6/d/x.nc", Some(1)).unwrap().is_some());
    assert_eq!(nodes_of(&b, "/cmip6/d/x.nc", None), ["/site/b"]);
    assert_eq!(
        b.remove_for("/site/b", "/cmip6/d/x.nc", Some(1)).unwrap(),
        1
    );
    assert!(a.get("/cmip6/d/x.nc", Some(1)).unwrap().is_none());
    // Removing what a node does not hold changes nothing.
    assert_eq!(b.remove_for("/site/b", "/cmip6/d/z.nc", None).unwrap(), 0);
    assert!(a.get("/cmip6/d/z.nc", Some(1)).unwrap().is_some());

    // a renames /cmip6/d: y (shared with b) is copied, b keeps the old name; z and w
    // (a's alone) move.
    assert_eq!(a.rename_for("/site/a", "/cmip6/d", "/cmip6/f").unwrap(), 3);
    assert_eq!(nodes_of(&b, "/cmip6/d/y.nc", None), ["/site/b"]);
    assert_eq!(nodes_of(&b, "/cmip6/f/y.nc", None), ["/site/a"]);
    assert_eq!(nodes_of(&b, "/cmip6/f/z.nc", None), ["/site/a"]);
    assert!(b.get("/cmip6/d/y.nc", Some(1)).unwrap().is_some());
    assert!(b.get("/cmip6/d/z.nc", Some(1)).unwrap().is_none());
    assert!(b.get("/cmip6/f/w.nc", Some(1)).unwrap().is_some());
    assert!(a.locations("/cmip6/d/z.nc", LONG).unwrap().is_empty());
    // a lone rename in place moves the location with the record.
    assert_eq!(
        a.rename_for("/site/a", "/cmip6/f/w.nc", "/cmip6/g/w.nc")
            .unwrap(),
        1
    );
    assert_eq!(nodes_of(&b, "/cmip6/g/w.nc", None), ["/site/a"]);
    // A target that exists is a conflict, nothing changes.
    b.register_location("/cmip6/f/z.nc", 1, "/site/b", None)
        .unwrap();
    a.upsert(&rec("/cmip6/h/z.nc", 1, "/site/a")).unwrap();
    let e = a
        .rename_for("/site/a", "/cmip6/f/z.nc", "/cmip6/h/z.nc")
        .unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert_eq!(nodes_of(&b, "/cmip6/f/z.nc", None), ["/site/a", "/site/b"]);

    // a rebuilds: its locations go and the records only it held; b's stay.
    let before_b = b.node_locations("/site/b").unwrap();
    assert!(a.clear_node("/site/a").unwrap() >= 3);
    assert!(a.node_locations("/site/a").unwrap().is_empty());
    assert_eq!(b.node_locations("/site/b").unwrap(), before_b);
    assert!(a.get("/cmip6/h/z.nc", Some(1)).unwrap().is_none());
    assert!(a.get("/cmip6/g/w.nc", Some(1)).unwrap().is_none());
    assert!(a.get("/cmip6/f/z.nc", Some(1)).unwrap().is_some());
    assert!(a.get("/cmip6/d/y.nc", Some(1)).unwrap().is_some());
    assert!(a.get("/cmip6/e/v.nc", Some(3)).unwrap().is_some());
    let mut left = b.keys().unwrap();
    left.sort();
    assert_eq!(
        left,
        [
            ("/cmip6/d/y.nc".to_string(), 1),
            ("/cmip6/e/v.nc".to_string(), 3),
            ("/cmip6/f/z.nc".to_string(), 1)
        ]
    );
    // The global removal takes every node's locations.
    assert_eq!(a.remove("/cmip6/d/y.nc", None).unwrap(), 1);
    assert!(b.locations("/cmip6/d/y.nc", LONG).unwrap().is_empty());
}

/// A node silent for longer than the timeout is down and not offered; one that never
/// sent a heartbeat is not offered either; the latest version offered is the highest
/// an up node holds.
pub fn node_timeout(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    cat.upsert(&rec("/p/f.nc", 1, "/site/a")).unwrap();
    cat.register_location("/p/f.nc", 1, "/site/b", None)
        .unwrap();
    cat.upsert(&rec("/p/f.nc", 2, "/site/b")).unwrap();
    cat.register_location("/p/f.nc", 2, "/site/ghost", None)
        .unwrap();
    cat.heartbeat("/site/a", true).unwrap();
    assert_eq!(nodes_of(&cat, "/p/f.nc", Some(1)), ["/site/a"]);
    // b is not up: the latest version an up node holds is 1.
    let l = cat.locate("/p/f.nc", None, LONG).unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].version, l[0].node.as_str()), (1, "/site/a"));
    cat.heartbeat("/site/b", true).unwrap();
    assert_eq!(nodes_of(&cat, "/p/f.nc", None), ["/site/b"]);
    assert_eq!(nodes_of(&cat, "/p/f.nc", Some(1)), ["/site/a", "/site/b"]);
    std::thread::sleep(Duration::from_millis(400));
    cat.heartbeat("/site/a", false).unwrap();
    let short = Duration::from_millis(300);
    let l: Vec<String> = cat
        .locate("/p/f.nc", None, short)
        .unwrap()
        .into_iter()
        .map(|l| l.node)
        .collect();
    assert_eq!(l, ["/site/a"], "b is silent for longer than the timeout");
    let ns = cat.nodes(short).unwrap();
    let st: Vec<(&str, bool)> = ns.iter().map(|n| (n.prefix.as_str(), n.up)).collect();
    assert_eq!(st, [("/site/a", true), ("/site/b", false)]);
    assert!(ns[1].age_ms >= 300, "{:?}", ns[1]);
    assert_eq!((ns[0].locations, ns[1].locations), (1, 2));
    // Replica counts of the latest registered version, up and all.
    let r = cat.replicas("/p", short).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].version, r[0].up, r[0].total), (2, 0, 2));
    let r = cat.replicas("/", LONG).unwrap();
    assert_eq!((r[0].up, r[0].total), (1, 2));
    assert!(cat.replicas("/q", LONG).unwrap().is_empty());
    // Bad input is refused with a reason.
    for bad in ["site/a", "", "/a\u{0}b"] {
        let e = cat.heartbeat(bad, true).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)), "{bad:?}: {e}");
        let e = cat.register_location("/p/f.nc", 1, bad, None).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)), "{bad:?}: {e}");
    }
    let e = cat
        .register_location("/p/f.nc", u64::MAX, "/site/a", None)
        .unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e}");
    let e = cat.locate("/p/f.nc", None, Duration::ZERO).unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e}");
}

/// Two nodes remove the last two locations of many versions at once, each from its own
/// handle: every record goes (none is left without a location), none is lost early.
pub fn concurrent_last_locations(spec: &str) {
    let a = Catalog::open(spec).unwrap();
    let b = Catalog::open(spec).unwrap();
    let recs: Vec<Record> = (0..60)
        .map(|i| rec(&format!("/c/{i}.nc"), 1, "/site/a"))
        .collect();
    a.upsert_many(&recs).unwrap();
    let locs: Vec<NewLocation> = recs
        .iter()
        .map(|r| NewLocation {
            name: r.name.clone(),
            version: 1,
            node: "/site/b".into(),
            manifest_digest: None,
        })
        .collect();
    b.register_locations(&locs).unwrap();
    std::thread::scope(|s| {
        for (cat, node) in [(&a, "/site/a"), (&b, "/site/b")] {
            let recs = &recs;
            s.spawn(move || {
                for r in recs {
                    assert_eq!(cat.remove_for(node, &r.name, Some(1)).unwrap(), 1);
                }
            });
        }
    });
    assert_eq!(a.len().unwrap(), 0);
    assert_eq!(b.len().unwrap(), 0);
}

/// `locate` offers the least loaded holder first (the load its heartbeat reported:
/// the versions it holds), the longest registered at equal load; a consumer's own
/// distances come before both (`order_nearest`).
pub fn least_loaded_first(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    // a publishes four files; b, later, keeps a copy of one; c of the same one, later.
    for n in ["f", "g", "h", "i"] {
        cat.upsert(&rec(&format!("/p/{n}.nc"), 1, "/site/a"))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(5));
    cat.register_location("/p/f.nc", 1, "/site/b", None)
        .unwrap();
    std::thread::sleep(Duration::from_millis(5));
    cat.register_location("/p/f.nc", 1, "/site/c", None)
        .unwrap();
    for n in ["/site/a", "/site/b", "/site/c"] {
        cat.heartbeat(n, true).unwrap();
    }
    let order = |l: Vec<granary_catalog::Location>| -> Vec<(String, Option<u64>)> {
        l.into_iter().map(|l| (l.node, l.load)).collect()
    };
    let l = cat.locate("/p/f.nc", None, LONG).unwrap();
    assert_eq!(
        order(l.clone()),
        [
            ("/site/b".to_string(), Some(1)),
            ("/site/c".to_string(), Some(1)),
            ("/site/a".to_string(), Some(4)),
        ],
        "least loaded first, then longest registered"
    );
    // A consumer that is nearer to a (FIB cost 10) than to b and c (20, no route).
    let mut near = l;
    granary_catalog::order_nearest(&mut near, |n| match n {
        "/site/a" => Some(10),
        "/site/b" => Some(20),
        _ => None,
    });
    let nodes: Vec<String> = near.into_iter().map(|l| l.node).collect();
    assert_eq!(nodes, ["/site/a", "/site/b", "/site/c"]);
    // b takes two more copies: its next heartbeat reports 3, still below a's 4; c's 1.
    for n in ["g", "h"] {
        cat.register_location(&format!("/p/{n}.nc"), 1, "/site/b", None)
            .unwrap();
    }
    cat.heartbeat("/site/b", false).unwrap();
    let l = cat.locate("/p/f.nc", Some(1), LONG).unwrap();
    assert_eq!(
        order(l),
        [
            ("/site/c".to_string(), Some(1)),
            ("/site/b".to_string(), Some(3)),
            ("/site/a".to_string(), Some(4)),
        ]
    );
}

/// Roles: a router's and a client's copies are caches. They are located (after every
/// storage holder, marked by their role) but never counted as replicas; the nodes'
/// rows carry the role their last heartbeat gave, and a role can change.
pub fn roles(spec: &str) {
    let cat = Catalog::open(spec).unwrap();
    cat.heartbeat_as("/site/a", true, Role::Storage).unwrap();
    cat.heartbeat_as("/site/r", true, Role::Router).unwrap();
    cat.heartbeat_as("/user/q", true, Role::Client).unwrap();
    cat.upsert(&rec("/p/f.nc", 1, "/site/a")).unwrap();
    cat.register_location("/p/f.nc", 1, "/user/q", None)
        .unwrap();
    cat.register_location("/p/f.nc", 1, "/site/r", None)
        .unwrap();
    // A name only a client holds is no storage node's: nothing to count.
    cat.upsert(&rec("/p/g.nc", 1, "/user/q")).unwrap();
    let l = cat.locate("/p/f.nc", None, LONG).unwrap();
    let got: Vec<(&str, bool, Option<Role>)> = l
        .iter()
        .map(|l| (l.node.as_str(), l.is_cache(), l.role))
        .collect();
    assert_eq!(got[0], ("/site/a", false, Some(Role::Storage)), "{got:?}");
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got[1..].iter().all(|g| g.1),
        "caches after storage: {got:?}"
    );
    let r = cat.replicas("/p", LONG).unwrap();
    let counts: Vec<(&str, u64, u64)> =
        r.iter().map(|r| (r.name.as_str(), r.up, r.total)).collect();
    assert_eq!(counts, [("/p/f.nc", 1, 1)], "caches are not replicas");
    let roles: Vec<(String, Role)> = cat
        .nodes(LONG)
        .unwrap()
        .into_iter()
        .map(|n| (n.prefix, n.role))
        .collect();
    assert_eq!(
        roles,
        [
            ("/site/a".to_string(), Role::Storage),
            ("/site/r".to_string(), Role::Router),
            ("/user/q".to_string(), Role::Client),
        ]
    );
    // The client becomes a storage node: its copies count from its next heartbeat.
    cat.heartbeat_as("/user/q", false, Role::Storage).unwrap();
    let r = cat.replicas("/p", LONG).unwrap();
    let counts: Vec<(&str, u64)> = r.iter().map(|r| (r.name.as_str(), r.up)).collect();
    assert_eq!(counts, [("/p/f.nc", 2), ("/p/g.nc", 1)]);
    let live: Vec<(String, bool, Role)> = cat
        .liveness(LONG)
        .unwrap()
        .into_iter()
        .map(|l| (l.prefix, l.up, l.role))
        .collect();
    assert_eq!(
        live,
        [
            ("/site/a".to_string(), true, Role::Storage),
            ("/site/r".to_string(), true, Role::Router),
            ("/user/q".to_string(), true, Role::Storage),
        ]
    );
    assert!(Role::parse("archive").is_err());
    assert_eq!(Role::parse("router").unwrap(), Role::Router);
}
