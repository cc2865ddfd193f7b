//! The fault-injection suite at a size CI carries (bounded in time): a
//! concurrent workload against a real daemon with every kind of fault, and
//! the invariants checked over the history. bench/faults.sh runs the full
//! size (10,000 operations, 100 faults).
//!
//! The seed is printed; `GRANARY_FAULTS_SEED=N` replays its choices.

use std::path::PathBuf;

fn granary_bin() -> PathBuf {
    // The release binary scripts/test.sh builds for the namespace tests,
    // else the debug one `cargo test --workspace` builds.
    if let Some(p) = std::env::var_os("GRANARY_NETNS_BIN") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/granary");
    assert!(
        p.exists(),
        "{} missing: build it (`cargo build -p granary`) or set GRANARY_NETNS_BIN",
        p.display()
    );
    p
}

fn root() -> bool {
    granary_faults::is_root()
}

#[test]
fn invariants_hold_under_faults() {
    let seed = std::env::var("GRANARY_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("fault suite: seed {seed} (GRANARY_FAULTS_SEED={seed} replays it)");
    let pg = std::path::Path::new("/usr/lib/postgresql/15/bin/initdb").exists();
    if std::env::var_os("CI").is_some() {
        assert!(
            pg,
            "PostgreSQL is needed in CI: scripts/setup-test-deps.sh installs it"
        );
        assert!(
            root(),
            "CI runs as root (the disk-full fault mounts a loop file system)"
        );
    }
    let cfg = granary_faults::Config {
        bin: granary_bin(),
        seed,
        ops: 1200,
        faults: 30,
        workers: 4,
        pg,
        disk: root(),
        max_seconds: 300,
    };
    let r = granary_faults::run(&cfg).expect("the harness could not run");
    eprintln!("{}", serde_json::to_string_pretty(&r.to_json()).unwrap());
    assert!(
        r.violations.is_empty(),
        "seed {seed}: {} invariant violation(s):\n{}",
        r.violations.len(),
        r.violations.join("\n")
    );
    assert!(
        r.total_ops() >= 1200,
        "only {} operations ran",
        r.total_ops()
    );
    assert!(
        r.total_faults() >= 30,
        "only {} faults injected",
        r.total_faults()
    );
    // Every kind of fault happened, and the check looked at real data.
    for k in ["kill-daemon", "kill-client", "flip"] {
        assert!(r.faults.contains_key(k), "no {k} fault in {:?}", r.faults);
    }
    assert!(
        r.versions_checked > 50,
        "only {} versions checked",
        r.versions_checked
    );
}
