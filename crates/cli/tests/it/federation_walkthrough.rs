//! docs/federation.md's walkthrough ("Running three sites"), run as written:
//! every fenced `sh` block after a `<!-- walkthrough … -->` comment, in the
//! order of the page, with bash. `<!-- walkthrough env -->` is the settings
//! every machine sources first; `<!-- walkthrough on=A,B -->` runs the block
//! on each machine named. A machine here is a home directory of its own (the
//! default data directory and socket are under `$HOME`) with a loopback
//! address; the `granary` on the PATH is this build's. What the test puts in
//! place of the page's values, after the env block: the addresses, the URL of
//! a throw-away PostgreSQL primary with a streaming standby (catalog_ha's),
//! a temporary shared directory, and each machine's `SITE` and `ADDR`. The
//! blocks on P and S (stop the primary, promote the standby) are done by the
//! test on its own servers. Then it checks what the page promises: the
//! policy's and `replicate`'s copies, a replica signed with the publisher's
//! key, the consumer's fetch after site A is killed, and the standby's
//! promotion absorbed (B's queued record arrives, the consumer finds it).

use crate::catalog_ha::Standby;
use crate::common::pgcluster;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use granary_catalog::Catalog;
use serde_json::Value;

const DOC: &str = include_str!("../../../../docs/federation.md");

/// A hang guard for one block (daemons start, `replicate` waits).
const BLOCK_LIMIT: Duration = Duration::from_secs(240);
const LONG: Duration = Duration::from_secs(3600);

/// A marked block of the page: the machines it runs on (`env`: the
/// settings block) and its text.
#[derive(Debug)]
struct Block {
    on: Vec<String>,
    text: String,
}

/// The marked blocks of `doc`, in order. A marker not followed by a
/// ```` ```sh ```` fence is an error (the page would show a block the test
/// does not run).
fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        let Some(spec) = l
            .trim()
            .strip_prefix("<!-- walkthrough")
            .and_then(|s| s.strip_suffix("-->"))
        else {
            continue;
        };
        let spec = spec.trim();
        let on = if spec == "env" {
            vec!["env".to_string()]
        } else {
            spec.strip_prefix("on=")
                .unwrap_or_else(|| panic!("walkthrough marker {l:?}: want `env` or `on=A,B`"))
                .split(',')
                .map(|h| h.trim().to_string())
                .collect()
        };
        assert_eq!(
            lines.next().map(str::trim),
            Some("```sh"),
            "{l:?} is not followed by a ```sh block"
        );
        let mut text = String::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        out.push(Block { on, text });
    }
    out
}

/// A machine of the walkthrough: its home directory, `SITE` and `ADDR`.
struct Host {
    home: PathBuf,
    site: String,
    addr: String,
}

impl Host {
    fn data(&self) -> PathBuf {
        self.home.join(".local/share/granary")
    }
}

/// The process groups the blocks ran in (their daemons stay in them):
/// killed when the test ends, passed or not.
#[derive(Default)]
struct Groups(Vec<u32>);

impl Drop for Groups {
    fn drop(&mut self) {
        for g in &self.0 {
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{g}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Runs `script` with bash on `host` (its home, the test's `granary` first
/// on the PATH, no GRANARY_* settings from the test's environment).
fn bash(host: &Host, script: &str, groups: &mut Groups) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_granary")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    c.args(["-e", "-o", "pipefail", "-c", script])
        .current_dir(&host.home)
        .env("HOME", &host.home)
        .env("PATH", path)
        .env_remove("XDG_DATA_HOME")
        .env_remove("GRANARY_DATA_DIR")
        .env_remove("GRANARY_SOCKET")
        .env_remove("GRANARY_CATALOG")
        .env_remove("GRANARY_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = c.spawn().unwrap();
    let id = child.id();
    groups.0.push(id);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(BLOCK_LIMIT) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg(id.to_string()).status();
            panic!(
                "block on {} did not finish within {BLOCK_LIMIT:?}:\n{script}",
                host.site
            );
        }
    }
}

/// The storage nodes holding `name` per the catalog at `url`, sorted.
fn holders(url: &str, name: &str) -> Vec<String> {
    let Ok(cat) = Catalog::open_unindexed(url) else {
        return Vec::new();
    };
    let mut v: Vec<String> = cat
        .locations(name, LONG)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| !l.is_cache())
        .map(|l| l.node)
        .collect();
    v.sort();
    v
}

/// Waits (at most `limit`, a hang guard) until `done` holds.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < end, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The files in `dir` (0 when it does not exist).
fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn the_three_site_walkthrough_of_the_federation_page_runs_as_written() {
    let blocks = blocks(DOC);
    let env: Vec<&Block> = blocks.iter().filter(|b| b.on == ["env"]).collect();
    assert_eq!(env.len(), 1, "one `<!-- walkthrough env -->` block");
    let env = &env[0].text;
    assert!(
        blocks.len() > 8,
        "the walkthrough has lost its blocks: {blocks:?}"
    );

    let mut primary = pgcluster::PgCluster::start().unwrap_or_else(|e| panic!("{e}"));
    primary.create_db("walkthrough");
    let standby = Standby::of(primary.port());
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/walkthrough?target_session_attrs=read-write",
        primary.port(),
        standby.port
    );
    let first = format!(
        "postgres://postgres@127.0.0.1:{}/walkthrough",
        primary.port()
    );
    let promoted = format!("postgres://postgres@127.0.0.1:{}/walkthrough", standby.port);

    // The machines: a loopback network of their own (127.X.Y.0/24, X and Y
    // from the process id, so that two runs at once do not share port 6363).
    let work = tempfile::tempdir().unwrap();
    let share = work.path().join("share");
    std::fs::create_dir(&share).unwrap();
    let pid = std::process::id();
    let net = format!("127.{}.{}", 1 + pid % 250, 1 + (pid / 250) % 250);
    let mut hosts = BTreeMap::new();
    for (h, site, last) in [
        ("A", "a", 10),
        ("B", "b", 11),
        ("C", "c", 12),
        ("R", "r", 1),
        ("Q", "q", 20),
    ] {
        let home = work.path().join(site);
        std::fs::create_dir(&home).unwrap();
        hosts.insert(
            h.to_string(),
            Host {
                home,
                site: site.to_string(),
                addr: format!("{net}.{last}"),
            },
        );
    }
    let addrs = format!(
        "A={net}.10 B={net}.11 C={net}.12 R={net}.1\nURL='{url}'\nSHARE='{}'\n",
        share.display()
    );

    let mut groups = Groups::default();
    // Each check the page's text promises is made once, after the block it
    // follows; the list says which ran.
    let mut checked: Vec<&str> = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        if b.on == ["env"] {
            continue;
        }
        for h in &b.on {
            match h.as_str() {
                "P" => {
                    assert!(b.text.contains("stop"), "block {i} on P: {}", b.text);
                    primary.stop().unwrap();
                    continue;
                }
                "S" => {
                    assert!(b.text.contains("promote"), "block {i} on S: {}", b.text);
                    standby.promote();
                    continue;
                }
                _ => {}
            }
            let host = hosts
                .get(h)
                .unwrap_or_else(|| panic!("block {i}: no machine {h}"));
            let script = format!(
                "{env}\n# the test's values\n{addrs}SITE={} ADDR={}\n\n{}",
                host.site, host.addr, b.text
            );
            let o = bash(host, &script, &mut groups);
            let (out, err) = (
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
            );
            eprintln!("--- block {i} on {h}:\n{}{out}{err}", b.text);
            assert!(
                o.status.success(),
                "block {i} on {h} failed ({}):\n{}\nstdout: {out}\nstderr: {err}\n{}",
                o.status,
                b.text,
                std::fs::read_to_string(host.home.join("daemon.log")).unwrap_or_default()
            );
            // The checks of what the text says.
            if b.text
                .contains("granary replicate /cmip6/psl_185001.nc --to /site/b")
            {
                // The copy `replicate` made and the one the rule makes.
                let psl = holders(&first, "/cmip6/psl_185001.nc");
                assert!(
                    psl.contains(&"/site/a".to_string()) && psl.contains(&"/site/b".to_string()),
                    "{psl:?}"
                );
                wait_for(
                    Duration::from_secs(120),
                    "the [[replication]] rule copies /cmip6/tas_185001.nc",
                    || holders(&first, "/cmip6/tas_185001.nc").len() == 2,
                );
                checked.push("copies");
            }
            if h == "B" && b.text.contains("granary stat /cmip6/psl_185001.nc --json") {
                let stat: Value = serde_json::Deserializer::from_str(&out)
                    .into_iter::<Value>()
                    .next()
                    .unwrap()
                    .unwrap();
                let m = &stat["manifest"];
                assert!(
                    m["signer"].as_str().unwrap().starts_with("/site/a/KEY/"),
                    "B's copy is not signed by A: {stat}"
                );
                assert_eq!(m["signature_type"], "SignatureEd25519", "{stat}");
                // The root B serves is A's, byte for byte.
                let mut digest = |h: &str| -> Value {
                    let o = bash(
                        &hosts[h],
                        "granary stat /cmip6/psl_185001.nc --json",
                        &mut groups,
                    );
                    assert!(o.status.success());
                    serde_json::from_slice::<Value>(&o.stdout).unwrap()["manifest"]["digest"]
                        .clone()
                };
                assert_eq!(digest("A"), m["digest"], "{stat}");
                checked.push("signature");
            }
            if h == "Q" && b.text.contains("-o psl.nc") {
                let a = &hosts["A"].home;
                let want = std::fs::read(a.join(
                    "cmip6/CMIP6/CMIP/MIROC/MIROC6/historical/r1i1p1f1/Amon/psl/gn/v20181212/psl_Amon_MIROC6_historical_r1i1p1f1_gn_185001-185112.nc",
                ))
                .unwrap();
                let got = std::fs::read(hosts["Q"].home.join("psl.nc")).unwrap();
                assert!(got == want, "the consumer's psl.nc differs from A's file");
                assert!(
                    std::fs::read_to_string(format!("/proc/{}/stat", read_pid(&hosts["A"])))
                        .map_or(true, |s| s.contains(") Z ")),
                    "A still runs"
                );
                checked.push("fetched after A died");
            }
            if h == "B" && b.text.contains("/cmip6/tos_2015.nc") {
                assert!(
                    count(&hosts["B"].data().join("catalog-queue")) > 0,
                    "B's record is not queued while no server takes writes"
                );
                checked.push("queued");
            }
            if h == "Q" && b.text.contains("-o tos.nc") {
                assert!(out.contains("/site/b"), "locate: {out}");
                let want = std::fs::read(hosts["B"].home.join(
                    "cmip6/CMIP6/ScenarioMIP/MOHC/UKESM1-0-LL/ssp585/r1i1p1f2/Omon/tos/gn/v20190726/tos_Omon_UKESM1-0-LL_ssp585_r1i1p1f2_gn_201501-201612.nc",
                ))
                .unwrap();
                assert!(std::fs::read(hosts["Q"].home.join("tos.nc")).unwrap() == want);
                checked.push("fetched after the promotion");
            }
        }
        if b.on.iter().any(|h| h == "S") {
            // "B's queued record arrives within seconds, with no restart."
            let t = Instant::now();
            wait_for(
                Duration::from_secs(60),
                "B's queued record in the promoted catalog",
                || holders(&promoted, "/cmip6/tos_2015.nc") == ["/site/b"],
            );
            wait_for(Duration::from_secs(60), "B's queue drained", || {
                count(&hosts["B"].data().join("catalog-queue")) == 0
            });
            eprintln!(
                "B's queued record arrived {:?} after the promotion",
                t.elapsed()
            );
            checked.push("promotion absorbed");
        }
    }
    assert_eq!(
        checked,
        [
            "copies",
            "signature",
            "fetched after A died",
            "queued",
            "promotion absorbed",
            "fetched after the promotion"
        ],
        "the page's walkthrough no longer has the steps the test checks"
    );
    drop(groups);
}

/// The pid in `host`'s `daemon.pid`.
fn read_pid(host: &Host) -> u32 {
    std::fs::read_to_string(host.home.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}
