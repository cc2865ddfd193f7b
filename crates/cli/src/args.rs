//! Flags that several commands share (catalog rules and trust, the HTTP
//! gateway's), and reading a command's input file.

use std::io::Read;
use std::path::{Path, PathBuf};

use granary_science::drs::Trust;

/// Catalog flags shared by the commands that fill a catalog.
#[derive(clap::Args, Clone, Default)]
pub struct CatalogArgs {
    /// DRS rules file (TOML) for projects other than CMIP6/CMIP5, tried first
    /// (repeatable). Files in <data-dir>/catalog/rules/ are always used.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Which side wins when a file's global attributes disagree with its
    /// name (the mismatch is reported either way).
    #[arg(long, value_enum, default_value_t = TrustArg::Name)]
    pub trust: TrustArg,
}

/// `--trust`.
#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum TrustArg {
    /// The file name and directory path win.
    #[default]
    Name,
    /// The netCDF global attributes win.
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

/// Gateway flags of `granary daemon`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct HttpArgs {
    /// HTTP gateway (web page, JSON API, ESGF search, /data downloads,
    /// WebSocket face at /ndn): IP:PORT, a port (loopback), or `off`.
    /// Default 127.0.0.1:8080; it listens beyond loopback only when given a
    /// non-loopback address. Config key `http`.
    #[arg(long, value_name = "ADDR|off")]
    pub http: Option<String>,
    /// Most concurrent HTTP connections; more wait to be accepted (default
    /// 256). Config key `http_max_conns`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub http_max_conns: Option<u64>,
}

impl HttpArgs {
    /// The flags as the node crate takes them.
    pub fn flags(&self) -> granary_node::gateway::Flags {
        granary_node::gateway::Flags {
            http: self.http.clone(),
            http_max_conns: self.http_max_conns,
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
