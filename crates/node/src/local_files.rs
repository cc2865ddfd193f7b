//! Short-circuit local reads (decision 0100): an application on the node
//! asks for a version the node's repository holds and receives its data
//! file as an open, read-only file descriptor passed over a Unix socket
//! beside the node's (`<socket>.files`, `SCM_RIGHTS`), as HDFS's
//! short-circuit local reads do. It then reads the bytes at disk speed and
//! checks every segment against the signed manifest it fetched over NDN,
//! exactly as the publisher's own verified local copy does — so a process
//! that may not open the node's files still gets the publisher's speed, and
//! nothing it could not already fetch through the node's socket.
//!
//! Protocol: one request line of JSON, `{"name": "/a/b", "version": V}`;
//! one reply line, `{"size": N}` with the descriptor attached, or
//! `{"error": "…"}` without one; then the daemon closes the connection.

use std::io::{BufRead, BufReader, IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use granary_packet::Name;
use granary_store::Store;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// How long either side waits for the other's line.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Longest request accepted (a name and a version).
const MAX_REQUEST: u64 = 16 * 1024;
/// Requests answered at once; more are told the node is busy (`get` then
/// fetches over NDN).
const MAX_CLIENTS: usize = 64;

/// The file socket beside the node's socket `socket`.
pub fn files_socket(socket: &Path) -> PathBuf {
    let mut s = socket.as_os_str().to_owned();
    s.push(".files");
    PathBuf::from(s)
}

/// Listens at [`files_socket`]`(socket)` and answers each request on a
/// thread of its own, from `store` (the repository the node serves). A
/// stale socket file is replaced; one a live process answers is refused.
/// The daemon calls it for every Unix socket it listens on (its own, NFD's
/// with `--nfd-socket`, `--listen unix://…`): an application reaches the
/// node by any of them.
pub fn serve(store: std::sync::Arc<Store>, socket: &Path) -> std::io::Result<PathBuf> {
    let path = files_socket(socket);
    if path.exists() {
        if UnixStream::connect(&path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use by another process", path.display()),
            ));
        }
        std::fs::remove_file(&path)?;
    }
    let listener = UnixListener::bind(&path)?;
    // Every local user who may use the node's socket may use this one: it
    // hands out only read-only descriptors of versions the node serves.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
    }
    std::thread::Builder::new()
        .name("local-files".into())
        .spawn(move || {
            let busy = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                // A flood of connections gets a reason, not a thread each.
                if busy.load(std::sync::atomic::Ordering::Relaxed) >= MAX_CLIENTS {
                    let _ = conn.write_all(b"{\"error\":\"busy: too many requests at once\"}\n");
                    continue;
                }
                busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (store, busy2) = (store.clone(), busy.clone());
                // A slow or silent client holds only its own thread, for at
                // most the timeout.
                let spawned =
                    std::thread::Builder::new()
                        .name("local-file".into())
                        .spawn(move || {
                            answer(&store, conn);
                            busy2.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                        });
                if spawned.is_err() {
                    busy.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        })?;
    Ok(path)
}

fn answer(store: &Store, conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(TIMEOUT));
    let _ = conn.set_write_timeout(Some(TIMEOUT));
    let mut line = String::new();
    let read = {
        use std::io::Read;
        let mut r = BufReader::new((&conn).take(MAX_REQUEST));
        r.read_line(&mut line)
    };
    let opened = match read {
        Ok(_) => open(store, &line),
        Err(e) => Err(format!("reading the request: {e}")),
    };
    match opened {
        Ok((file, size)) => {
            let reply = format!("{}\n", serde_json::json!({ "size": size }));
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            let fds = [std::os::fd::AsFd::as_fd(&file)];
            if control.push(SendAncillaryMessage::ScmRights(&fds)) {
                let _ = rustix::net::sendmsg(
                    &conn,
                    &[IoSlice::new(reply.as_bytes())],
                    &mut control,
                    SendFlags::NOSIGNAL,
                );
            }
        }
        Err(e) => {
            let _ =
                (&conn).write_all(format!("{}\n", serde_json::json!({ "error": e })).as_bytes());
        }
    }
}

/// The data file of the version a request line names, opened read-only,
/// and its size; only a version the repository serves (published, not
/// staged) is opened.
fn open(store: &Store, line: &str) -> Result<(std::fs::File, u64), String> {
    let req: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("not a JSON request: {e}"))?;
    let (Some(name), Some(version)) = (req["name"].as_str(), req["version"].as_u64()) else {
        return Err("the request needs \"name\" (a string) and \"version\" (a number)".into());
    };
    let name = Name::from_uri(name).map_err(|e| format!("{name}: {e}"))?;
    let e = store
        .get_shared(&name, Some(version))
        .map_err(|e| format!("{name} v={version}: {e}"))?;
    let file = std::fs::File::open(&e.path).map_err(|x| format!("{}: {x}", e.path.display()))?;
    Ok((file, e.meta.size))
}

/// Asks the node at `socket` for the data file of `name` version
/// `version`: the open file and its size, or why not (no file socket, the
/// node does not hold it, …). Blocking, with a timeout.
pub fn request(socket: &Path, name: &Name, version: u64) -> Result<(std::fs::File, u64), String> {
    let path = files_socket(socket);
    let conn = UnixStream::connect(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let _ = conn.set_read_timeout(Some(TIMEOUT));
    let _ = conn.set_write_timeout(Some(TIMEOUT));
    let req = serde_json::json!({ "name": name.to_string(), "version": version });
    (&conn)
        .write_all(format!("{req}\n").as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = [0u8; 4096];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        &conn,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut file = None;
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = m {
            for fd in fds {
                file.get_or_insert(std::fs::File::from(fd));
            }
        }
    }
    let reply: serde_json::Value = serde_json::from_slice(&buf[..got.bytes])
        .map_err(|e| format!("{}: a reply that is not JSON: {e}", path.display()))?;
    if let Some(e) = reply["error"].as_str() {
        return Err(e.to_string());
    }
    match (file, reply["size"].as_u64()) {
        (Some(f), Some(size)) => Ok((f, size)),
        _ => Err(format!("{}: a reply without a file", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_version_comes_as_a_file_and_anything_else_as_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("repo")).unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let n = Name::from_uri("/t/obj").unwrap();
        let e = store
            .put(&n, &data[..], &Default::default(), |_| {})
            .unwrap();
        let socket = dir.path().join("node.sock");
        let at = serve(
            Store::open(dir.path().join("repo")).unwrap().into(),
            &socket,
        )
        .unwrap();
        assert_eq!(at, files_socket(&socket));
        let (f, size) = request(&socket, &n, e.meta.version).unwrap();
        assert_eq!(size, data.len() as u64);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut &f, &mut got).unwrap();
        assert_eq!(got, data);
        // Read-only: the application cannot change the node's file.
        assert!(std::io::Write::write_all(&mut &f, b"x").is_err());
        // Not held, bad requests: a reason, no file, and the server goes on.
        let other = request(&socket, &n, e.meta.version + 1).unwrap_err();
        assert!(!other.is_empty());
        for bad in ["", "nonsense", "{\"name\": 3}", "{\"name\":\"/t/obj\"}"] {
            let mut c = UnixStream::connect(&at).unwrap();
            c.write_all(format!("{bad}\n").as_bytes()).unwrap();
            let mut r = String::new();
            BufReader::new(&c).read_line(&mut r).unwrap();
            assert!(r.contains("\"error\""), "{bad:?}: {r}");
        }
        assert!(request(&socket, &n, e.meta.version).is_ok());
        // Silent clients hold at most MAX_CLIENTS threads: the next one is
        // told the node is busy; once they go, requests are answered again.
        let silent: Vec<UnixStream> = (0..MAX_CLIENTS)
            .map(|_| UnixStream::connect(&at).unwrap())
            .collect();
        let deadline = std::time::Instant::now() + TIMEOUT;
        let busy = loop {
            match request(&socket, &n, e.meta.version) {
                Err(e) if e.contains("busy") => break true,
                _ if std::time::Instant::now() > deadline => break false,
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        assert!(busy, "no busy answer with {MAX_CLIENTS} silent clients");
        drop(silent);
        let deadline = std::time::Instant::now() + TIMEOUT;
        while request(&socket, &n, e.meta.version).is_err() {
            assert!(std::time::Instant::now() < deadline, "not answered again");
            std::thread::sleep(Duration::from_millis(20));
        }
        // A second node cannot take the socket of a live one.
        assert!(serve(
            Store::open(dir.path().join("repo")).unwrap().into(),
            &socket
        )
        .is_err());
    }
}
