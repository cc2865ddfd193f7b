//! The daemon's HTTP gateway (granary-gateway): its settings from flags and
//! config file, and its start-up beside the forwarder.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_forwarder::daemon::Running;

/// The gateway's flags of `granary daemon` (`--http`, `--https`,
/// `--tls-cert`, `--tls-key`, `--http-max-conns`,
/// `--http-max-conns-per-client`, `--http-max-websockets`,
/// `--http-header-timeout`, `--http-idle-timeout`, `--http-deadline`), or the same keys of its
/// config file (`-` as `_`; read by [`crate::config::NodeConfig`]).
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `IP:PORT`, a port (loopback), or `off`.
    pub http: Option<String>,
    /// HTTPS: `IP:PORT`, a port (loopback), or `off`.
    pub https: Option<String>,
    /// PEM certificate chain for HTTPS.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS.
    pub tls_key: Option<PathBuf>,
    /// Most connections with a request in progress.
    pub http_max_conns: Option<u64>,
    /// Most open connections from one IP address.
    pub http_max_conns_per_client: Option<u64>,
    /// Most WebSocket faces.
    pub http_max_websockets: Option<u64>,
    /// Seconds to send a request head.
    pub http_header_timeout: Option<f64>,
    /// Seconds an HTTP/2 connection or WebSocket face may stay idle.
    pub http_idle_timeout: Option<f64>,
    /// Seconds a request may work before it is answered 503.
    pub http_deadline: Option<f64>,
}

/// The gateway's settings after flags and config file.
pub struct HttpSettings {
    pub addr: Option<SocketAddr>,
    pub https: Option<SocketAddr>,
    /// Given certificate and key (else a self-signed one is made).
    pub tls_files: Option<(PathBuf, PathBuf)>,
    pub limits: granary_gateway::Limits,
    /// Kept for callers that read it: `limits.max_conns`.
    pub max_conns: usize,
}

/// Flags over config file over defaults.
pub fn settings(flags: &Flags, file: &Flags) -> anyhow::Result<HttpSettings> {
    let spec = flags
        .http
        .clone()
        .or_else(|| file.http.clone())
        .unwrap_or_else(|| granary_gateway::DEFAULT_ADDR.to_string());
    let addr = granary_gateway::parse_addr(&spec).map_err(|e| anyhow::anyhow!("--http: {e}"))?;
    let https = match flags.https.clone().or_else(|| file.https.clone()) {
        None => None,
        Some(s) => granary_gateway::parse_addr(&s).map_err(|e| anyhow::anyhow!("--https: {e}"))?,
    };
    let cert = flags.tls_cert.clone().or_else(|| file.tls_cert.clone());
    let key = flags.tls_key.clone().or_else(|| file.tls_key.clone());
    let tls_files = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => anyhow::bail!(
            "--tls-cert and --tls-key go together (or neither: a self-signed certificate is made)"
        ),
    };
    let d = granary_gateway::Limits::default();
    let n = |a: Option<u64>, b: Option<u64>, dflt: usize| a.or(b).map_or(dflt, |n| n as usize);
    let secs = |a: Option<f64>, b: Option<f64>, dflt: Duration| {
        a.or(b).map_or(dflt, Duration::from_secs_f64)
    };
    let limits = granary_gateway::Limits {
        header_timeout: secs(
            flags.http_header_timeout,
            file.http_header_timeout,
            d.header_timeout,
        ),
        idle_timeout: secs(
            flags.http_idle_timeout,
            file.http_idle_timeout,
            d.idle_timeout,
        ),
        max_conns: n(flags.http_max_conns, file.http_max_conns, d.max_conns),
        max_conns_per_client: n(
            flags.http_max_conns_per_client,
            file.http_max_conns_per_client,
            d.max_conns_per_client,
        ),
        max_websockets: n(
            flags.http_max_websockets,
            file.http_max_websockets,
            d.max_websockets,
        ),
        deadline: secs(flags.http_deadline, file.http_deadline, d.deadline),
    };
    Ok(HttpSettings {
        addr,
        https,
        tls_files,
        max_conns: limits.max_conns,
        limits,
    })
}

/// The TLS configuration: the given certificate and key, or the data
/// directory's self-signed one (`<data-dir>/gateway/tls/`), made for `addr`.
pub fn tls(
    s: &HttpSettings,
    data_dir: &Path,
    addr: SocketAddr,
) -> anyhow::Result<granary_gateway::Tls> {
    match &s.tls_files {
        Some((c, k)) => granary_gateway::tls::load(c, k)
            .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key: {e}")),
        None => granary_gateway::tls::self_signed(
            &data_dir.join("gateway").join("tls"),
            &granary_gateway::tls::names_for(addr),
        )
        .map_err(|e| anyhow::anyhow!("--https: {e}")),
    }
}

/// Starts the gateway on the current runtime: plain HTTP and HTTPS, as
/// asked. A port that cannot be bound costs the gateway, not the node: the
/// daemon says so and runs on. `tls` is the HTTPS configuration (made before
/// the runtime, so a bad certificate stops the daemon with a clear error).
pub async fn start(
    s: &HttpSettings,
    tls: Option<granary_gateway::Tls>,
    running: &Running,
    data_dir: &Path,
    catalog: Option<Arc<granary_catalog::Catalog>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if s.addr.is_none() && s.https.is_none() {
        return tasks;
    }
    let node = Arc::new(granary_gateway::Node {
        socket: running.sockets[0].clone(),
        data_dir: data_dir.to_path_buf(),
        catalog,
        events: running.events.clone(),
        ids: running.ids.clone(),
        limits: running.limits.clone(),
        started: std::time::Instant::now(),
        local: Default::default(),
        tls: Default::default(),
        shared: granary_gateway::Shared::open(data_dir),
    });
    let gw = granary_gateway::Gateway::new(node, s.limits.clone());
    let listeners = [(s.addr, None), (s.https, tls.as_ref())];
    for (addr, tls) in listeners {
        let Some(addr) = addr else { continue };
        let flag = if tls.is_some() { "--https" } else { "--http" };
        match gw.listen(addr, tls).await {
            Ok((bound, task)) => {
                if !bound.ip().is_loopback() {
                    tracing::warn!(
                        "the HTTP gateway listens on {bound}, beyond this host (read-only)"
                    );
                }
                match tls {
                    None => println!("gateway http://{bound}/"),
                    Some(t) => println!(
                        "gateway https://{bound}/ (certificate: {}, for REQUESTS_CA_BUNDLE)",
                        t.cert.display()
                    ),
                }
                tasks.push(task);
            }
            Err(e) => {
                tracing::warn!(
                    "HTTP gateway not started on {addr}: cannot listen: {e}{}; the node runs on without it (choose another address with {flag} IP:PORT, or {flag} off)",
                    if e.kind() == std::io::ErrorKind::AddrInUse {
                        " (another program uses the port)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keys_are_taken_and_flags_win() {
        let c =
            crate::config::NodeConfig::parse("http = false\nhttp_max_conns = 9\ncs_capacity = 5\n")
                .unwrap();
        let file = c.http_flags();
        assert_eq!(file.http.as_deref(), Some("off"));
        assert_eq!(file.http_max_conns, Some(9));
        assert_eq!(c.forwarder.cs_capacity, 5);
        let s = settings(&Flags::default(), &file).unwrap();
        assert_eq!((s.addr, s.max_conns), (None, 9));
        let flags = Flags {
            http: Some("127.0.0.1:8181".into()),
            ..Flags::default()
        };
        let s = settings(&flags, &file).unwrap();
        assert_eq!(s.addr, Some("127.0.0.1:8181".parse().unwrap()));
        assert!(crate::config::NodeConfig::parse("http_max_conns = 0\n").is_err());
        // The serving keys: timeouts in seconds (integer or not), caps, HTTPS.
        let file = crate::config::NodeConfig::parse(
            "https = 8443\ntls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\nhttp_header_timeout = 2.5\nhttp_idle_timeout = 30\nhttp_max_conns_per_client = 7\nhttp_max_websockets = 3\n",
        )
        .unwrap()
        .http_flags();
        let s = settings(&Flags::default(), &file).unwrap();
        assert_eq!(s.https, Some("127.0.0.1:8443".parse().unwrap()));
        assert_eq!(s.limits.header_timeout, Duration::from_millis(2500));
        assert_eq!(s.limits.idle_timeout, Duration::from_secs(30));
        assert_eq!(
            (s.limits.max_conns_per_client, s.limits.max_websockets),
            (7, 3)
        );
        assert_eq!(
            s.tls_files,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
        let flags = Flags {
            http_header_timeout: Some(1.0),
            ..Flags::default()
        };
        let s = settings(&flags, &file).unwrap();
        assert_eq!(s.limits.header_timeout, Duration::from_secs(1));
        // A certificate without its key is refused.
        let only_cert = Flags {
            tls_cert: Some("/c.pem".into()),
            ..Flags::default()
        };
        assert!(settings(&only_cert, &Flags::default()).is_err());
        assert!(crate::config::NodeConfig::parse("http_header_timeout = 0\n").is_err());
    }
}
