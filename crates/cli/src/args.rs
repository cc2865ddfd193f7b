//! Flags that several commands share (catalog rules and trust, chunking,
//! the HTTP gateway's), and reading a command's input file.

use std::io::Read;
use std::path::{Path, PathBuf};

use granary_science::drs::Trust;

/// Catalog flags shared by the commands that fill a catalog.
#[derive(clap::Args, Clone, Default)]
pub struct CatalogArgs {
    /// DRS rules file (TOML) for projects other than CMIP6/CMIP5, tried first, or
    /// overriding CMIP5 defaults (table cmip5.default_institute; repeatable). Files in
    /// <data-dir>/catalog/rules/ are always used.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Which side wins when a file's global attributes disagree with its
    /// name (the mismatch is reported either way). With `attributes`, a CMIP6
    /// file whose name does not translate at all is named from its attributes
    /// when they are valid (fix `AttributesTrusted`).
    #[arg(long, value_enum, default_value_t = TrustArg::Name)]
    pub trust: TrustArg,
}

/// `--trust`.
#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum TrustArg {
    /// The file name and directory path win.
    #[default]
    Name,
    /// The netCDF global attributes win (and name files whose names do not
    /// translate).
    Attributes,
}

impl CatalogArgs {
    /// The catalog settings for `data_dir` with these flags.
    pub fn settings(&self, data_dir: &Path, catalog: Option<&str>) -> granary_search::Settings {
        granary_node::catalog::settings(data_dir, catalog, &self.rules, self.trust())
    }

    /// `--trust` as the science crate has it.
    pub fn trust(&self) -> Trust {
        match self.trust {
            TrustArg::Name => Trust::Name,
            TrustArg::Attributes => Trust::Attributes,
        }
    }
}

/// Chunking flags (put, dedup).
#[derive(clap::Args, Clone, Default)]
pub struct ChunkArgs {
    /// How files are cut into segments: `fixed`, `fastcdc` (content-defined,
    /// FastCDC 2020) or `rabin` (31-byte-window Rabin fingerprint, as
    /// carepo), optionally with sizes as `fastcdc:MIN:AVG:MAX`. Default for
    /// put: the repository's setting (`granary repo config`), else fastcdc
    /// (3/5/8 KiB).
    #[arg(long, value_name = "SCHEME")]
    pub chunking: Option<String>,
    /// Smallest chunk in bytes (content-defined; default 3072).
    #[arg(long, value_name = "BYTES", requires = "chunking")]
    pub chunk_min: Option<u32>,
    /// Average chunk in bytes (default 5120).
    #[arg(long, value_name = "BYTES", requires = "chunking")]
    pub chunk_avg: Option<u32>,
    /// Largest chunk in bytes (default 8192, at most 8192; for `fixed`, the
    /// segment size).
    #[arg(long, value_name = "BYTES", requires = "chunking")]
    pub chunk_max: Option<u32>,
}

impl ChunkArgs {
    /// The scheme the flags ask for, if any.
    pub fn resolve(&self) -> anyhow::Result<Option<granary_node::repo::Chunking>> {
        let Some(c) = &self.chunking else {
            return Ok(None);
        };
        if c.contains(':') {
            if self.chunk_min.is_some() || self.chunk_avg.is_some() || self.chunk_max.is_some() {
                anyhow::bail!(
                    "give sizes either in --chunking or with --chunk-min/avg/max, not both"
                );
            }
            return Ok(Some(c.parse().map_err(|e: String| anyhow::anyhow!(e))?));
        }
        Ok(Some(
            granary_node::repo::Chunking::from_parts(
                c,
                self.chunk_min,
                self.chunk_avg,
                self.chunk_max,
            )
            .map_err(|e| anyhow::anyhow!(e))?,
        ))
    }
}

/// Gateway flags of `granary daemon`. Each has a config-file key of the
/// same name with `_` for `-` (e.g. `http_header_timeout = 10`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HttpArgs {
    /// HTTP gateway (web page, JSON API, ESGF search, /data downloads,
    /// WebSocket face at /ndn): IP:PORT, a port (loopback), or `off`.
    /// Default 127.0.0.1:8080; it listens beyond loopback only when given a
    /// non-loopback address. Prints `gateway http://IP:PORT/`. Config key `http`.
    #[arg(long, value_name = "ADDR|off")]
    pub http: Option<String>,
    /// HTTPS gateway (the same routes and limits; HTTP/2 by ALPN): IP:PORT,
    /// a port (loopback), or `off` (default). Without --tls-cert/--tls-key a
    /// self-signed certificate for localhost, the loopback addresses and the
    /// listening IP is made in <data-dir>/gateway/tls/ on first start and
    /// reused. Prints `gateway https://IP:PORT/ (certificate: PATH, for
    /// REQUESTS_CA_BUNDLE)`. Config key `https`.
    #[arg(long, value_name = "ADDR|off")]
    pub https: Option<String>,
    /// PEM certificate chain for --https (with --tls-key). Config key `tls_cert`.
    #[arg(long, value_name = "PEM")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --https (with --tls-cert). Config key `tls_key`.
    #[arg(long, value_name = "PEM")]
    pub tls_key: Option<PathBuf>,
    /// Most connections with a request in progress (response included); more
    /// requests wait for a slot (up to 30 s, then 503). Idle connections and
    /// WebSocket faces do not count (default 256). Config key `http_max_conns`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub http_max_conns: Option<u64>,
    /// Most open connections from one IP address; beyond, each request gets
    /// 503 and the connection is closed (default 512). Config key
    /// `http_max_conns_per_client`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub http_max_conns_per_client: Option<u64>,
    /// Most WebSocket faces at /ndn; beyond, 503 (default 256). Config key
    /// `http_max_websockets`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub http_max_websockets: Option<u64>,
    /// Seconds a client has to send a complete request head, from the
    /// connection's start or (HTTP/1.1 keep-alive) the end of the previous
    /// response; then the connection is closed (default 10). Config key
    /// `http_header_timeout`.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub http_header_timeout: Option<f64>,
    /// Seconds an HTTP/2 connection with no request in progress, or a
    /// WebSocket face, may receive nothing before it is closed (default 60).
    /// Config key `http_idle_timeout`.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub http_idle_timeout: Option<f64>,
    /// Seconds a request may work (search, STAC filters, previews, virtual
    /// Zarr, the head of a download) before it is answered 503 JSON with
    /// `Retry-After` and its work is stopped (default 10). Config key
    /// `http_deadline`.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub http_deadline: Option<f64>,
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('s').parse::<f64>() {
        Ok(v) if (0.1..=86400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: expected seconds from 0.1 to 86400")),
    }
}

impl HttpArgs {
    /// The flags as the node crate takes them.
    pub fn flags(&self) -> granary_node::gateway::Flags {
        granary_node::gateway::Flags {
            http: self.http.clone(),
            https: self.https.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            http_max_conns: self.http_max_conns,
            http_max_conns_per_client: self.http_max_conns_per_client,
            http_max_websockets: self.http_max_websockets,
            http_header_timeout: self.http_header_timeout,
            http_idle_timeout: self.http_idle_timeout,
            http_deadline: self.http_deadline,
        }
    }
}

/// The bytes of `file`, or of standard input for `-` or none.
pub fn read_input(file: Option<&PathBuf>) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    match file {
        Some(p) if p.as_os_str() != "-" => {
            buf = std::fs::read(p)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
        }
        _ => {
            std::io::stdin().read_to_end(&mut buf)?;
        }
    }
    Ok(buf)
}
