//! `granary linkem` as a user runs it (no namespaces needed: loopback):
//! bad arguments fail clearly, a running relay delays both ways and
//! prints its counters when stopped.

use std::io::BufRead;
use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn granary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_granary"))
}

#[test]
fn bad_arguments_are_refused_with_the_reason() {
    for (args, want) in [
        (vec!["--delay", "10"], "give a unit"),
        (vec!["--loss", "120%"], "between 0 and 100%"),
        (vec!["--rate", "fast"], "not a rate"),
        (vec!["--queue", "10"], "at least 1500 bytes"),
        (vec!["--up-delay=-3ms"], "out of range"),
    ] {
        let o = granary()
            .args(["linkem", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} accepted");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = granary()
        .args(["linkem", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--to"));
}

#[test]
fn relays_with_delay_and_reports_counters() {
    let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
    let echo_addr = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut b = [0u8; 2048];
        while let Ok((n, a)) = echo.recv_from(&mut b) {
            let _ = echo.send_to(&b[..n], a);
        }
    });
    let mut child = granary()
        .args(["linkem", "--listen", "127.0.0.1:0", "--to"])
        .arg(echo_addr.to_string())
        .args(["--up-delay", "3ms", "--down-delay", "7ms", "--seed", "9"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("listening udp://")
        .expect("first line names the address")
        .parse::<std::net::SocketAddr>()
        .unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 64];
    let mut rtts = vec![];
    for i in 0..20u8 {
        let t = Instant::now();
        c.send_to(&[i; 33], addr).unwrap();
        let (n, from) = c.recv_from(&mut b).unwrap();
        rtts.push(t.elapsed());
        assert_eq!((n, from, b[0]), (33, addr, i));
    }
    rtts.sort();
    // The configured delay is applied: never sooner (a lower bound only: a
    // loaded machine makes round trips longer, never shorter).
    assert!(rtts[0] >= Duration::from_micros(9_500), "min {:?}", rtts[0]);
    eprintln!("median {:?}", rtts[10]);
    Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let stats: serde_json::Value =
        serde_json::from_str(&lines.next().expect("counters on stop").unwrap()).unwrap();
    child.wait().unwrap();
    assert_eq!(stats["sessions"], 1);
    assert_eq!(stats["up"]["sent"], 20);
    assert_eq!(stats["down"]["sent"], 20);
    assert_eq!(stats["up"]["sent_bytes"], 20 * 33);
    assert_eq!(stats["up"]["lost"], 0);
}
