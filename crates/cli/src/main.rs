//! The `granary` command: a thin layer over the library crates.

mod dissect;
mod key;
mod selfcheck;

use std::io::Read;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Granary: a named-data (NDN) node, repository and distribution tools for
/// big-science data.
#[derive(Parser)]
#[command(name = "granary", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Data directory (keychain, repository). Default: $XDG_DATA_HOME/granary
    /// or ~/.local/share/granary.
    #[arg(long, global = true, env = "GRANARY_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the TLV structure of packets (like ndn-tools' ndn-dissect).
    ///
    /// Reads a stream of TLV packets (Interest, Data, LpPacket, Name, or any
    /// TLV) from FILE or standard input. Text output is an indented tree;
    /// --json prints one JSON object per packet per line with the name as a
    /// canonical URI, every field, the signature and validity.
    Dissect {
        /// Input file; `-` or nothing for standard input.
        file: Option<PathBuf>,
        /// The input is hexadecimal text (whitespace ignored).
        #[arg(long, conflicts_with = "base64")]
        hex: bool,
        /// The input is base64 text (e.g. an .ndncert file).
        #[arg(long)]
        base64: bool,
        /// Print JSON lines instead of a tree.
        #[arg(long)]
        json: bool,
    },
    /// Manage keys and certificates in the data directory's keychain.
    #[command(subcommand)]
    Key(key::KeyCmd),
    /// Check that this build works on this machine: packets, every signature
    /// algorithm, certificates, signed Interests. Exits non-zero on failure.
    Selfcheck,
}

fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(x).join("granary");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/granary")
}

fn read_input(file: Option<&PathBuf>) -> anyhow::Result<Vec<u8>> {
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

fn run(cli: Cli) -> anyhow::Result<()> {
    let data_dir = cli.data_dir.unwrap_or_else(default_data_dir);
    match cli.command {
        Command::Dissect {
            file,
            hex,
            base64,
            json,
        } => {
            let input = dissect::decode_input(read_input(file.as_ref())?, hex, base64)?;
            if json {
                let mut out = String::new();
                for v in dissect::render_json(&input)? {
                    out.push_str(&serde_json::to_string(&v)?);
                    out.push('\n');
                }
                print!("{out}");
            } else {
                print!("{}", dissect::render_text(&input)?);
            }
            Ok(())
        }
        Command::Key(cmd) => key::run(cmd, &data_dir),
        Command::Selfcheck => selfcheck::run(),
    }
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("granary: error: {e:#}");
        std::process::exit(1);
    }
}
