//! `granary put --segment-size` (what bench/netns-goodput.sh varies): the
//! daemon-side and local ingest both honour it, larger segments fetch back
//! byte-identical, and out-of-range sizes are refused.

use crate::common;

use common::Daemon;

#[test]
fn put_segment_size_round_trips() {
    let d = Daemon::start(&["--max-packet", "40000"]);
    let data: Vec<u8> = (0..200_000u32).map(|i| (i ^ (i >> 9)) as u8).collect();
    let f = d.dir.path().join("in.bin");
    std::fs::write(&f, &data).unwrap();
    for (name, size, from_stdin) in [("/seg/a", 16384u32, false), ("/seg/b", 1024, true)] {
        let o = if from_stdin {
            // Standard input is ingested by the CLI itself, not the daemon.
            d.command(&["put", "-", name, "--segment-size", &size.to_string()])
                .stdin(std::fs::File::open(&f).unwrap())
                .output()
                .unwrap()
        } else {
            d.cli(&[
                "put",
                f.to_str().unwrap(),
                name,
                "--segment-size",
                &size.to_string(),
            ])
        };
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stat: serde_json::Value =
            serde_json::from_str(d.ok(&["stat", name]).split("\npath ").next().unwrap()).unwrap();
        assert_eq!(stat["segment_size"], size, "{name}");
        let out = d.dir.path().join("out.bin");
        d.ok(&["get", name, "-o", out.to_str().unwrap()]);
        assert_eq!(std::fs::read(&out).unwrap(), data, "{name}");
        std::fs::remove_file(out).unwrap();
    }
    for bad in ["100", "2000000", "x"] {
        let o = d.cli(&[
            "put",
            f.to_str().unwrap(),
            "/seg/bad",
            "--segment-size",
            bad,
        ]);
        assert!(!o.status.success(), "--segment-size {bad} accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("segment-size") && !err.contains("panicked"),
            "{err}"
        );
    }
}
