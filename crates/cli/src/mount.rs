//! `granary mount`: the FUSE mount (granary-mount) from the command line;
//! publish mode publishes, renames and removes through `put`, `mv` and
//! `rm`'s code.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;

/// `granary mount` flags.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Runs in the foreground (like `sshfs -f`) until Ctrl-C, SIGTERM or `umount`; \
start it with `&` or from a service manager to keep it in the background.

Read-only (default): PREFIX's children (`32=ls`) are directories and files; \
a file is its object's latest version (RDR metadata gives size and mtime, \
mode 0444). An open file stays on the version it opened. Reads fetch only \
the covering segments, each verified against the signed manifest; a segment \
that fails verification, or a producer silent for --timeout, gives EIO.

--publish (NDNFS): a file written into the mount is published as a new \
version of its name when closed (as `granary put`; written in order, as `cp` \
does, it is segmented and hashed while it is written); mv is `granary mv`, rm \
is `granary rm`, mkdir makes a prefix. A writer killed by a signal publishes \
nothing.

Examples:
  granary mount /cmip6 /mnt/cmip6 &
  python -c 'import netCDF4; netCDF4.Dataset(\"/mnt/cmip6/tas.nc\")'
  granary mount --publish /lab/run42 /mnt/run42
  granary mount --unmount /mnt/cmip6")]
pub struct MountArgs {
    /// NDN prefix shown at the mount point's root.
    #[arg(required_unless_present = "unmount")]
    pub prefix: Option<String>,
    /// An existing, empty directory.
    #[arg(required_unless_present = "unmount")]
    pub mountpoint: Option<PathBuf>,
    /// Writable NDNFS mode over the local repository.
    #[arg(long)]
    pub publish: bool,
    /// Also show files whose only signature is a DigestSha256 (segments or
    /// manifest signed so): their bytes are checked for integrity, but
    /// nothing proves who made them. Without it such files fail to read
    /// (EIO, the reason in the mount's log).
    #[arg(long)]
    pub integrity_only: bool,
    /// Unmount MOUNTPOINT (also one left behind by a crashed mount) and exit.
    #[arg(long, value_name = "MOUNTPOINT", conflicts_with_all = ["prefix", "publish"])]
    pub unmount: Option<PathBuf>,
    /// How long directory listings, sizes and latest versions are cached
    /// (seconds): a new version shows after at most this long.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub dir_ttl: f64,
    /// An operation with no answer for this long fails with EIO (seconds).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Shared block cache of verified segments (e.g. 256M, 1G, 0 for none).
    #[arg(long, default_value = "256M", value_name = "SIZE")]
    pub cache_size: String,
    /// Let other users use the mount (with the kernel's permission checks).
    #[arg(long)]
    pub allow_other: bool,
    /// Owner shown for every file (default: yours).
    #[arg(long)]
    pub uid: Option<u32>,
    /// Group shown for every file (default: yours).
    #[arg(long)]
    pub gid: Option<u32>,
    /// FUSE worker threads.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub threads: u64,
    /// ForwardingHint on every Interest (ndnpeek's --fwhint; repeatable, in
    /// order), e.g. the node prefix of the site that holds the namespace.
    #[arg(long = "fwhint", value_name = "NAME")]
    pub fwhint: Vec<String>,
    /// Do not look up the locations of names without a route (see `get
    /// --no-locate`; the lookup asks this node's catalog, or the shared one
    /// when --catalog is a postgres:// URL).
    #[arg(long, conflicts_with = "fwhint")]
    pub no_locate: bool,
}

/// `256M`, `1G`, `4096`, `64k`.
fn parse_size(s: &str) -> anyhow::Result<usize> {
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

fn secs(flag: &str, v: f64) -> anyhow::Result<Duration> {
    if !v.is_finite() || !(0.0..=86_400.0).contains(&v) {
        anyhow::bail!("{flag} must be between 0 and 86400 seconds, not {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// Publishing through `put`, `mv` and `rm`'s code paths.
struct RepoPublisher {
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
                    let id = granary_node::identity::publisher_identity(&self.data_dir)?;
                    let (signer, _) =
                        granary_repo::publish::publisher_signer_as(&kc, None, "manifest", &id)
                            .map_err(|e| anyhow::anyhow!(e))?;
                    let repo = granary_node::catalog::with_catalog(
                        granary_repo::Repo::new(granary_node::repo::store(&self.data_dir)?, None),
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
        granary_node::control::tell_daemon(&self.socket, None);
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
        let v =
            granary_node::repo::publish_quiet(&self.data_dir, &self.socket, file, name, None, None)
                .map_err(|e| e.to_string())?;
        let versioned = v["versioned"].as_str().unwrap_or_default();
        Name::from_uri(versioned).map_err(|e| format!("{versioned}: {e}"))
    }

    fn rename(&self, old: &Name, new: &Name) -> Result<(), String> {
        granary_node::repo::mv(
            &self.data_dir,
            &self.socket,
            granary_node::catalog::catalog_spec(),
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
        granary_node::repo::rm(
            &self.data_dir,
            &self.socket,
            granary_node::catalog::catalog_spec(),
            &name.to_string(),
            None,
        )
        .map_err(|e| e.to_string())
    }
}

/// `granary mount …`.
pub fn run(socket: &Path, data_dir: &Path, a: MountArgs) -> anyhow::Result<()> {
    if let Some(mp) = &a.unmount {
        granary_mount::unmount(mp)?;
        eprintln!("unmounted {}", mp.display());
        return Ok(());
    }
    let (Some(prefix), Some(mountpoint)) = (&a.prefix, &a.mountpoint) else {
        anyhow::bail!("usage: granary mount [--publish] PREFIX MOUNTPOINT");
    };
    let prefix = Name::from_uri(prefix).map_err(|e| anyhow::anyhow!("{prefix}: {e}"))?;
    let md = std::fs::metadata(mountpoint)
        .map_err(|e| anyhow::anyhow!("mount point {}: {e}", mountpoint.display()))?;
    if !md.is_dir() {
        anyhow::bail!("mount point {} is not a directory", mountpoint.display());
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        anyhow::bail!("cannot open /dev/fuse ({e}): FUSE is not available here (load the fuse module; in a container, pass --device /dev/fuse)");
    }
    let me = std::fs::metadata("/proc/self").ok();
    let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
    if a.publish {
        // The key that will sign what is published here must be trusted
        // when it is read back: make it now (as the first `put` would).
        let (_, created) = granary_repo::publish::publisher_signer(&kc, None, "manifest")
            .map_err(|e| anyhow::anyhow!(e))?;
        if let Some(k) = created {
            eprintln!("created default publisher key {k}");
        }
    }
    let trust = Arc::new(
        granary_transfer::Trust::from_keychain(&kc)?.with_integrity_only(a.integrity_only),
    );
    let publish = a.publish.then(|| {
        (
            Arc::new(RepoPublisher {
                data_dir: data_dir.to_path_buf(),
                socket: socket.to_path_buf(),
                local: Default::default(),
            }) as Arc<dyn granary_mount::Publisher>,
            data_dir.join("mount-drafts"),
        )
    });
    let opts = granary_mount::Options {
        prefix: prefix.clone(),
        mountpoint: mountpoint.clone(),
        socket: socket.to_path_buf(),
        trust,
        dir_ttl: secs("--dir-ttl", a.dir_ttl)?,
        timeout: secs("--timeout", a.timeout)?.max(Duration::from_millis(100)),
        cache_bytes: parse_size(&a.cache_size)?,
        allow_other: a.allow_other,
        uid: a.uid.or(me.as_ref().map(|m| m.uid())).unwrap_or(0),
        gid: a.gid.or(me.as_ref().map(|m| m.gid())).unwrap_or(0),
        threads: a.threads as usize,
        publish,
        forwarding_hint: granary_node::fetch::hint_names(&a.fwhint)?,
        locator: if a.no_locate || !a.fwhint.is_empty() {
            None
        } else {
            Some(granary_node::locate::locator(
                socket,
                granary_node::catalog::catalog_spec(),
                None,
                None,
            )?)
        },
    };
    let mode = match (a.publish, a.integrity_only) {
        (true, false) => "publish",
        (false, false) => "read-only",
        (true, true) => {
            "publish; integrity only: DigestSha256-signed files are shown, their origin unproven"
        }
        (false, true) => {
            "read-only; integrity only: DigestSha256-signed files are shown, their origin unproven"
        }
    };
    let mp = mountpoint.clone();
    granary_mount::mount(opts, || {
        eprintln!(
            "mounted {prefix} at {} ({mode}); Ctrl-C or `granary mount --unmount {}` to unmount",
            mp.display(),
            mp.display()
        );
        println!("ready");
    })
    .map_err(|e| anyhow::anyhow!("mount {}: {e}", mountpoint.display()))?;
    eprintln!("unmounted {}", mountpoint.display());
    Ok(())
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
