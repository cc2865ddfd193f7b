//! `granary key …`

use std::path::{Path, PathBuf};

use clap::Subcommand;
use granary_packet::Name;
use granary_security::keychain::write_atomic;
use granary_security::{KeyChain, KeyType};

#[derive(Subcommand)]
pub enum KeyCmd {
    /// Generate a key under an identity (e.g. /org/lab/alice) with a
    /// self-signed certificate valid for a year. The first key becomes the default.
    Gen {
        /// Identity name, or a full key name /<identity>/KEY/<key-id>.
        name: String,
        /// Key type.
        #[arg(long = "type", short = 't', default_value = "ed25519", value_parser = ["ed25519", "ecdsa", "rsa", "hmac"])]
        key_type: String,
    },
    /// List keys (`*` marks the default) and trust anchors.
    List,
    /// Export a key's certificate (base64, as .ndncert), or with --private a
    /// key bag holding the private key (unencrypted: protect the file).
    Export {
        /// Key, identity or certificate name (default: the default key, the
        /// one this node publishes with).
        name: Option<String>,
        /// Export the private key as well.
        #[arg(long)]
        private: bool,
        /// Write to FILE instead of standard output (required with
        /// --private; `-` is standard output). A FIFO or device is written
        /// straight into; a symbolic link's target is written.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Import a key bag (from `export --private`) or a certificate for a key
    /// already in the keychain. Binary or base64.
    Import {
        /// File to import; `-` for standard input.
        file: PathBuf,
    },
    /// Show the default key, or make NAME the default.
    Default {
        /// Key or identity name.
        name: Option<String>,
    },
    /// Add a trust anchor certificate (binary or base64) from a file, or
    /// with --fetch NAME straight from another node over NDN (through the
    /// running daemon). Its name, key type, validity and SHA-256
    /// fingerprint are shown; a fetched one must be confirmed (compare the
    /// fingerprint with `granary key list` on the other node) unless --yes
    /// or --fingerprint is given (a --fingerprint is checked for files too).
    Trust {
        /// Certificate file; `-` for standard input.
        #[arg(required_unless_present = "fetch", conflicts_with = "fetch")]
        file: Option<PathBuf>,
        /// Fetch the certificate named NAME (a key or certificate name, as
        /// in a signature's KeyLocator, e.g. /granary/host-1a2b/KEY/…) over
        /// NDN.
        #[arg(long, value_name = "NAME")]
        fetch: Option<String>,
        /// Trust without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Trust only a certificate whose key has this SHA-256 fingerprint
        /// (hex, colons allowed); refuse any other.
        #[arg(long, value_name = "HEX")]
        fingerprint: Option<String>,
        /// How long to wait for the certificate (ms).
        #[arg(long, default_value_t = 4000)]
        lifetime: u64,
    },
}

/// Writes an export to `-o PATH`: `-` is standard output; an existing FIFO,
/// device or socket is written straight into (a rename would replace it); a
/// symbolic link's target is replaced atomically and the link kept; anything
/// else is written atomically (`private`: mode 0600).
fn write_output(p: &Path, bytes: &[u8], private: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let err = |e: std::io::Error| anyhow::anyhow!("{}: {e}", p.display());
    match granary_node::fetch::Output::for_path(p)? {
        _ if p.as_os_str() == "-" => std::io::stdout().write_all(bytes).map_err(err),
        granary_node::fetch::Output::File(target) => Ok(write_atomic(&target, bytes, private)?),
        _ => std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(err),
    }
}

fn parse_name(s: &str) -> anyhow::Result<Name> {
    Name::from_uri(s).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn run_with(cmd: KeyCmd, data_dir: &Path, socket: &Path) -> anyhow::Result<()> {
    let kc = KeyChain::open(data_dir.join("keychain"))?;
    match cmd {
        KeyCmd::Gen { name, key_type } => {
            let t: KeyType = key_type.parse()?;
            let e = kc.generate(&parse_name(&name)?, t)?;
            println!(
                "{}",
                e.cert
                    .as_ref()
                    .map_or(e.name.to_string(), |c| c.name().to_string())
            );
            // The first key made by hand replaces the unused one the daemon
            // made at its first start as the default.
            if e.is_default || granary_node::identity::adopt_first_key(data_dir, &e.name)? {
                eprintln!("(default key)");
            }
        }
        KeyCmd::List => {
            let (empty, text) = granary_node::keys::list_text(&kc)?;
            if let Some(hint) = empty {
                eprintln!("{hint}");
            }
            print!("{text}");
        }
        KeyCmd::Export {
            name,
            private,
            output,
        } => {
            let n = match name {
                Some(n) => parse_name(&n)?,
                None => kc.default_name()?.ok_or_else(|| {
                    anyhow::anyhow!("no default key: run `granary key gen NAME` (or start the daemon once: it makes the node's key)")
                })?,
            };
            if private {
                let out = output.ok_or_else(|| {
                    anyhow::anyhow!("--private needs -o FILE (the key is not printed)")
                })?;
                write_output(&out, &kc.export_private(&n)?, true)?;
                eprintln!(
                    "wrote private key bag to {} (mode 0600, unencrypted)",
                    out.display()
                );
            } else {
                let text = kc.export_cert(&n)?;
                match output {
                    Some(p) => write_output(&p, text.as_bytes(), false)?,
                    None => print!("{text}"),
                }
            }
        }
        KeyCmd::Import { file } => {
            let name = kc.import(&crate::args::read_input(Some(&file))?)?;
            println!("{name}");
        }
        KeyCmd::Default { name } => match name {
            Some(n) => {
                kc.set_default(&parse_name(&n)?)?;
                println!(
                    "{}",
                    kc.default_name()?
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                );
            }
            None => match kc.default_name()? {
                Some(n) => println!("{n}"),
                None => anyhow::bail!("no default key: run `granary key gen NAME`"),
            },
        },
        KeyCmd::Trust {
            file,
            fetch,
            yes,
            fingerprint: pinned,
            lifetime,
        } => {
            let c = match (&file, &fetch) {
                (_, Some(n)) => {
                    granary_node::control::fetch_certificate(socket, &parse_name(n)?, lifetime)?
                }
                (Some(f), None) => granary_node::keys::certificate(
                    &crate::args::read_input(Some(f))?,
                    &f.display().to_string(),
                )?,
                (None, None) => anyhow::bail!("give a certificate FILE or --fetch NAME"),
            };
            let fp = granary_node::keys::fingerprint(&c);
            eprint!("{}", granary_node::keys::describe(&c));
            if let Some(want) = &pinned {
                if granary_node::keys::normalize_fp(want) != granary_node::keys::normalize_fp(&fp) {
                    anyhow::bail!(
                        "fingerprint mismatch: expected {want}, the certificate's is {fp}; not trusted"
                    );
                }
            } else if !yes && fetch.is_some() {
                // A certificate from the network is confirmed; a file the
                // operator named is trusted as before.
                use std::io::{BufRead, IsTerminal, Write};
                if !std::io::stdin().is_terminal() {
                    anyhow::bail!(
                        "not trusted: confirm with --yes, or pin the key with --fingerprint HEX (compare with `granary key list` on the other node)"
                    );
                }
                eprint!("Trust this key? Compare the fingerprint with `granary key list` on the other node. [y/N] ");
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line)?;
                if !matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
                    anyhow::bail!("not trusted");
                }
            }
            let c = kc.add_trust_anchor(c.data().wire())?;
            println!("{}", c.name());
        }
    }
    Ok(())
}
