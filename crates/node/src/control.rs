//! Talking to a running daemon over its Unix socket: NFD management
//! helpers, the repository's commands (`put`, `forget`, `removed`), and the
//! best-effort notices that keep its caches in step with the files.

use std::path::Path;

use bytes::Bytes;
use granary_app::{Client, Reply};
use granary_mgmt::{decode_dataset, ControlParameters, FaceStatus};
use granary_packet::{Component, InterestFields, Name};

/// `/localhost/nfd`, the management prefix.
pub fn nfd() -> Name {
    Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap_or_default()
}

fn name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A management dataset (e.g. `/localhost/nfd/faces/list`), all segments.
pub async fn dataset(c: &mut Client, uri: &str) -> anyhow::Result<Bytes> {
    Ok(c.dataset(&name(uri)?).await?)
}

/// Creates a face to `uri` (NFD's faces/create) and returns its id; the id
/// of the existing face when there is one already.
pub async fn create_face(c: &mut Client, uri: &str, reliable: bool) -> anyhow::Result<u64> {
    create_face_with(c, uri, reliable, false).await
}

/// [`create_face`], asking for Persistency Permanent when `permanent` (the
/// face is re-dialled with back-off when the peer goes away).
pub async fn create_face_with(
    c: &mut Client,
    uri: &str,
    reliable: bool,
    permanent: bool,
) -> anyhow::Result<u64> {
    let mut p = ControlParameters::new();
    p.uri = Some(uri.to_string());
    if permanent {
        p.face_persistency = Some(granary_mgmt::values::face_persistency::PERMANENT);
    }
    if reliable {
        p.set_flag_bit(
            granary_mgmt::values::face_flags::LP_RELIABILITY_ENABLED,
            true,
            true,
        );
    }
    match c.command(&nfd(), "faces", "create", &p).await {
        Ok(r) => r
            .face_id
            .ok_or_else(|| anyhow::anyhow!("no FaceId in the response")),
        Err(granary_app::Error::Refused { code: 409, .. }) => {
            // Already there: look it up.
            let faces =
                decode_dataset::<FaceStatus>(&dataset(c, "/localhost/nfd/faces/list").await?)?;
            let canonical = uri
                .replacen("tcp://", "tcp4://", 1)
                .replacen("udp://", "udp4://", 1);
            faces
                .iter()
                .find(|f| f.uri == canonical)
                .map(|f| f.face_id)
                .ok_or_else(|| anyhow::anyhow!("face exists but is not listed"))
        }
        Err(e) => Err(e.into()),
    }
}

/// A route registered with the given flags and cost, origin static.
pub fn static_route(name: Name, flags: u64, cost: u64) -> ControlParameters {
    let mut p = ControlParameters::new();
    p.name = Some(name);
    p.flags = Some(flags);
    p.cost = Some(cost);
    p.origin = Some(granary_mgmt::values::route_origin::STATIC);
    p
}

/// Best effort: tells a running daemon that `version` of `nm` (every version
/// when `None`) was removed, so a copy of it that the daemon is still keeping
/// in the background (after a `granary get`) does not land after the removal.
/// Returns how many such copies were still in flight.
pub fn tell_daemon_removed(socket: &Path, nm: &Name, version: Option<u64>) -> u64 {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 0;
    };
    rt.block_on(async {
        let (Ok(mut c), Ok(cmd)) = (
            Client::connect(socket).await,
            name(granary_repo::local_commands::PREFIX),
        ) else {
            return 0;
        };
        let mut f = InterestFields::new(cmd.append(&Component::generic(b"removed")));
        let params = serde_json::json!({ "name": nm.to_string(), "version": version });
        f.app_params = Some(Bytes::from(params.to_string()));
        f.lifetime = Some(10_000);
        match c.express(f).await {
            Ok(Reply::Data(d)) => serde_json::from_slice::<serde_json::Value>(d.content())
                .ok()
                .and_then(|v| v["in_flight"].as_u64())
                .unwrap_or(0),
            _ => 0,
        }
    })
}

/// Best effort: tells a running daemon (if any) to forget its repository's
/// cached lookups and read the repository's settings again; with `erase`,
/// also to drop the packets its content store holds under that prefix
/// (NFD's cs/erase), so a removed or renamed file is not served from cache.
pub fn tell_daemon(socket: &Path, erase: Option<&Name>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        if let Ok(mut c) = Client::connect(socket).await {
            // The repository's lookups first (it must not build packets
            // from the old files), then the packets already built.
            if let Ok(forget) = name(granary_repo::local_commands::PREFIX) {
                let mut f = InterestFields::new(forget.append(&Component::generic(b"forget")));
                f.lifetime = Some(2000);
                let _ = c.express(f).await;
            }
            let Some(prefix) = erase else { return };
            let mut p = granary_mgmt::ControlParameters::new();
            p.name = Some(prefix.clone());
            let nfd = Name::from_uri(granary_mgmt::LOCALHOST_NFD).unwrap_or_default();
            if let Ok(r) = c.command(&nfd, "cs", "erase", &p).await {
                if let Some(k) = r.count.filter(|k| *k > 0) {
                    eprintln!("evicted {k} cached packet(s) under {prefix}");
                }
            }
        }
    });
}

/// Whether this process may give the daemon at `socket` the commands that
/// act with the daemon's rights (`put` of a path, `removed`, `forget`): it
/// takes them from its own user (the socket file's owner) and root only,
/// and answers anyone else with a Nack. The error says so, and what to do.
pub fn may_command(socket: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let Ok(m) = std::fs::metadata(socket) else {
        return Ok(());
    };
    if me == 0 || m.uid() == me {
        return Ok(());
    }
    anyhow::bail!(
        "the node at {} runs as user id {}, and its repository takes files only from that user or root \
         (it reads them with its own rights); you (user id {me}) can fetch from it but not publish into it. \
         To publish into a repository of your own, run your own `granary daemon` with its own --data-dir and --socket",
        socket.display(),
        m.uid()
    )
}

/// True when `put`'s result came from the daemon (see [`put_via_daemon`]).
pub fn by_daemon_used(v: &serde_json::Value) -> bool {
    v["daemon"] == true
}

/// The daemon's `put` (`/localhost/granary/repo/put`): the daemon streams
/// `path` into its repository; `progress` is given the bytes read so far
/// (polled from `…/progress/<id>`). Returns the put's JSON result, with
/// `daemon: true`.
#[allow(clippy::too_many_arguments)]
pub async fn put_via_daemon(
    mut c: Client,
    socket: &Path,
    path: &Path,
    n: &Name,
    version: Option<u64>,
    policy: &str,
    key: Option<&Name>,
    keep: Option<u64>,
    segment_size: Option<u32>,
    chunking: Option<granary_store::Chunking>,
    index: bool,
    file_sha256: bool,
    progress: &dyn Fn(u64),
) -> anyhow::Result<serde_json::Value> {
    may_command(socket)?;
    let id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    );
    let params = serde_json::json!({
        "path": path.to_str().ok_or_else(|| anyhow::anyhow!("path is not UTF-8"))?,
        "name": n.to_string(),
        "version": version,
        "sign": policy,
        "key": key.map(|k| k.to_string()),
        "keep": keep,
        "segment_size": segment_size,
        "id": id,
        "chunking": chunking.map(|c| c.to_string()),
        "index": index,
        "sha256": file_sha256,
    });
    let cmd = name(granary_repo::local_commands::PREFIX)?.append(&Component::generic(b"put"));
    let mut f = InterestFields::new(cmd);
    f.app_params = Some(Bytes::from(params.to_string()));
    f.lifetime = Some(24 * 3600 * 1000);
    let progress_name = name(granary_repo::local_commands::PREFIX)?
        .append(&Component::generic(b"progress"))
        .append(&Component::generic(id.as_bytes()));
    let poll = async {
        let Ok(mut p) = Client::connect(socket).await else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let mut q = InterestFields::new(progress_name.clone());
            q.lifetime = Some(1000);
            if let Ok(Reply::Data(d)) = p.express(q).await {
                if let Some(b) = serde_json::from_slice::<serde_json::Value>(d.content())
                    .ok()
                    .and_then(|v| v["bytes"].as_u64())
                {
                    progress(b);
                }
            }
        }
    };
    let run = async {
        match c.express(f).await? {
            Reply::Data(d) => {
                let mut v: serde_json::Value = serde_json::from_slice(d.content())?;
                v["daemon"] = serde_json::Value::Bool(true);
                Ok(v)
            }
            Reply::Nack(r) => anyhow::bail!(
                "the daemon's repository did not take the command (Nack {}); is it running with --no-repo, or as another user?",
                granary_packet::types::nack_reason::name(r)
            ),
        }
    };
    tokio::select! {
        r = run => r,
        _ = poll => anyhow::bail!("progress polling stopped"),
    }
}

/// The certificate `name` (CanBePrefix) fetched through the running daemon
/// (`granary key trust --fetch`).
pub fn fetch_certificate(
    socket: &Path,
    name: &Name,
    lifetime: u64,
) -> anyhow::Result<granary_security::Certificate> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = granary_app::Client::connect(socket).await.map_err(|e| {
            anyhow::anyhow!(
                "--fetch needs the running daemon ({}): {e}",
                socket.display()
            )
        })?;
        let mut f = granary_packet::InterestFields::new(name.clone());
        f.can_be_prefix = true;
        f.lifetime = Some(lifetime);
        match c.express(f).await {
            Ok(granary_app::Reply::Data(d)) => granary_security::Certificate::from_data(d)
                .map_err(|e| anyhow::anyhow!("not an NDN certificate: the answer to {name}: {e}")),
            Ok(granary_app::Reply::Nack(r)) => anyhow::bail!(
                "no certificate {name}: Nack (reason {r}); does this node have a route to the other node (`granary route add PREFIX tcp://HOST:PORT`)?"
            ),
            Err(e) => anyhow::bail!("no certificate {name}: {e}"),
        }
    })
}
