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
        /// Key, identity or certificate name.
        name: String,
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
    /// Add a trust anchor certificate (binary or base64).
    Trust {
        /// Certificate file; `-` for standard input.
        file: PathBuf,
    },
}

/// Writes an export to `-o PATH`: `-` is standard output; an existing FIFO,
/// device or socket is written straight into (a rename would replace it); a
/// symbolic link's target is replaced atomically and the link kept; anything
/// else is written atomically (`private`: mode 0600).
fn write_output(p: &Path, bytes: &[u8], private: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let err = |e: std::io::Error| anyhow::anyhow!("{}: {e}", p.display());
    match granary_transfer::Output::for_path(p)? {
        _ if p.as_os_str() == "-" => std::io::stdout().write_all(bytes).map_err(err),
        granary_transfer::Output::File(target) => Ok(write_atomic(&target, bytes, private)?),
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

pub fn run(cmd: KeyCmd, data_dir: &Path) -> anyhow::Result<()> {
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
            if e.is_default {
                eprintln!("(default key)");
            }
        }
        KeyCmd::List => {
            let keys = kc.list()?;
            if keys.is_empty() {
                eprintln!(
                    "no keys in {} — create one with `granary key gen /my/identity`",
                    kc.dir().display()
                );
            }
            for k in keys {
                let mark = if k.is_default { "*" } else { " " };
                match &k.cert {
                    Some(c) => {
                        let v = c.validity();
                        println!(
                            "{mark} {} {} cert={} valid={}..{}",
                            k.name,
                            k.key_type.as_str(),
                            c.name(),
                            v.not_before.format(),
                            v.not_after.format()
                        );
                    }
                    None => println!("{mark} {} {}", k.name, k.key_type.as_str()),
                }
            }
            for a in kc.trust_anchors()? {
                println!("  anchor {}", a.name());
            }
        }
        KeyCmd::Export {
            name,
            private,
            output,
        } => {
            let n = parse_name(&name)?;
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
            let name = kc.import(&crate::read_input(Some(&file))?)?;
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
        KeyCmd::Trust { file } => {
            let c = kc.add_trust_anchor(&crate::read_input(Some(&file))?)?;
            println!("{}", c.name());
        }
    }
    Ok(())
}
