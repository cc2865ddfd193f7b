//! carepo's experiment (seed 001, Fig. 3 / Table VI) on the netns testbed:
//! server —(2.5 Mbit/s down, 0.5 up, 20 ms each way)— gateway — LAN with
//! client1 and client2. Two versions of a generated, tar-packed data set;
//! client1 fetches version 1, client2 version 2, first by name only
//! (`--no-dedup`), then with dedup fetch (client1 publishes what it got;
//! client2 asks client1 by hash first). Prints both times side by side, the
//! saving and carepo's 38%, with peak RSS of each `granary get`.

#[allow(dead_code)] // each benchmark uses part of it
mod netns_node;

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use granary_store::chunking::noise;
use granary_testbed::topology::CarepoFig3;
use granary_testbed::{Options, Testbed};
use netns_node::{cli, cmd, run_sampled, start_node, Node};

#[derive(Parser)]
struct Args {
    /// The granary binary.
    #[arg(long)]
    granary: PathBuf,
    /// Files in the data set.
    #[arg(long, default_value_t = 40)]
    files: usize,
    /// Average file size (KiB).
    #[arg(long, default_value_t = 96)]
    file_kib: usize,
    /// Files changed between the versions.
    #[arg(long, default_value_t = 4)]
    changed: usize,
    /// Chunking for the server's puts.
    #[arg(long, default_value = "fastcdc")]
    chunking: String,
}

/// `granary get` with peak RSS sampling: (seconds, peak KiB, JSON).
fn get(
    g: &Path,
    n: &Node,
    name: &str,
    out: &Path,
    extra: &[&str],
) -> (f64, u64, serde_json::Value) {
    // (Published with `--sign digest`: integrity only.)
    let mut args = vec![
        "get",
        name,
        "-o",
        out.to_str().unwrap(),
        "--json",
        "-q",
        "--integrity-only",
    ];
    args.extend_from_slice(extra);
    let r = run_sampled(cmd(g, n, &args));
    assert!(r.ok, "granary {args:?} failed:\n{}", r.stderr);
    let v = serde_json::from_str(r.stdout.trim()).unwrap();
    (r.secs, r.peak_kib, v)
}

/// Two versions of a data set as tar files: v2 has `changed` files
/// rewritten, one removed and one added.
fn dataset(dir: &Path, a: &Args) -> (PathBuf, PathBuf) {
    let (d1, d2) = (dir.join("v1"), dir.join("v2"));
    for d in [&d1, &d2] {
        std::fs::create_dir_all(d).unwrap();
    }
    for i in 0..a.files {
        let len = a.file_kib * 1024 / 2 + (i * 7919 % (a.file_kib * 1024));
        let body = noise(len, 1000 + 2 * i as u64);
        std::fs::write(d1.join(format!("file{i:03}.dat")), &body).unwrap();
        if i == 0 {
            continue; // removed in v2
        }
        let body2 = if i <= a.changed {
            noise(len, 5000 + 2 * i as u64)
        } else {
            body
        };
        std::fs::write(d2.join(format!("file{i:03}.dat")), &body2).unwrap();
    }
    std::fs::write(d2.join("new.dat"), noise(a.file_kib * 1024, 77)).unwrap();
    let mut tars = Vec::new();
    for (d, t) in [(&d1, "v1.tar"), (&d2, "v2.tar")] {
        let out = dir.join(t);
        let ok = Command::new("tar")
            .args(["--sort=name", "-cf", out.to_str().unwrap(), "-C"])
            .arg(d)
            .arg(".")
            .status()
            .unwrap()
            .success();
        assert!(ok, "tar failed");
        tars.push(out);
    }
    (tars[0].clone(), tars[1].clone())
}

fn bytes_from(v: &serde_json::Value, src: &str) -> u64 {
    v["dedup"][0]["report"][src]["bytes"].as_u64().unwrap_or(0)
}

fn main() {
    let a = Args::parse();
    let g = a.granary.clone();
    let mut tb = Testbed::new(Options::new(&g)).expect("testbed (needs root)");
    let t = CarepoFig3::build(&mut tb, 2).unwrap();
    let (h1, h2) = (t.clients[0], t.clients[1]);
    let server = start_node::<&str>(&mut tb, t.server, &g, "carepo", &[]);
    let gw = start_node::<&str>(&mut tb, t.gateway, &g, "carepo", &[]);
    let c1 = start_node::<&str>(&mut tb, h1, &g, "carepo", &[]);
    let c2 = start_node::<&str>(&mut tb, h2, &g, "carepo", &[]);
    let to_server = tb.udp_path(t.wan, t.gateway, 6363).unwrap();
    let gw_lan = tb.lan_addr(t.lan, t.gateway).unwrap();
    let lan = |h| tb.lan_addr(t.lan, h).unwrap();
    let (l1, l2) = (lan(h1), lan(h2));
    cli(
        &g,
        &gw,
        &["route", "add", "/carepo", &format!("udp4://{to_server}")],
    );
    let hash = "/localhop/granary/sha256";
    for (c, other) in [(&c1, l2), (&c2, l1)] {
        cli(
            &g,
            c,
            &["route", "add", "/carepo", &format!("udp4://{gw_lan}:6363")],
        );
        cli(
            &g,
            c,
            &["route", "add", hash, &format!("udp4://{other}:6363")],
        );
    }
    let (v1, v2) = dataset(&server.dir, &a);
    let (s1, s2) = (
        std::fs::metadata(&v1).unwrap().len(),
        std::fs::metadata(&v2).unwrap().len(),
    );
    for mode in ["plain", "dedup"] {
        for (f, n) in [(&v1, "v1"), (&v2, "v2")] {
            let name = format!("/carepo/{mode}/{n}");
            cli(
                &g,
                &server,
                &[
                    "put",
                    f.to_str().unwrap(),
                    &name,
                    "--chunking",
                    &a.chunking,
                    "--sign",
                    "digest",
                ],
            );
        }
    }
    println!(
        "data set: {} files of ~{} KiB, tar v1 {s1} B, v2 {s2} B ({} changed, 1 removed, 1 added); chunking {}",
        a.files, a.file_kib, a.changed, a.chunking
    );
    let plain = ["--no-dedup", "--no-publish"];
    let (pa, pra, _) = get(&g, &c1, "/carepo/plain/v1", &c1.dir.join("p1"), &plain);
    let (pb, prb, _) = get(&g, &c2, "/carepo/plain/v2", &c2.dir.join("p2"), &plain);
    let (da, rda, va) = get(&g, &c1, "/carepo/dedup/v1", &c1.dir.join("d1"), &[]);
    let (db, rdb, vb) = get(&g, &c2, "/carepo/dedup/v2", &c2.dir.join("d2"), &[]);
    for (p, want) in [
        (c1.dir.join("p1"), &v1),
        (c2.dir.join("p2"), &v2),
        (c1.dir.join("d1"), &v1),
        (c2.dir.join("d2"), &v2),
    ] {
        assert!(
            std::fs::read(&p).unwrap() == std::fs::read(want).unwrap(),
            "{} differs",
            p.display()
        );
    }
    println!("| | file 1 (client1) | file 2 (client2) | total | peak RSS of get |");
    println!("|---|---|---|---|---|");
    println!(
        "| by name (`--no-dedup`) | {pa:.2} s | {pb:.2} s | {:.2} s | {} / {} MiB |",
        pa + pb,
        pra / 1024,
        prb / 1024
    );
    println!(
        "| dedup fetch | {da:.2} s | {db:.2} s | {:.2} s | {} / {} MiB |",
        da + db,
        rda / 1024,
        rdb / 1024
    );
    println!(
        "file 1 dedup: producer {} B, neighbours {} B, repeated {} B; file 2 dedup: neighbours {} B, producer {} B, repeated {} B",
        bytes_from(&va, "producer"),
        bytes_from(&va, "neighbours"),
        bytes_from(&va, "repeated"),
        bytes_from(&vb, "neighbours"),
        bytes_from(&vb, "producer"),
        bytes_from(&vb, "repeated"),
    );
    println!(
        "saving in total download time: {:.0}% (carepo, two Linux Mint images: 38%); file 2 alone: {:.0}%",
        100.0 * (1.0 - (da + db) / (pa + pb)),
        100.0 * (1.0 - db / pb)
    );
}
