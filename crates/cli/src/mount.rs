//! `granary mount`: the FUSE mount (granary-mount) from the command line;
//! publish mode publishes, renames and removes through `put`, `mv` and
//! `rm`'s code.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
    if a.publish {
        // The key that will sign what is published here must be trusted
        // when it is read back: make it now (as the first `put` would).
        if let Some(k) = granary_node::mount::publisher_key(data_dir)? {
            eprintln!("created default publisher key {k}");
        }
    }
    let trust = granary_node::fetch::trust(data_dir, a.integrity_only)?;
    let publish = a.publish.then(|| {
        (
            granary_node::mount::publisher(data_dir, socket),
            data_dir.join("mount-drafts"),
        )
    });
    let opts = granary_mount::Options {
        prefix: prefix.clone(),
        mountpoint: mountpoint.clone(),
        socket: socket.to_path_buf(),
        trust,
        dir_ttl: granary_node::mount::secs("--dir-ttl", a.dir_ttl)?,
        timeout: granary_node::mount::secs("--timeout", a.timeout)?.max(Duration::from_millis(100)),
        cache_bytes: granary_node::mount::parse_size(&a.cache_size)?,
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
        local_files: Some(granary_node::fetched::local_files(socket)),
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
