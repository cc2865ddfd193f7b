//! The daemon's HTTP gateway (granary-gateway): its settings from flags and
//! config file, and its start-up beside the forwarder.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use granary_forwarder::daemon::Running;

/// The gateway's flags of `granary daemon` (`--http`, `--http-max-conns`),
/// or the same keys of its config file.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `IP:PORT`, a port (loopback), or `off`.
    pub http: Option<String>,
    /// Most concurrent HTTP connections.
    pub http_max_conns: Option<u64>,
}

/// The gateway's settings after flags and config file.
pub struct HttpSettings {
    pub addr: Option<SocketAddr>,
    pub max_conns: usize,
}

/// Takes the gateway's keys (`http`, `http_max_conns`) out of a daemon config
/// table, so the rest parses as the forwarder's `DaemonConfig`.
pub fn take_config_keys(t: &mut toml::Table) -> anyhow::Result<Flags> {
    let mut a = Flags::default();
    if let Some(v) = t.remove("http") {
        a.http = Some(match v {
            toml::Value::String(s) => s,
            toml::Value::Boolean(false) => "off".into(),
            toml::Value::Integer(p) => p.to_string(),
            other => anyhow::bail!("http = {other}: expected \"IP:PORT\" or \"off\""),
        });
    }
    if let Some(v) = t.remove("http_max_conns") {
        match v.as_integer() {
            Some(n) if (1..=65536).contains(&n) => a.http_max_conns = Some(n as u64),
            _ => anyhow::bail!("http_max_conns = {v}: expected a number from 1 to 65536"),
        }
    }
    Ok(a)
}

/// Flags over config file over defaults.
pub fn settings(flags: &Flags, file: &Flags) -> anyhow::Result<HttpSettings> {
    let spec = flags
        .http
        .clone()
        .or_else(|| file.http.clone())
        .unwrap_or_else(|| granary_gateway::DEFAULT_ADDR.to_string());
    let addr = granary_gateway::parse_addr(&spec).map_err(|e| anyhow::anyhow!("--http: {e}"))?;
    let max_conns = flags
        .http_max_conns
        .or(file.http_max_conns)
        .map(|n| n as usize)
        .unwrap_or(granary_gateway::DEFAULT_MAX_CONNS);
    Ok(HttpSettings { addr, max_conns })
}

/// Starts the gateway on the current runtime. A port that cannot be bound
/// costs the gateway, not the node: the daemon says so and runs on.
pub async fn start(
    s: &HttpSettings,
    running: &Running,
    data_dir: &Path,
    catalog: Option<Arc<granary_catalog::Catalog>>,
) -> Option<tokio::task::JoinHandle<()>> {
    let addr = s.addr?;
    let node = Arc::new(granary_gateway::Node {
        socket: running.sockets[0].clone(),
        data_dir: data_dir.to_path_buf(),
        catalog,
        events: running.events.clone(),
        ids: running.ids.clone(),
        limits: running.limits.clone(),
        started: std::time::Instant::now(),
        local: Default::default(),
        shared: granary_gateway::Shared::open(data_dir),
    });
    match granary_gateway::start(addr, s.max_conns, node).await {
        Ok((bound, task)) => {
            if !bound.ip().is_loopback() {
                tracing::warn!("the HTTP gateway listens on {bound}, beyond this host (read-only)");
            }
            println!("gateway http://{bound}/");
            Some(task)
        }
        Err(e) => {
            tracing::warn!(
                "HTTP gateway not started: cannot listen on {addr}: {e}{}; the node runs on without it (choose another address with --http IP:PORT, or --http off)",
                if e.kind() == std::io::ErrorKind::AddrInUse {
                    " (another program uses the port)"
                } else {
                    ""
                }
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keys_are_taken_and_flags_win() {
        let mut t: toml::Table =
            toml::from_str("http = false\nhttp_max_conns = 9\ncs_capacity = 5\n").unwrap();
        let file = take_config_keys(&mut t).unwrap();
        assert_eq!(file.http.as_deref(), Some("off"));
        assert_eq!(file.http_max_conns, Some(9));
        assert!(t.contains_key("cs_capacity") && !t.contains_key("http"));
        let s = settings(&Flags::default(), &file).unwrap();
        assert_eq!((s.addr, s.max_conns), (None, 9));
        let flags = Flags {
            http: Some("127.0.0.1:8181".into()),
            http_max_conns: None,
        };
        let s = settings(&flags, &file).unwrap();
        assert_eq!(s.addr, Some("127.0.0.1:8181".parse().unwrap()));
        let mut bad: toml::Table = toml::from_str("http_max_conns = 0\n").unwrap();
        assert!(take_config_keys(&mut bad).is_err());
    }
}
