//! `granary mount --publish`: the local repository as the mount's
//! [`granary_mount::Publisher`], publishing, renaming and removing through
//! `put`, `mv` and `rm`'s code ([`crate::repo`]); and the mount's flag values
//! ([`parse_size`], [`secs`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;

/// The publisher of a `--publish` mount of the node at `socket` over
/// `data_dir`'s repository.
pub fn publisher(data_dir: &Path, socket: &Path) -> Arc<dyn granary_mount::Publisher> {
    Arc::new(RepoPublisher {
        data_dir: data_dir.to_path_buf(),
        socket: socket.to_path_buf(),
        local: Default::default(),
    })
}

/// Makes the publisher key now (as the first `put` would), so that what is
/// published is trusted when read back; the key's name when it was made.
pub fn publisher_key(data_dir: &Path) -> anyhow::Result<Option<String>> {
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    let (_, created) = granary_repo::publish::publisher_signer(&kc, None, "manifest")
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(created.map(|k| k.to_string()))
}

/// Publishing through `put`, `mv` and `rm`'s code paths.
pub struct RepoPublisher {
    data_dir: PathBuf,
    socket: PathBuf,
    /// The repository and signer for streamed publishing, opened at the
    /// first stream (`None` if they cannot be: drafts then).
    local: std::sync::OnceLock<Option<Arc<Local>>>,
}

/// The data directory's repository (with its catalog) and the publisher
/// key: what `granary put` uses when it ingests in its own process.
struct Local {
    repo: granary_repo::Repo,
    signer: granary_security::Signer,
}

impl RepoPublisher {
    fn local(&self) -> Option<Arc<Local>> {
        self.local
            .get_or_init(|| {
                let open = || -> anyhow::Result<Local> {
                    let kc = granary_security::KeyChain::open(self.data_dir.join("keychain"))?;
                    let id = crate::identity::publisher_identity(&self.data_dir)?;
                    let (signer, _) =
                        granary_repo::publish::publisher_signer_as(&kc, None, "manifest", &id)
                            .map_err(|e| anyhow::anyhow!(e))?;
                    let repo = crate::catalog::with_catalog(
                        granary_repo::Repo::new(crate::repo::store(&self.data_dir)?, None),
                        &self.data_dir,
                    );
                    Ok(Local { repo, signer })
                };
                match open() {
                    Ok(l) => Some(Arc::new(l)),
                    Err(e) => {
                        tracing::warn!(
                            "no streamed publishing ({e}): files are written to drafts and published on close"
                        );
                        None
                    }
                }
            })
            .clone()
    }
}

/// A file being published as it is written: a pipe into the repository's
/// streaming ingest (`put`'s, on a thread of its own), then `put`'s
/// manifest, retention and catalog entry. Dropped unpublished, the ingest
/// is aborted and leaves nothing.
struct RepoStream {
    pipe: Option<granary_store::PipeWriter>,
    ingest: Option<std::thread::JoinHandle<Result<Option<serde_json::Value>, String>>>,
    socket: PathBuf,
}

impl RepoStream {
    fn join(&mut self) -> Result<Option<serde_json::Value>, String> {
        match self.ingest.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err("the ingest thread panicked".into())),
            None => Err("the ingest has already ended".into()),
        }
    }
}

impl granary_mount::Stream for RepoStream {
    fn write(&mut self, data: &[u8]) -> Result<(), String> {
        let pipe = self.pipe.as_mut().ok_or("the ingest has ended")?;
        if pipe.write(data).is_err() {
            // The ingest stopped (its error says why).
            self.pipe = None;
            return Err(match self.join() {
                Err(e) => e,
                Ok(_) => "the ingest stopped".into(),
            });
        }
        Ok(())
    }

    fn publish(mut self: Box<Self>) -> Result<Name, String> {
        if let Some(p) = self.pipe.take() {
            p.finish();
        }
        let v = self.join()?.ok_or("not published")?;
        // The daemon serves the new version at once (its lookups are cached).
        crate::control::tell_daemon(&self.socket, None);
        let versioned = v["versioned"].as_str().unwrap_or_default();
        Name::from_uri(versioned).map_err(|e| format!("{versioned}: {e}"))
    }

    fn into_file(mut self: Box<Self>, to: &Path) -> Result<(), String> {
        let p = self.pipe.take().ok_or("the ingest has ended")?;
        p.keep(to.to_path_buf());
        match self.join()? {
            None => Ok(()),
            Some(_) => Err("published instead of kept".into()),
        }
    }
}

impl granary_mount::Publisher for RepoPublisher {
    fn publish(&self, name: &Name, file: &Path) -> Result<Name, String> {
        granary_store::path::check(name).map_err(|e| e.to_string())?;
        let v = crate::repo::publish_quiet(&self.data_dir, &self.socket, file, name, None, None)
            .map_err(|e| e.to_string())?;
        let versioned = v["versioned"].as_str().unwrap_or_default();
        Name::from_uri(versioned).map_err(|e| format!("{versioned}: {e}"))
    }

    fn rename(&self, old: &Name, new: &Name) -> Result<(), String> {
        crate::repo::mv(
            &self.data_dir,
            &self.socket,
            crate::catalog::catalog_spec(),
            &old.to_string(),
            &new.to_string(),
        )
        .map_err(|e| e.to_string())
    }

    fn stream(&self, name: &Name) -> Option<Box<dyn granary_mount::Stream>> {
        granary_store::path::check(name).ok()?;
        let local = self.local()?;
        let (pipe, reader) = granary_store::pipe();
        let n = name.clone();
        let ingest = std::thread::Builder::new()
            .name("mount-ingest".into())
            .spawn(move || {
                let how = granary_repo::publish::Publish {
                    version: None,
                    signer: &local.signer,
                    policy: "manifest",
                    keep: None,
                    segment_size: None,
                    chunking: None,
                    index: true,
                    file_sha256: false,
                    tags: Vec::new(),
                    expect_hashes: None,
                };
                granary_repo::publish::publish_piped(&local.repo, &n, reader, &how, |_| {})
            })
            .ok()?;
        Some(Box::new(RepoStream {
            pipe: Some(pipe),
            ingest: Some(ingest),
            socket: self.socket.clone(),
        }))
    }

    fn remove(&self, name: &Name) -> Result<(), String> {
        crate::repo::rm(
            &self.data_dir,
            &self.socket,
            crate::catalog::catalog_spec(),
            &name.to_string(),
            None,
        )
        .map_err(|e| e.to_string())
    }
}

/// `--cache-size`: `256M`, `1G`, `4096`, `64k` in bytes.
pub fn parse_size(s: &str) -> anyhow::Result<usize> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let m = match t[i..].to_ascii_lowercase().trim_end_matches("ib") {
                "k" | "kb" => 1u64 << 10,
                "m" | "mb" => 1 << 20,
                "g" | "gb" => 1 << 30,
                "b" => 1,
                u => anyhow::bail!("--cache-size {s}: unknown unit {u:?} (use K, M or G)"),
            };
            (&t[..i], m)
        }
        None => (t, 1),
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--cache-size {s}: not a size (e.g. 256M)"))?;
    if !n.is_finite() || n < 0.0 {
        anyhow::bail!("--cache-size {s}: not a size");
    }
    Ok((n * mul as f64) as usize)
}

/// `v` seconds of `flag`, between 0 and a day.
pub fn secs(flag: &str, v: f64) -> anyhow::Result<Duration> {
    if !v.is_finite() || !(0.0..=86_400.0).contains(&v) {
        anyhow::bail!("{flag} must be between 0 and 86400 seconds, not {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(super::parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(super::parse_size("0").unwrap(), 0);
        assert_eq!(super::parse_size("64k").unwrap(), 64 << 10);
        assert!(super::parse_size("12parsecs").is_err());
        assert!(super::parse_size("-1").is_err());
    }
}
