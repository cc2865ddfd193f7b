//! The HTTP gateway under hostile clients (issue 32), against a real daemon
//! over real sockets: floods of connections that send nothing or half a
//! header and of idle WebSocket faces beside a normal request, the header,
//! idle and per-client limits, descriptor exhaustion under a low `ulimit -n`
//! with recovery, `/localhost` and `/localhop` by every HTTP path and
//! encoding and over the WebSocket face, a JSON body for every error status,
//! and HTTPS (self-signed and given certificates, HTTP/2 by ALPN).

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// Raises this process's soft limit on open files to its hard limit (the
/// floods hold a few thousand sockets).
fn raise_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut r = getrlimit(Resource::Nofile);
    if r.current < r.maximum {
        r.current = r.maximum;
        setrlimit(Resource::Nofile, r).expect("raise RLIMIT_NOFILE");
    }
}

/// A TCP connection to `dst` from the loopback address `src` (all of
/// 127/8 is this host), so floods come from other clients than the
/// measured request.
fn connect_from(src: Ipv4Addr, dst: SocketAddr) -> std::io::Result<TcpStream> {
    use rustix::net::{bind, connect, socket, AddressFamily, SocketType};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None)?;
    bind(&fd, &SocketAddrV4::new(src, 0))?;
    connect(&fd, &dst)?;
    Ok(TcpStream::from(fd))
}

fn flood_source(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 1 + (i / 200) as u8, 2 + (i % 200) as u8)
}

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, k: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    /// Asserts a JSON error body with an `error` string.
    fn assert_json_error(&self, what: &str) -> String {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{what}: {self:?}"
        );
        let v: Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {self:?}"));
        v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no error key: {v}"))
            .to_string()
    }
}

/// Reads one response (head, then `content-length` bytes or to the end).
fn read_response(s: &mut TcpStream) -> std::io::Result<Resp> {
    let mut buf = Vec::new();
    let mut b = [0u8; 65536];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = s.read(&mut b)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("closed after {:?}", String::from_utf8_lossy(&buf)),
            ));
        }
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = buf[head_end..].to_vec();
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok());
    match len {
        Some(n) => {
            while body.len() < n {
                let k = s.read(&mut b)?;
                if k == 0 {
                    break;
                }
                body.extend_from_slice(&b[..k]);
            }
            body.truncate(n);
        }
        None if status != 101 => {
            let _ = s.read_to_end(&mut body);
        }
        None => {}
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

/// Sends `req` on a new connection and reads the answer (10 s at most).
fn raw(addr: &str, req: &[u8]) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req).unwrap();
    read_response(&mut s).unwrap_or_else(|e| {
        panic!(
            "{}: {e}",
            String::from_utf8_lossy(&req[..req.len().min(200)])
        )
    })
}

fn get(addr: &str, path: &str) -> Resp {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// How long a normal `GET /api/status` takes; asserts it answers 200.
fn timed_status(addr: &str) -> Duration {
    let t = Instant::now();
    let r = get(addr, "/api/status");
    let took = t.elapsed();
    assert_eq!(r.status, 200, "{r:?}");
    took
}

const WS_UPGRADE: &str = "GET /ndn HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// A client's masked binary WebSocket frame.
fn ws_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x82];
    let n = payload.len();
    if n < 126 {
        f.push(0x80 | n as u8);
    } else {
        f.push(0x80 | 126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    }
    let key = [0x12u8, 0x34, 0x56, 0x78];
    f.extend_from_slice(&key);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    f
}

/// The next frame's opcode from the server, or None on timeout or close.
fn ws_read_frame(s: &mut TcpStream, wait: Duration) -> Option<(u8, Vec<u8>)> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut h = [0u8; 2];
    s.read_exact(&mut h).ok()?;
    let mut n = (h[1] & 0x7f) as usize;
    if n == 126 {
        let mut l = [0u8; 2];
        s.read_exact(&mut l).ok()?;
        n = u16::from_be_bytes(l) as usize;
    } else if n == 127 {
        let mut l = [0u8; 8];
        s.read_exact(&mut l).ok()?;
        n = u64::from_be_bytes(l) as usize;
    }
    let mut p = vec![0u8; n];
    s.read_exact(&mut p).ok()?;
    Some((h[0] & 0x0f, p))
}

fn interest(uri: &str) -> Vec<u8> {
    let mut f = granary_packet::InterestFields::new(granary_packet::Name::from_uri(uri).unwrap());
    f.can_be_prefix = true;
    f.must_be_fresh = true;
    f.nonce = Some(fastrand::u32(..));
    f.lifetime = Some(2000);
    f.encode().wire().to_vec()
}

fn http_addr(d: &Daemon) -> String {
    d.http.clone().expect("no `gateway http://` line")
}

#[test]
fn floods_of_silent_connections_and_idle_websockets_do_not_delay_a_request() {
    raise_nofile();
    // The per-client cap is lifted here so that every flooding connection
    // is held: what keeps the request fast is that they do not count.
    let d = Daemon::start(&[
        "--http",
        "127.0.0.1:0",
        "--http-max-conns",
        "16",
        "--http-max-conns-per-client",
        "100000",
        "--http-header-timeout",
        "60",
    ]);
    let addr = http_addr(&d);
    let dst: SocketAddr = addr.parse().unwrap();
    let before = timed_status(&addr);
    eprintln!("GET /api/status alone: {before:?}");
    // 500 connections that send nothing and 500 that send half a header.
    let mut held = Vec::new();
    for i in 0..1000 {
        let mut s = connect_from(flood_source(i), dst).expect("flood connect");
        if i % 2 == 1 {
            s.write_all(b"GET /api/status HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .unwrap();
        }
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let t = timed_status(&addr);
        eprintln!("GET /api/status beside 1,000 silent connections: {t:?}");
        // Answered (a 10 s read timeout is the hang guard); how long it took
        // is printed: a loaded machine moves it, the mechanism does not.
    }
    // They are all still open (held, not refused).
    let mut open = 0;
    for s in &mut held {
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => open += 1,
            _ => {}
        }
    }
    assert_eq!(open, 1000, "silent connections closed early");
    drop(held);
    // 1,000 WebSocket faces that then stay idle: the first 256 (the default
    // cap) are faces, the rest get 503 JSON; neither delays a request.
    let mut faces = Vec::new();
    let (mut ok, mut refused) = (0, 0);
    for i in 0..1000 {
        let mut s = connect_from(flood_source(i), dst).expect("ws connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(WS_UPGRADE.as_bytes()).unwrap();
        let r = read_response(&mut s).unwrap();
        match r.status {
            101 => ok += 1,
            503 => {
                let e = r.assert_json_error("WebSocket over the cap");
                assert!(e.contains("WebSocket"), "{e}");
                refused += 1;
            }
            other => panic!("upgrade {i}: {other} {r:?}"),
        }
        faces.push(s);
    }
    assert_eq!((ok, refused), (256, 744));
    for _ in 0..3 {
        let t = timed_status(&addr);
        eprintln!("GET /api/status beside 256 idle WebSocket faces: {t:?}");
    }
    let r = get(&addr, "/api/search?q=tas");
    assert!(r.status == 200 || r.status == 503, "{r:?}");
}

#[test]
fn timeouts_and_the_per_client_cap() {
    let d = Daemon::start(&[
        "--http",
        "127.0.0.1:0",
        "--http-header-timeout",
        "1",
        "--http-idle-timeout",
        "1",
        "--http-max-conns-per-client",
        "4",
    ]);
    let addr = http_addr(&d);
    let dst: SocketAddr = addr.parse().unwrap();
    // Slowloris: a head never finished is closed by the header timeout.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let t = Instant::now();
    let mut rest = Vec::new();
    let end = slow.read_to_end(&mut rest);
    assert!(
        end.is_ok() || end.as_ref().unwrap_err().kind() == std::io::ErrorKind::ConnectionReset,
        "slow connection not closed: {end:?}"
    );
    eprintln!("slow head closed after {:?}", t.elapsed());
    // So is a connection that sends nothing at all.
    let mut silent = TcpStream::connect(&addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    let t = Instant::now();
    let end = silent.read_to_end(&mut rest);
    assert!(
        end.is_ok() || end.as_ref().unwrap_err().kind() == std::io::ErrorKind::ConnectionReset,
        "silent connection not closed: {end:?}"
    );
    eprintln!("silent connection closed after {:?}", t.elapsed());
    // Trickling a byte at a time does not extend it.
    let mut trickle = TcpStream::connect(&addr).unwrap();
    let t = Instant::now();
    let mut closed = false;
    for b in b"GET / HTTP/1.1\r\nHost: x\r\nX-A: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
        if trickle.write_all(&[*b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Closed before the whole head (55 bytes, 11 s) was trickled.
    assert!(closed, "a trickled head was read for {:?}", t.elapsed());
    // An idle WebSocket face is closed after the idle timeout.
    let mut ws = TcpStream::connect(&addr).unwrap();
    ws.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ws.write_all(WS_UPGRADE.as_bytes()).unwrap();
    assert_eq!(read_response(&mut ws).unwrap().status, 101);
    let t = Instant::now();
    let f = ws_read_frame(&mut ws, Duration::from_secs(6));
    assert!(
        matches!(f, Some((8, _)) | None) && t.elapsed() < Duration::from_secs(5),
        "idle face not closed: {f:?} after {:?}",
        t.elapsed()
    );
    // Per client: four connections from one address are served, the fifth
    // is answered 503 JSON and closed; another address is not affected.
    std::thread::sleep(Duration::from_millis(300));
    let src = Ipv4Addr::new(127, 0, 9, 9);
    let held: Vec<TcpStream> = (0..4).map(|_| connect_from(src, dst).unwrap()).collect();
    let mut fifth = connect_from(src, dst).unwrap();
    fifth
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    fifth
        .write_all(b"GET /api/status HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let r = read_response(&mut fifth).unwrap();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.assert_json_error("per-client cap").contains("per client"));
    assert_eq!(timed_status(&addr).as_secs(), 0);
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    let mut again = connect_from(src, dst).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    again
        .write_all(b"GET /api/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut again).unwrap().status, 200);
}

/// Starts `granary daemon` under `prlimit --nofile=SOFT:HARD`, its standard
/// error in a file; returns it with its stdout lines up to `ready`.
fn daemon_under_limit(
    dir: &Path,
    soft: u64,
    hard: u64,
    extra: &[&str],
) -> (Child, Vec<String>, PathBuf) {
    let err = dir.join("stderr.txt");
    let bin = env!("CARGO_BIN_EXE_granary");
    let mut child = Command::new("prlimit")
        .arg(format!("--nofile={soft}:{hard}"))
        .arg("--")
        .arg(bin)
        .args([
            "--data-dir",
            dir.join("d").to_str().unwrap(),
            "--socket",
            dir.join("g.sock").to_str().unwrap(),
            "daemon",
            "--http",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env("GRANARY_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("prlimit (util-linux) must be installed");
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = Vec::new();
    loop {
        let l = lines
            .next()
            .unwrap_or_else(|| panic!("daemon exited: {}", std::fs::read_to_string(&err).unwrap()))
            .unwrap();
        if l == "ready" {
            break;
        }
        out.push(l);
    }
    (child, out, err)
}

fn stop(mut c: Child) {
    let _ = Command::new("kill").arg(c.id().to_string()).status();
    let _ = c.wait();
}

#[test]
fn out_of_descriptors_answers_503_and_recovers() {
    raise_nofile();
    let dir = tempfile::tempdir().unwrap();
    // The soft limit is raised to the hard one at start, and said.
    let (c, _, err) = daemon_under_limit(dir.path(), 200, 3000, &[]);
    stop(c);
    let log = std::fs::read_to_string(&err).unwrap();
    assert!(
        log.contains("open files limit raised from 200 to 3000"),
        "{log}"
    );
    // Both at 256: connections that are held exhaust the daemon.
    let (c, out, err) = daemon_under_limit(dir.path(), 256, 256, &["--http-header-timeout", "120"]);
    let addr = out
        .iter()
        .find_map(|l| l.strip_prefix("gateway http://"))
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let mut held = Vec::new();
    let mut refused = None;
    for i in 0..400 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s)
            .unwrap_or_else(|e| panic!("connection {i} left hanging or cut: {e}"));
        match r.status {
            // Kept open (keep-alive): it holds a descriptor.
            200 => held.push(s),
            503 => {
                refused = Some((i, r));
                break;
            }
            other => panic!("connection {i}: {other} {r:?}"),
        }
    }
    let (n, r) = refused.expect("400 connections never exhausted 256 descriptors");
    let e = r.assert_json_error("out of descriptors");
    assert!(e.contains("descriptors"), "{e}");
    // More while exhausted: 503 each time, never a hang.
    for _ in 0..5 {
        let r = get(&addr, "/api/openapi.json");
        assert_eq!(r.status, 503, "{r:?}");
    }
    // Released: served again, without a restart.
    drop(held);
    let t = Instant::now();
    loop {
        let r = get(&addr, "/api/status");
        if r.status == 200 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "not recovered: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    stop(c);
    let log = std::fs::read_to_string(&err).unwrap();
    assert!(log.contains("out of file descriptors"), "{log}");
    eprintln!("exhausted after {n} held connections");
}

#[test]
fn localhost_and_localhop_are_unreachable() {
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let addr = http_addr(&d);
    // The unix socket has it (what must not leak).
    for p in [
        "/data/localhost/nfd/faces/channels",
        "/data/localhost/nfd/faces/list",
        "/data/localhost/nfd/fib/list",
        "/data/localhost/nfd/rib/list",
        "/data/localhost/nfd/status/general",
        "/data/localhop/nfd/rib/list",
        "/data/%6Cocalhost/nfd/status/general",
        "/data/%6c%6f%63%61%6c%68%6f%73%74/nfd/status/general",
        "/data/%256Cocalhost/nfd/status/general",
        "/data/8=localhost/nfd/status/general",
        "/data/8%3Dlocalhost/nfd/status/general",
        "/data//localhost/nfd/status/general",
        "/data///localhost/nfd/status/general",
        "/data/LOCALHOST/nfd/status/general",
        "/data/localhop/granary/hash",
        "/data/ndn:/localhost/nfd/status/general",
        "/data/localhost/nfd/status/general?version=1",
        "/api/file/localhost/nfd/status/general",
        "/api/file/%6Cocalhost/nfd/faces/list",
        "/api/file//localhop/nfd/rib/list",
        "/esg-search/wget?dataset_id=/localhost/nfd/status/general",
        "/api/wget?name=/localhost/nfd/status/general",
        "/api/file/x?name=%2Flocalhost%2Fnfd",
        "/data/./localhost/nfd/status/general",
        "/data/localhost/../localhost/nfd/status/general",
    ] {
        let r = get(&addr, p);
        assert!(
            matches!(r.status, 400 | 403 | 404),
            "{p}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        r.assert_json_error(p);
        let body = String::from_utf8_lossy(&r.body);
        assert!(
            !body.contains("nfdVersion") && !body.contains("tcp://"),
            "{p}: {body}"
        );
    }
    // Not a blanket refusal: a component named so deeper in a name is a name.
    let r = get(&addr, "/data/test/localhost/x");
    assert_eq!(r.status, 404, "{r:?}");
    // The WebSocket face: no Data for /localhost or /localhop, while an
    // ordinary name gets its answer (a Nack: nothing holds it).
    let mut ws = TcpStream::connect(&addr).unwrap();
    ws.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ws.write_all(WS_UPGRADE.as_bytes()).unwrap();
    assert_eq!(read_response(&mut ws).unwrap().status, 101);
    for uri in [
        "/localhost/nfd/status/general",
        "/localhost/nfd/faces/list",
        "/localhop/nfd/rib/list",
        "/LOCALHOST/nfd/status/general",
    ] {
        ws.write_all(&ws_frame(&interest(uri))).unwrap();
        let f = ws_read_frame(&mut ws, Duration::from_secs(3));
        assert!(
            f.is_none(),
            "{uri}: answered over the WebSocket face: {f:?}"
        );
    }
    ws.write_all(&ws_frame(&interest("/granary-test/nothing/here")))
        .unwrap();
    let f = ws_read_frame(&mut ws, Duration::from_secs(5));
    assert!(
        matches!(f, Some((2, _))),
        "an ordinary Interest got no answer: {f:?}"
    );
}

#[test]
fn every_error_is_json() {
    let d = Daemon::start(&["--http", "127.0.0.1:0", "--http-max-conns-per-client", "3"]);
    let a = http_addr(&d);
    let cases: Vec<(u16, Vec<u8>)> = vec![
        (400, b"GET /x HTTP/1.1 junk\r\nHost: x\r\n\r\n".to_vec()),
        (400, b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (400, b"GET /data/a\x7fb HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        (400, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n".to_vec()),
        (400, b"GET /data/a/%FF HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        // axum's own rejection (no upgrade headers), made JSON.
        (400, b"GET /ndn HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        (403, b"GET /data/localhost/nfd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        (404, b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()),
        (405, b"POST /api/search HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx".to_vec()),
        (413, b"GET /api/search HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n".to_vec()),
        (
            414,
            format!("GET /api/search?q={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "x".repeat(9000)).into_bytes(),
        ),
        (
            414,
            format!("GET /api/search?q={} HTTP/1.1\r\nHost: x\r\n\r\n", "x".repeat(100_000)).into_bytes(),
        ),
        (
            414,
            format!("GET /esg-search/search?q={} HTTP/1.1\r\nHost: x\r\n\r\n", "x".repeat(100_000)).into_bytes(),
        ),
        (
            431,
            format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "y".repeat(200_000)).into_bytes(),
        ),
        (
            431,
            format!(
                "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
                (0..120).map(|i| format!("X-H{i}: v\r\n")).collect::<String>()
            )
            .into_bytes(),
        ),
    ];
    for (want, req) in cases {
        let what = String::from_utf8_lossy(&req[..req.len().min(60)]).into_owned();
        let r = raw(&a, &req);
        assert_eq!(r.status, want, "{what}: {r:?}");
        r.assert_json_error(&what);
    }
    // HTTP/2 (h2c by prior knowledge): a head over 128 KiB (2,000 headers,
    // 170 kB as h2 counts them) is a JSON 431 too, not h2's own bodiless
    // one; a head under the cap is served.
    let (status, body) = h2_get_with_headers(&a, "/api/status", 2000);
    assert_eq!(status, 431, "{}", String::from_utf8_lossy(&body));
    let e: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "h2 431 not JSON ({e}): {:?}",
            String::from_utf8_lossy(&body)
        )
    });
    assert!(e["error"].as_str().unwrap().contains("128 KiB"), "{e}");
    let (status, body) = h2_get_with_headers(&a, "/nowhere", 1000);
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    // HEAD of an error: the JSON content type, no body.
    let r = raw(
        &a,
        b"HEAD /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        (r.status, r.header("content-type")),
        (404, Some("application/json"))
    );
    // 503: over the per-client cap.
    let held: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(&a).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let r = get(&a, "/api/status");
    assert_eq!(r.status, 503, "{r:?}");
    r.assert_json_error("503");
    drop(held);
}

/// (status, body) of `GET path` over HTTP/2 (h2c, prior knowledge) with
/// `n` headers `x-rep` of 48 bytes (85 bytes each as h2 counts them). The
/// test speaks HTTP/2 with h2 itself: curl (nghttp2) does not send a header
/// block it estimates over 64 KiB, below the gateway's 128 KiB cap.
fn h2_get_with_headers(addr: &str, path: &str, n: usize) -> (u16, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut client = client.ready().await.unwrap();
        let mut req = http::Request::get(format!("http://{addr}{path}"))
            .body(())
            .unwrap();
        let v = http::HeaderValue::from_str(&"b".repeat(48)).unwrap();
        for _ in 0..n {
            req.headers_mut().append("x-rep", v.clone());
        }
        let (resp, _) = client.send_request(req, true).unwrap();
        let resp = resp.await.unwrap();
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut out = Vec::new();
        while let Some(c) = body.data().await {
            let c = c.unwrap();
            let _ = body.flow_control().release_capacity(c.len());
            out.extend_from_slice(&c);
        }
        (status, out)
    })
}

fn curl(args: &[&str]) -> (String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("b");
    let o = Command::new("curl")
        .args(["-s", "-g", "--max-time", "30", "-o", body.to_str().unwrap()])
        .args(args)
        .output()
        .expect("curl");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        std::fs::read(&body).unwrap_or_default(),
    )
}

/// (https base URL, certificate path) from the daemon's line.
fn https_line(out: &[String]) -> (String, String) {
    let l = out
        .iter()
        .find(|l| l.starts_with("gateway https://"))
        .unwrap_or_else(|| panic!("no https line: {out:?}"));
    let rest = l.strip_prefix("gateway ").unwrap();
    let (url, cert) = rest.split_once(" (certificate: ").unwrap();
    let cert = cert.strip_suffix(", for REQUESTS_CA_BUNDLE)").unwrap();
    (url.trim_end_matches('/').to_string(), cert.to_string())
}

#[test]
fn https_self_signed_and_given_certificates_with_http2() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let (c, out, _) = daemon_under_limit(dir.path(), 4096, 4096, &["--https", "127.0.0.1:0"]);
    let (_, cert_path) = https_line(&out);
    let cert = data.join("gateway/tls/cert.pem");
    let key = data.join("gateway/tls/key.pem");
    assert_eq!(cert_path, cert.to_str().unwrap());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let src = dir.path().join("f.bin");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &bytes).unwrap();
    let o = granary()
        .args([
            "--data-dir",
            data.to_str().unwrap(),
            "--socket",
            dir.path().join("g.sock").to_str().unwrap(),
            "put",
            src.to_str().unwrap(),
            "/test/tls.bin",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let first = std::fs::read(&cert).unwrap();
    stop(c);
    // A second start on the same directory reuses the certificate.
    let (c, out, _) = daemon_under_limit(dir.path(), 4096, 4096, &["--https", "127.0.0.1:0"]);
    let (base, cert_path) = https_line(&out);
    assert_eq!(
        cert_path,
        data.join("gateway/tls/cert.pem").to_str().unwrap()
    );
    assert_eq!(
        std::fs::read(&cert_path).unwrap(),
        first,
        "certificate not reused"
    );
    let (w, body) = curl(&[
        "--cacert",
        &cert_path,
        "-w",
        "%{http_code} %{http_version}",
        &format!("{base}/api/status"),
    ]);
    assert_eq!(w, "200 2", "{}", String::from_utf8_lossy(&body));
    let (w, _) = curl(&[
        "--cacert",
        &cert_path,
        "--http1.1",
        "-w",
        "%{http_code} %{http_version}",
        &format!("{base}/api/status"),
    ]);
    assert_eq!(w, "200 1.1");
    let (w, body) = curl(&[
        "--cacert",
        &cert_path,
        "--http2",
        "-r",
        "1000-200999",
        "-w",
        "%{http_code} %{http_version}",
        &format!("{base}/data/test/tls.bin"),
    ]);
    assert_eq!(w, "206 2");
    assert_eq!(body, &bytes[1000..201000]);
    // Errors over HTTPS are JSON too.
    let (w, body) = curl(&[
        "--cacert",
        &cert_path,
        "-w",
        "%{http_code}",
        &format!("{base}/data/localhost/nfd/status/general"),
    ]);
    assert_eq!(w, "403");
    assert!(serde_json::from_slice::<Value>(&body).unwrap()["error"].is_string());
    // hyper's own answer (HTTP/1.1, over 65,534 bytes of target) and the
    // guard's (HTTP/2, over 8 KB of query) are JSON over TLS too. (HTTP/2
    // cannot carry a target over 65,534 bytes at all: the stream is reset.)
    for (v, n) in [("--http1.1", 100_000), ("--http2", 20_000)] {
        let long = format!("{base}/api/search?q={}", "x".repeat(n));
        let (w, body) = curl(&["--cacert", &cert_path, v, "-w", "%{http_code}", &long]);
        assert_eq!(w, "414", "{v}");
        let e: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|e| panic!("{v}: not JSON ({e}): {}", String::from_utf8_lossy(&body)));
        assert!(e["error"].is_string(), "{v}: {e}");
    }
    // Without the certificate, curl refuses it (it is not trusted by default).
    let (w, _) = curl(&["-w", "%{http_code}", &format!("{base}/api/status")]);
    assert_eq!(w, "000");
    stop(c);
    // Given files: the same pair passed as --tls-cert/--tls-key.
    let given_dir = tempfile::tempdir().unwrap();
    let gc = given_dir.path().join("c.pem");
    let gk = given_dir.path().join("k.pem");
    std::fs::copy(&cert_path, &gc).unwrap();
    std::fs::copy(data.join("gateway/tls/key.pem"), &gk).unwrap();
    let (c, out, _) = daemon_under_limit(
        dir.path(),
        4096,
        4096,
        &[
            "--https",
            "127.0.0.1:0",
            "--tls-cert",
            gc.to_str().unwrap(),
            "--tls-key",
            gk.to_str().unwrap(),
        ],
    );
    let (base, shown) = https_line(&out);
    assert_eq!(shown, gc.to_str().unwrap());
    let (w, _) = curl(&[
        "--cacert",
        &shown,
        "-w",
        "%{http_code}",
        &format!("{base}/api/status"),
    ]);
    assert_eq!(w, "200");
    stop(c);
    // A bad certificate path is a clear start-up error.
    let o = granary()
        .args([
            "--data-dir",
            data.to_str().unwrap(),
            "--socket",
            dir.path().join("x.sock").to_str().unwrap(),
            "daemon",
            "--http",
            "off",
            "--https",
            "127.0.0.1:0",
            "--tls-cert",
            "/nonexistent/cert.pem",
            "--tls-key",
            gk.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("/nonexistent/cert.pem"), "{e}");
    // One without the other is refused.
    let o = granary()
        .args([
            "--data-dir",
            data.to_str().unwrap(),
            "daemon",
            "--http",
            "off",
            "--https",
            "127.0.0.1:0",
            "--tls-cert",
            gc.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--tls-key"));
}

/// A certificate and key (PEM) valid from `from` to `to` (seconds since the
/// epoch), written under `dir` as `<name>.pem` and `<name>.key`.
fn certificate(dir: &Path, name: &str, from: i64, to: i64) -> (PathBuf, PathBuf) {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let at = |s: i64| {
        let days = s.div_euclid(86_400);
        // Days since the epoch to a civil date (Howard Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let y = (yoe + era * 400 + i64::from(m <= 2)) as i32;
        rcgen::date_time_ymd(y, m, d)
    };
    params.not_before = at(from);
    params.not_after = at(to);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (c, k) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

/// A certificate outside its validity period (or about to leave it) is
/// served all the same, but the daemon says so at start, naming the file and
/// the dates, and `/api/status` shows it (`tls`).
#[test]
fn https_certificate_outside_its_validity_is_reported() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let day = 86_400;
    let dir = tempfile::tempdir().unwrap();
    // (name, from, to, valid, what stderr and the warning say)
    let cases = [
        (
            "expired",
            now - 400 * day,
            now - 30 * day,
            false,
            Some("has expired"),
        ),
        (
            "future",
            now + 30 * day,
            now + 400 * day,
            false,
            Some("not valid yet"),
        ),
        (
            "soon",
            now - 30 * day,
            now + 3 * day,
            true,
            Some("expires soon"),
        ),
        ("fine", now - 30 * day, now + 300 * day, true, None),
    ];
    for (name, from, to, valid, says) in cases {
        let (c, k) = certificate(dir.path(), name, from, to);
        let run = tempfile::tempdir().unwrap();
        let (child, out, err) = daemon_under_limit(
            run.path(),
            4096,
            4096,
            &[
                "--https",
                "127.0.0.1:0",
                "--tls-cert",
                c.to_str().unwrap(),
                "--tls-key",
                k.to_str().unwrap(),
            ],
        );
        let http = out
            .iter()
            .find_map(|l| l.strip_prefix("gateway http://"))
            .unwrap_or_else(|| panic!("no http line: {out:?}"))
            .trim_end_matches('/')
            .to_string();
        let status: Value = serde_json::from_slice(&get(&http, "/api/status").body).unwrap();
        let tls = &status["tls"];
        let (base, _) = https_line(&out);
        // Served all the same (curl told not to check it).
        let (w, _) = curl(&["-k", "-w", "%{http_code}", &format!("{base}/api/status")]);
        let stderr = std::fs::read_to_string(&err).unwrap();
        stop(child);
        assert_eq!(w, "200", "{name}");
        assert_eq!(tls["certificate"], c.to_str().unwrap(), "{name}: {status}");
        assert_eq!(tls["valid"], valid, "{name}: {tls}");
        let dates = [&tls["not_before"], &tls["not_after"]].map(|d| {
            d.as_str()
                .unwrap_or_else(|| panic!("{name}: {tls}"))
                .to_string()
        });
        assert!(
            dates.iter().all(|d| d.ends_with("T00:00:00Z")),
            "{name}: {tls}"
        );
        match says {
            Some(what) => {
                let w = tls["warning"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: {tls}"));
                assert!(
                    w.contains(what) && w.contains(c.to_str().unwrap()),
                    "{name}: {w}"
                );
                let line = stderr
                    .lines()
                    .find(|l| l.contains(what))
                    .unwrap_or_else(|| panic!("{name}: no warning on stderr: {stderr}"));
                assert!(line.contains("WARN"), "{name}: {line}");
                assert!(line.contains(c.to_str().unwrap()), "{name}: {line}");
                for d in &dates {
                    assert!(line.contains(d.as_str()), "{name}: {line} lacks {d}");
                }
            }
            None => {
                assert!(tls["warning"].is_null(), "{name}: {tls}");
                assert!(!stderr.contains("TLS certificate"), "{name}: {stderr}");
            }
        }
    }
    // Without HTTPS there is no `tls`.
    let d = Daemon::start(&["--http", "127.0.0.1:0"]);
    let status: Value = serde_json::from_slice(&get(&http_addr(&d), "/api/status").body).unwrap();
    assert!(status["tls"].is_null(), "{status}");
}

// ---- Every request's work is bounded (issue 44) ----

/// Synthetic CMIP6 records in `datasets` datasets of three files each,
/// written to the data directory's embedded catalog before the daemon opens it.
fn fill_catalog(data: &Path, datasets: usize) {
    use granary_catalog::{Catalog, Record};
    let dir = data.join("catalog");
    std::fs::create_dir_all(&dir).unwrap();
    let cat = Catalog::open(dir.to_str().unwrap()).unwrap();
    let mut recs = Vec::new();
    for d in 0..datasets {
        let source = format!("Model{}", d % 37);
        let exp = ["historical", "ssp585", "piControl", "amip"][d % 4];
        let member = format!("r{}i1p1f1", 1 + d / 148);
        let var = ["tas", "pr", "psl", "uas", "vas", "hurs", "clt"][d % 7];
        for k in 0..3 {
            let y0 = 1850 + 50 * k;
            let file = format!(
                "{var}_Amon_{source}_{exp}_{member}_gn_{y0}01-{}12.nc",
                y0 + 49
            );
            let facets = [
                ("mip_era", "CMIP6".to_string()),
                ("activity_id", "CMIP".to_string()),
                ("institution_id", "INST".to_string()),
                ("source_id", source.clone()),
                ("experiment_id", exp.to_string()),
                ("member_id", member.clone()),
                ("variant_label", member.clone()),
                ("table_id", "Amon".to_string()),
                ("variable_id", var.to_string()),
                ("grid_label", "gn".to_string()),
                ("frequency", "mon".to_string()),
                ("version", "v20190308".to_string()),
            ];
            recs.push(Record {
                name: format!("/cmip6/CMIP/INST/{source}/{exp}/{member}/Amon/{var}/gn/{file}"),
                version: 1,
                project: "CMIP6".into(),
                facets: facets
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                title: file.clone(),
                size: 1000 + d as u64,
                time_start: Some(format!("{y0}-01-01T00:00:00")),
                time_end: Some(format!("{}-12-31T00:00:00", y0 + 49)),
                bbox: Some([-90.0, 90.0, 0.0, 358.75]),
                text: format!("{var} {source} {exp} air temperature"),
                ..Record::default()
            });
        }
    }
    cat.upsert_many(&recs).unwrap();
}

/// Percent-encodes everything but letters and digits.
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Seeded hostile requests: CQL2-JSON (deep nesting, long `like` patterns
/// with many wildcards, huge `in` lists, wide `or`s, long strings, invalid
/// dates) by POST and GET, Solr-style ESGF queries and free text.
fn hostile_requests(seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let eq = |p: &str, v: &str| format!(r#"{{"op":"=","args":[{{"property":"{p}"}},"{v}"]}}"#);
    let mut filters: Vec<String> = Vec::new();
    // The pattern that pinned a core: many wildcards against the item id.
    for n in [8, 40, 120, 250, 400] {
        let pat = "%a".repeat(n / 2) + "%b";
        filters.push(format!(
            r#"{{"op":"like","args":[{{"property":"id"}},"{pat}"]}}"#
        ));
        let pat: String = (0..n)
            .map(|_| ['%', '_', 'C', 'M', 'I', 'P', '6', '.'][rng.usize(..8)])
            .collect();
        filters.push(format!(
            r#"{{"op":"like","args":[{{"property":"id"}},"{pat}"]}}"#
        ));
    }
    for depth in [10, 31, 33, 64, 100] {
        let mut f = eq("variable_id", "tas");
        for i in 0..depth {
            f = if i % 2 == 0 {
                format!(r#"{{"op":"not","args":[{f}]}}"#)
            } else {
                format!(r#"{{"op":"and","args":[{f},{}]}}"#, eq("grid_label", "gn"))
            };
        }
        filters.push(f);
    }
    for n in [100, 1_500, 5_000, 12_000] {
        let list: Vec<String> = (0..n).map(|i| format!("\"v{i}\"")).collect();
        filters.push(format!(
            r#"{{"op":"in","args":[{{"property":"id"}},[{}]]}}"#,
            list.join(",")
        ));
    }
    for n in [50, 400, 1_200] {
        let terms: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"op":"like","args":[{{"property":"id"}},"%{}%x%"]}}"#,
                    i % 97
                )
            })
            .collect();
        filters.push(format!(r#"{{"op":"or","args":[{}]}}"#, terms.join(",")));
    }
    for n in [500, 1_025, 30_000] {
        filters.push(eq("source_id", &"x".repeat(n)));
    }
    filters
        .push(r#"{"op":"=","args":[{"property":"datetime"},{"timestamp":"9999-99-99"}]}"#.into());
    filters.push(r#"{"op":"t_intersects","args":[{"property":"datetime"},{"interval":["1900-01-01","notadate"]}]}"#.into());
    let mut out = Vec::new();
    for f in &filters {
        let body = format!(r#"{{"filter":{f},"filter-lang":"cql2-json","limit":50}}"#);
        out.push((
            format!(
                "POST /stac/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            ),
            body.into_bytes(),
        ));
        if f.len() < 2_000 {
            out.push((
                format!(
                    "GET /stac/search?filter-lang=cql2-json&filter={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    pct(f)
                ),
                vec![],
            ));
        }
    }
    // Solr-style and free text.
    let words: Vec<String> = (0..900).map(|i| format!("w{i}x")).collect();
    let gets = [
        format!(
            "/esg-search/search?type=File&query={}",
            pct(&words[..300].join(" "))
        ),
        format!(
            "/esg-search/search?type=Dataset&query={}",
            pct("(a:b OR c:*)^2 AND NOT \"x y\"~3 [* TO *] {a TO b}")
        ),
        format!(
            "/esg-search/search?variable_id={}&limit=10000",
            (0..600)
                .map(|i| format!("v{i}"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        "/esg-search/search?type=File&limit=10000&offset=999999999".to_string(),
        "/esg-search/search?type=File&facets=*&limit=10000".to_string(),
        format!("/api/search?q={}&facets=all", pct(&words.join(" "))),
        format!("/api/search?q={}", pct(&"tas ".repeat(1_000))),
        format!("/api/search?q={}&limit=10000", pct("%%%***___ air")),
        format!(
            "/api/search?type=dataset&q={}",
            pct(&words[..200].join(" "))
        ),
        format!(
            "/api/autocomplete?facet=source_id&prefix={}",
            pct(&"%".repeat(300))
        ),
        format!(
            "/stac/collections/cmip6/items?limit=10000&datetime={}",
            pct("1850-01-01T00:00:00Z/..")
        ),
    ];
    for g in gets {
        out.push((
            format!("GET {g} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            vec![],
        ));
    }
    out
}

/// Sends one request and reads its answer, the read bounded by `limit`
/// (a hang guard: the test fails if the gateway does not answer at all).
fn send_within(addr: &str, head: &str, body: &[u8], limit: Duration) -> Resp {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut s)
        .unwrap_or_else(|e| panic!("{}: no answer: {e}", &head[..head.len().min(160)]))
}

#[test]
fn hostile_queries_are_bounded_and_the_door_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    fill_catalog(&data, 1_500);
    // A short deadline, so that work that would run longer is seen cut.
    let d = Daemon::start_at(
        dir,
        data,
        &["--no-repo", "--http", "127.0.0.1:0", "--http-deadline", "2"],
    );
    let addr = http_addr(&d);
    // A plain STAC search works and sees the datasets.
    let r = get(&addr, "/stac/search?limit=1");
    assert_eq!(r.status, 200, "{r:?}");
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["numberMatched"], 1_500, "{v}");
    // `/api/status` polled by another client all through the flood.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (addr, stop) = (addr.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                let r = send_within(
                    &addr,
                    "GET /api/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    b"",
                    Duration::from_secs(30),
                );
                assert_eq!(r.status, 200, "status during the flood: {r:?}");
                worst = worst.max(t.elapsed());
                n += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            (n, worst)
        })
    };
    let reqs = hostile_requests(44);
    // Four clients at once, each request on its own connection.
    let chunks: Vec<Vec<(String, Vec<u8>)>> = (0..4)
        .map(|k| reqs.iter().skip(k).step_by(4).cloned().collect())
        .collect();
    let counts: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut seen = BTreeMap::<u16, usize>::new();
                for (head, body) in chunk {
                    let r = send_within(&addr, &head, &body, Duration::from_secs(60));
                    let first = head.lines().next().unwrap_or("").to_string();
                    let what = &first[..first.len().min(120)];
                    match r.status {
                        200 => {}
                        400 | 413 | 414 => {
                            r.assert_json_error(what);
                        }
                        503 => {
                            let e = r.assert_json_error(what);
                            let v: Value = serde_json::from_slice(&r.body).unwrap();
                            assert_eq!(v["limit"], "deadline", "{what}: {e}");
                            assert!(r.header("retry-after").is_some(), "{what}: {r:?}");
                        }
                        other => panic!("{what}: {other} {}", String::from_utf8_lossy(&r.body)),
                    }
                    *seen.entry(r.status).or_default() += 1;
                }
                seen
            })
        })
        .collect();
    let mut seen = BTreeMap::<u16, usize>::new();
    for c in counts {
        for (k, n) in c.join().unwrap() {
            *seen.entry(k).or_default() += n;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (polls, worst) = poller.join().unwrap();
    eprintln!(
        "{} hostile requests: {seen:?}; /api/status answered {polls} times, slowest {worst:?}",
        reqs.len()
    );
    assert!(polls > 0);
    // Each cap is refused by name, before any work.
    let refused = |f: &str| {
        let body = format!(r#"{{"filter":{f}}}"#);
        let r = send_within(
            &addr,
            &format!(
                "POST /stac/search HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            ),
            body.as_bytes(),
            Duration::from_secs(30),
        );
        assert_eq!(r.status, 400, "{f:.100}: {r:?}");
        r.header("x-granary-limit").unwrap_or("").to_string()
    };
    let deep = (0..40).fold(
        r#"{"op":"=","args":[{"property":"a"},"x"]}"#.to_string(),
        |acc, _| format!(r#"{{"op":"not","args":[{acc}]}}"#),
    );
    assert_eq!(refused(&deep), "depth");
    let pat = format!(
        r#"{{"op":"like","args":[{{"property":"id"}},"{}"]}}"#,
        "%a".repeat(200)
    );
    assert_eq!(refused(&pat), "pattern");
    assert_eq!(
        refused(r#"{"op":"=","args":[{"property":"datetime"},{"timestamp":"9999-99-99"}]}"#),
        "syntax"
    );
    // The gateway still answers a normal search at the end.
    let r = get(&addr, "/stac/search?limit=2");
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn sigterm_stops_the_daemon_with_requests_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    fill_catalog(&data, 1_500);
    // A long deadline: the requests are still working when SIGTERM comes.
    let mut d = Daemon::start_at(
        dir,
        data,
        &[
            "--no-repo",
            "--http",
            "127.0.0.1:0",
            "--http-deadline",
            "600",
        ],
    );
    let addr = http_addr(&d);
    // Filters that cannot be pushed to the catalog: every item is built and
    // evaluated, on blocking threads.
    let wide = format!(
        r#"{{"filter":{{"op":"or","args":[{}]}},"limit":10000}}"#,
        (0..600)
            .map(|i| format!(r#"{{"op":"like","args":[{{"property":"id"}},"%{i}%_%{i}%"]}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut inflight = Vec::new();
    for _ in 0..6 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(
            format!(
                "POST /stac/search HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{wide}",
                wide.len()
            )
            .as_bytes(),
        )
        .unwrap();
        inflight.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let _ = Command::new("kill").arg(d.child.id().to_string()).status();
    // A hang guard only (the figure is bench/gateway.sh's): before, the
    // runtime waited for every blocking task, minutes with such requests.
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the daemon did not stop on SIGTERM with requests in flight"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("stopped in {:?} ({status})", t.elapsed());
    assert!(status.success(), "{status}");
    drop(inflight);
}

#[test]
fn unknown_facets_and_bad_dates_are_refused_and_wget_takes_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    fill_catalog(&data, 60);
    let d = Daemon::start_at(dir, data, &["--no-repo", "--http", "127.0.0.1:0"]);
    let addr = http_addr(&d);
    let json = |r: &Resp| -> Value { serde_json::from_slice(&r.body).unwrap() };
    // An unknown facet name is a 400 that lists the known ones, on both APIs.
    for path in [
        "/api/search?foo=bar",
        "/api/search?type=dataset&foo=bar",
        "/esg-search/search?type=File&foo=bar",
        "/esg-search/search?type=Dataset&foo!=bar",
        "/api/wget?foo=bar",
    ] {
        let r = get(&addr, path);
        assert_eq!(r.status, 400, "{path}: {r:?}");
        let e = r.assert_json_error(path);
        assert!(
            e.contains("unknown facet \"foo\"") && e.contains("source_id"),
            "{path}: {e}"
        );
    }
    // A known facet no record holds is a search that finds nothing; a facet
    // records hold finds them; `type=file` is the file search.
    let r = get(&addr, "/api/search?nominal_resolution=100+km");
    assert_eq!(
        (r.status, json(&r)["total"].clone()),
        (200, 0.into()),
        "{r:?}"
    );
    let all = json(&get(&addr, "/api/search?source_id=Model1"))["total"].clone();
    assert_eq!(all, 6, "two datasets of three files");
    let typed = json(&get(&addr, "/api/search?type=file&source_id=Model1"))["total"].clone();
    assert_eq!(typed, all);
    // Dates that are not dates, and reversed intervals, are 400.
    for path in [
        "/esg-search/search?type=File&start=notadate",
        "/esg-search/search?type=Dataset&end=9999-99-99",
        "/api/search?time=1950-13-01/",
        "/api/search?time=2000-01-01/1990-01-01",
        "/stac/search?datetime=9999-99-99T00:00:00Z/..",
    ] {
        let r = get(&addr, path);
        assert_eq!(r.status, 400, "{path}: {r:?}");
        r.assert_json_error(path);
    }
    // Valid ones still answer (day 30 of February is a 360-day calendar's).
    for path in [
        "/esg-search/search?type=File&start=1900-02-30",
        "/api/search?time=1900/1950-06",
        "/api/search?time=1900-01-01T00:00:00Z/",
    ] {
        let r = get(&addr, path);
        assert_eq!(r.status, 200, "{path}: {r:?}");
    }
    // `/api/wget` by dataset id, and with type=dataset, gives the files.
    let id = "CMIP6.CMIP.INST.Model0.historical.r1i1p1f1.Amon.tas.gn.v20190308";
    for path in [
        format!("/api/wget?id={id}"),
        format!("/api/wget?id={id}%7Cdata.node"),
        "/api/wget?type=dataset&source_id=Model0&variable_id=tas".to_string(),
    ] {
        let r = get(&addr, &path);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        let s = String::from_utf8_lossy(&r.body).to_string();
        assert!(s.contains("# 3 files"), "{path}: {s:.400}");
        assert_eq!(s.matches("\nget '").count(), 3, "{path}");
        assert!(s.contains("tas_Amon_Model0_historical_r1i1p1f1_gn_185001-189912.nc"));
    }
}
