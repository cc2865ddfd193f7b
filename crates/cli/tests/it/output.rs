//! Where `granary get -o` writes, and the daemon's log on standard error:
//! FIFOs and device nodes are written straight into (never replaced by a
//! rename), symbolic links are followed to their target, `-o -` is standard
//! output; logs carry no ANSI colour off a terminal and are JSON lines with
//! `--log-format json`.

use crate::common;

use std::io::{BufRead, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// A daemon with `body` published as `name` (many segments, so that they
/// arrive out of order).
fn published(name: &str, body: &[u8]) -> Daemon {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("src");
    std::fs::write(&src, body).unwrap();
    d.ok(&["put", src.to_str().unwrap(), name]);
    d
}

/// No `.part` (or its side files) left beside `p`.
fn no_part_beside(p: &Path) {
    let dir = p.parent().unwrap();
    let stem = p.file_name().unwrap().to_str().unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            !n.starts_with(&format!("{stem}.part")),
            "{n} left beside {}",
            p.display()
        );
    }
}

fn run_ok(c: &mut Command) -> std::process::Output {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?} failed: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn get_into_a_character_device_keeps_it_a_device() {
    let body = noise(200_000, 11);
    let d = published("/out/dev", &body);
    let dev = d.dir.path().join("null");
    // A copy of /dev/null (1,3): creating it needs CAP_MKNOD (CI runs as root).
    let made = Command::new("mknod")
        .args([dev.to_str().unwrap(), "c", "1", "3"])
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "SKIP get_into_a_character_device_keeps_it_a_device: mknod not permitted: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIP get_into_a_character_device_keeps_it_a_device: no mknod: {e}");
            return;
        }
    }
    // Default flags (a manifest exists, so a regular file would be dedup
    // fetched and published) and by name.
    for extra in [&[][..], &["--no-dedup"][..]] {
        let mut args = vec!["get", "/out/dev", "-o", dev.to_str().unwrap()];
        args.extend_from_slice(extra);
        run_ok(&mut d.command(&args));
        let m = std::fs::symlink_metadata(&dev).unwrap();
        assert!(
            m.file_type().is_char_device(),
            "{extra:?}: {} is no longer a character device: {:?}",
            dev.display(),
            m.file_type()
        );
        no_part_beside(&dev);
    }
}

#[test]
fn get_into_a_fifo_delivers_exactly_the_bytes_and_keeps_the_fifo() {
    let body = noise(300_000, 12);
    let d = published("/out/fifo", &body);
    let fifo = d.dir.path().join("fifo");
    let o = Command::new("mkfifo").arg(&fifo).output().unwrap();
    assert!(o.status.success(), "mkfifo: {o:?}");
    for extra in [&[][..], &["--no-dedup"][..]] {
        let f2 = fifo.clone();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            std::fs::File::open(&f2)
                .unwrap()
                .read_to_end(&mut got)
                .unwrap();
            got
        });
        let mut args = vec!["get", "/out/fifo", "-o", fifo.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = d.cli(&args);
        if !o.status.success() {
            // Release the reader (it waits for a writer), then fail.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            let _ = reader.join();
            panic!(
                "get {extra:?} -o FIFO failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let got = reader.join().unwrap();
        assert_eq!(got.len(), body.len(), "{extra:?}: length");
        assert!(got == body, "{extra:?}: the reader got other bytes");
        let m = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(m.file_type().is_fifo(), "{extra:?}: the FIFO is gone");
        no_part_beside(&fifo);
    }
    // --resume has nothing to resume in a FIFO: refused before it is opened
    // (so no reader is needed and nothing blocks).
    let o = d.cli(&["get", "/out/fifo", "--resume", "-o", fifo.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "--resume into a FIFO succeeded");
    assert!(err.contains("not a regular file"), "unclear error: {err}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn get_through_a_symlink_writes_its_target_and_keeps_the_link() {
    let body = noise(150_000, 13);
    let d = published("/out/link", &body);
    let dir = d.dir.path().join("dl");
    std::fs::create_dir(&dir).unwrap();
    // The target is in another directory, so `.part` beside the link would
    // be in the wrong place.
    let tdir = d.dir.path().join("targets");
    std::fs::create_dir(&tdir).unwrap();
    for (i, extra) in [&[][..], &["--no-dedup"][..]].into_iter().enumerate() {
        let target = tdir.join(format!("t{i}"));
        std::fs::write(&target, b"old contents").unwrap();
        let link = dir.join(format!("l{i}"));
        std::os::unix::fs::symlink(format!("../targets/t{i}"), &link).unwrap();
        let mut args = vec!["get", "/out/link", "-o", link.to_str().unwrap()];
        args.extend_from_slice(extra);
        run_ok(&mut d.command(&args));
        let m = std::fs::symlink_metadata(&link).unwrap();
        assert!(
            m.file_type().is_symlink(),
            "{extra:?}: the link was replaced"
        );
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new(&format!("../targets/t{i}"))
        );
        let got = std::fs::read(&target).unwrap();
        assert!(got == body, "{extra:?}: the target has other bytes");
        no_part_beside(&target);
        no_part_beside(&link);
    }
}

#[test]
fn get_dash_o_dash_writes_standard_output() {
    let body = noise(120_000, 14);
    let d = published("/out/stdout", &body);
    let cwd = tempfile::tempdir().unwrap();
    let o = run_ok(
        d.command(&["get", "/out/stdout", "-o", "-", "-q"])
            .current_dir(cwd.path()),
    );
    assert!(
        o.stdout == body,
        "standard output: {} bytes",
        o.stdout.len()
    );
    assert!(!cwd.path().join("-").exists(), "a file named - was written");
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
}

/// Runs a daemon with standard error in a file (not a terminal), sends it
/// a garbage packet, stops it; returns the log.
fn daemon_log(extra_env: &[(&str, &str)], args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("g.sock");
    let log = dir.path().join("stderr.log");
    let mut c = granary();
    c.args([
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--socket",
        socket.to_str().unwrap(),
    ])
    .args(args)
    .arg("daemon")
    // Its own port: tests run side by side, and 8080 may be anyone's.
    .args(["--http", "127.0.0.1:0"])
    .env("GRANARY_LOG", "debug")
    .env_remove("NO_COLOR")
    .env_remove("GRANARY_LOG_FORMAT")
    .envs(extra_env.iter().copied())
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut child = c.spawn().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let l = lines.next().expect("daemon exited before ready").unwrap();
        if l == "ready" {
            break;
        }
    }
    {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        // Not TLV: the face reports it and closes.
        let _ = s.write_all(&[0xff; 64]);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let st = child.wait().unwrap();
    assert!(st.success(), "daemon exited with {st}");
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn daemon_log_to_a_file_has_no_ansi_colour() {
    let log = daemon_log(&[], &[]);
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "too little logged: {log}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DEBUG") || l.contains("INFO")),
        "no log lines: {log}"
    );
    assert!(!log.contains("\x1b["), "ANSI escape in the log: {log:?}");
}

#[test]
fn daemon_log_format_json_is_one_json_object_per_line() {
    for (env, args) in [
        (&[][..], &["--log-format", "json"][..]),
        (&[("GRANARY_LOG_FORMAT", "json")][..], &[][..]),
    ] {
        let log = daemon_log(env, args);
        let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.len() >= 2, "too little logged: {log}");
        assert!(!log.contains("\x1b["), "ANSI escape in the log: {log:?}");
        for l in lines {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{env:?} {args:?}: not JSON ({e}): {l}"));
            assert!(
                v.get("level").and_then(|x| x.as_str()).is_some(),
                "no level: {l}"
            );
        }
    }
}

#[test]
fn log_format_rejects_unknown_values() {
    let o = granary()
        .args(["--log-format", "yaml", "status"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("yaml"));
}

/// `-o DIR/` with DIR missing makes it and names the file after the data;
/// `-o MISSING/FILE` fails at once with a clear error, writing nothing.
#[test]
fn get_into_a_missing_directory() {
    let body = noise(30_000, 5);
    let d = published("/out/obj", &body);
    let dir = d.dir.path().join("new").join("deeper");
    let o = run_ok(&mut d.command(&["get", "/out/obj", "-o", &format!("{}/", dir.display())]));
    assert_eq!(std::fs::read(dir.join("obj")).unwrap(), body, "{o:?}");
    no_part_beside(&dir.join("obj"));

    let missing = d.dir.path().join("absent").join("file");
    let o = d.cli(&["get", "/out/obj", "-o", missing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("there is no directory"), "{err}");
    assert!(!missing.parent().unwrap().exists());
}

/// Printing commands whose reader goes away (`granary ls | head -1`) end as
/// Unix tools do: no panic, no message, exit 0 or killed by SIGPIPE.
#[test]
fn printing_commands_exit_quietly_on_a_closed_pipe() {
    use std::os::unix::process::ExitStatusExt;
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("src");
    std::fs::write(&src, b"some bytes").unwrap();
    for k in 0..5 {
        d.ok(&["put", src.to_str().unwrap(), &format!("/pipe/file{k}")]);
    }
    let cmds: [&[&str]; 5] = [
        &["ls"],
        &["ls", "/pipe"],
        &["stat", "/pipe/file0"],
        &["search", "--limit", "10"],
        &["status"],
    ];
    for args in cmds {
        // Each prints something when its reader is there.
        assert!(!d.ok(args).is_empty(), "{args:?} printed nothing");
        for _ in 0..3 {
            let mut c = d.command(args);
            c.stdout(Stdio::piped()).stderr(Stdio::piped());
            let mut child = c.spawn().unwrap();
            // The reader goes away before anything is written.
            drop(child.stdout.take());
            let o = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                !err.contains("panicked") && !err.contains("Broken pipe"),
                "{args:?}: {err}"
            );
            assert!(
                o.status.success() || o.status.signal() == Some(libc::SIGPIPE),
                "{args:?}: {} {err}",
                o.status
            );
        }
    }
    // The daemon lives on (its clients' closed pipes are not its own).
    assert!(!d.ok(&["ls"]).is_empty());
}

/// The commands that change the node keep SIGPIPE ignored (a closed pipe must
/// not kill them halfway); a reader that went away costs their output, not a
/// panic and not the work after it.
#[test]
fn put_and_publish_dir_finish_on_a_closed_pipe() {
    let d = Daemon::start(&[]);
    let src = d.dir.path().join("src");
    std::fs::write(&src, b"some bytes").unwrap();
    let tree = d.dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    // Not netCDF: publish-dir reports it as rejected, one line on stdout.
    std::fs::write(tree.join("notes.txt"), b"not a netCDF file").unwrap();
    let cmds: [Vec<String>; 2] = [
        vec![
            "put".into(),
            src.display().to_string(),
            "/closed/put".into(),
        ],
        vec!["publish-dir".into(), tree.display().to_string()],
    ];
    for args in cmds {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let mut c = d.command(&args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.status.success(), "{args:?}: {} {err}", o.status);
    }
    assert!(d.ok(&["ls", "/closed"]).contains("/closed/put"));
}

fn mkfifo(p: &Path) {
    let o = Command::new("mkfifo").arg(p).output().unwrap();
    assert!(o.status.success(), "mkfifo: {o:?}");
}

/// A `granary get -o FIFO` run in the background (stderr kept) and a
/// reader of the FIFO that reads `take` bytes at most (all when `None`),
/// then closes it.
fn get_into_fifo(
    d: &Daemon,
    args: &[&str],
    fifo: &Path,
    take: Option<usize>,
) -> (std::process::Output, Vec<u8>, std::time::Duration) {
    let f2 = fifo.to_path_buf();
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::open(&f2).unwrap();
        let mut got = Vec::new();
        match take {
            None => {
                f.read_to_end(&mut got).unwrap();
            }
            Some(n) => {
                got.resize(n, 0);
                let k = f.read(&mut got).unwrap();
                got.truncate(k);
            }
        }
        got
    });
    let t = std::time::Instant::now();
    let mut child = d
        .command(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let err_thread = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    // Never wait for ever: a get still running after 30 s is killed (and
    // the test fails below).
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            // Release a reader still waiting in open (non-blocking: this
            // must not wait for anything itself).
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(fifo);
            panic!(
                "get {args:?} still running after 30 s: {}",
                String::from_utf8_lossy(&err_thread.join().unwrap())
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let took = t.elapsed();
    let stderr = err_thread.join().unwrap();
    let got = reader.join().unwrap();
    (
        std::process::Output {
            status,
            stdout: Vec::new(),
            stderr,
        },
        got,
        took,
    )
}

/// A FIFO whose reader reads a few bytes and closes ends `get` within
/// seconds with a clear error — from the verified local copy and from the
/// network alike — never a hang or a panic.
#[test]
fn get_into_a_fifo_whose_reader_goes_away_fails_clearly_and_at_once() {
    let body = noise(4_000_000, 14);
    let d = published("/out/gone", &body);
    let fifo = d.dir.path().join("fifo");
    mkfifo(&fifo);
    for extra in [&[][..], &["--no-dedup"][..]] {
        let mut args = vec!["get", "/out/gone", "-o", fifo.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (o, got, took) = get_into_fifo(&d, &args, &fifo, Some(10));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(got, body[..got.len()], "{extra:?}");
        assert!(!o.status.success(), "{extra:?}: exit 0: {err}");
        assert!(!err.contains("panicked"), "{extra:?}: {err}");
        assert!(
            err.contains(&format!("the reader of {} went away", fifo.display())),
            "{extra:?}: unclear error: {err}"
        );
        assert!(
            took < std::time::Duration::from_secs(10),
            "{extra:?}: {took:?}"
        );
        eprintln!("get {extra:?}: exited {took:?} after the reader closed the FIFO");
    }
    // The same to a pipe on standard output.
    let mut child = d
        .command(&["get", "/out/gone", "--no-dedup"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    out.read_exact(&mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && !err.contains("panicked"), "{err}");
    assert!(
        err.contains("the reader of standard output went away"),
        "{err}"
    );
}

/// The local copy stops at a damaged segment (past its first 8 MiB block,
/// already written to the FIFO): the network fetch goes on from there on
/// the same open FIFO. The reader gets every byte exactly once (the FIFO
/// was never closed and reopened: that showed the reader an end of file,
/// and the reopen then waited for ever).
#[test]
fn get_into_a_fifo_after_a_failed_local_copy_writes_every_byte_once() {
    let body = noise(12 << 20, 15);
    let a = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let b = Daemon::start(&["--listen", "tcp://127.0.0.1:0"]);
    let src = a.dir.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let name = "/out/twice";
    for d in [&a, &b] {
        d.ok(&[
            "put",
            src.to_str().unwrap(),
            name,
            "--version",
            "5",
            "--chunking",
            "fixed",
        ]);
    }
    // A asks B for the name (B's manifest, B's key trusted); its own copy
    // is damaged at 10 MB, in the second 8 MiB block of the local copy.
    trust(&b, &a);
    a.ok(&[
        "route",
        "add",
        name,
        &format!("tcp://{}", b.tcp.as_ref().unwrap()),
    ]);
    let stat = a.ok(&["stat", name]);
    let path = stat.lines().find_map(|l| l.strip_prefix("path ")).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.write_all_at(b"\xde\xad\xbe\xef", 10_000_000).unwrap();
    }
    let fifo = a.dir.path().join("fifo");
    mkfifo(&fifo);
    let (o, got, took) = get_into_fifo(
        &a,
        &["get", name, "-o", fifo.to_str().unwrap(), "--no-publish"],
        &fifo,
        None,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("the local repository's copy cannot be used"),
        "the local copy was not tried: {err}"
    );
    assert_eq!(got.len(), body.len(), "{err}");
    assert!(got == body, "the reader got other bytes");
    eprintln!("get -o FIFO: local copy then network, {took:?}");
}
