//! # granary-mount
//!
//! NDN names as a POSIX file system (FUSE, the `fuser` crate: pure Rust,
//! through `/dev/fuse`). A prefix is a directory (listed with `32=ls`), an
//! object's latest version a read-only file (RDR metadata for `stat`, the
//! signed manifest for every segment read). In publish mode (NDNFS), files
//! written into the mount are published as new versions when closed.
//!
//! Depends on packet and transfer (fetching through the local node) only;
//! publishing, renaming and removing go through a [`Publisher`] the caller
//! supplies (the `granary` binary's `put`, `mv` and `rm`).
#![forbid(unsafe_code)]

pub mod cache;
mod drafts;
pub mod fetch;
pub mod fs;
mod inodes;
mod publisher;
mod read_ahead;
mod sync;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;
use granary_transfer::Trust;

pub use drafts::PublishState;
pub use fetch::{Fetcher, LocalFiles};
pub use fs::{GranaryFs, Settings};
pub use publisher::{Publisher, Stream};

/// How to mount.
pub struct Options {
    /// The prefix shown at the mount point's root.
    pub prefix: Name,
    /// Where.
    pub mountpoint: PathBuf,
    /// The local node's socket.
    pub socket: PathBuf,
    /// Keys trusted to sign manifests.
    pub trust: Arc<Trust>,
    /// Directory listing and metadata cache lifetime.
    pub dir_ttl: Duration,
    /// An operation with no answer for this long fails with EIO.
    pub timeout: Duration,
    /// Block cache size in bytes.
    pub cache_bytes: usize,
    /// Let other users see the mount.
    pub allow_other: bool,
    /// Owner shown for every file.
    pub uid: u32,
    /// Group shown for every file.
    pub gid: u32,
    /// FUSE worker threads.
    pub threads: usize,
    /// Publish mode: the publisher and the directory for drafts.
    pub publish: Option<(Arc<dyn Publisher>, PathBuf)>,
    /// ForwardingHint on every Interest (`--fwhint`).
    pub forwarding_hint: Vec<Name>,
    /// Without a hint: where names without a route are looked up (the
    /// engine then fails over between their locations).
    pub locator: Option<granary_transfer::LocatorRef>,
    /// Opens the node's file of a version it holds, read in place of
    /// fetching it by name (every segment still checked against the
    /// manifest); `None`: every read by name.
    pub local_files: Option<fetch::LocalFiles>,
}

/// Mounts and serves until unmounted (SIGINT or SIGTERM unmount cleanly;
/// so does `umount`). `ready` is called once the mount is in place.
pub fn mount(opts: Options, ready: impl FnOnce()) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("granary-mount")
        .enable_all()
        .build()?;
    let fetcher = Arc::new(
        Fetcher::new(
            opts.socket.clone(),
            opts.trust.clone(),
            opts.timeout,
            opts.cache_bytes,
            opts.forwarding_hint.clone(),
            opts.locator.clone(),
        )
        .with_local_files(opts.local_files.clone()),
    );
    // Check the node is there before mounting (a clear error, not EIO on
    // every access).
    rt.block_on(granary_transfer::UnixLink::connect(&opts.socket))
        .map_err(|e| {
            std::io::Error::other(format!(
                "cannot reach the node at {}: {e}",
                opts.socket.display()
            ))
        })?;
    let publish = match opts.publish {
        Some((publisher, dir)) => {
            clean_drafts(&dir);
            let mine = dir.join(std::process::id().to_string());
            std::fs::create_dir_all(&mine)?;
            Some(PublishState {
                publisher,
                drafts_dir: mine,
            })
        }
        None => None,
    };
    let drafts_dir = publish.as_ref().map(|p| p.drafts_dir.clone());
    let settings = Settings {
        prefix: opts.prefix.clone(),
        dir_ttl: opts.dir_ttl,
        uid: opts.uid,
        gid: opts.gid,
        // Without a cache, read-ahead would fetch segments only to drop them.
        max_readahead: if opts.cache_bytes == 0 {
            0
        } else {
            (opts.cache_bytes as u64 / 4).clamp(256 << 10, 64 << 20)
        },
    };
    let writable = publish.is_some();
    let fs = GranaryFs::new(settings, fetcher, rt.handle().clone(), publish);
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(format!("granary:{}", opts.prefix)),
        fuser::MountOption::Subtype("granary".into()),
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        if writable {
            fuser::MountOption::RW
        } else {
            fuser::MountOption::RO
        },
    ];
    if opts.allow_other {
        config.acl = fuser::SessionACL::All;
        config
            .mount_options
            .push(fuser::MountOption::DefaultPermissions);
    }
    config.n_threads = Some(opts.threads.max(1));
    let mut session = fuser::Session::new(fs, &opts.mountpoint, &config)?;
    let mut unmounter = session.unmount_callable();
    let mp = opts.mountpoint.clone();
    rt.spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        tracing::info!("signal: unmounting {}", mp.display());
        if let Err(e) = unmounter.unmount() {
            tracing::warn!("unmount: {e}; trying a lazy unmount");
            let _ = unmount(&mp);
        }
    });
    ready();
    let r = session.run();
    if let Some(d) = drafts_dir {
        let _ = std::fs::remove_dir_all(d);
    }
    rt.shutdown_timeout(Duration::from_millis(200));
    r
}

/// Removes the drafts of mounts that are no longer running (a crash while
/// writing publishes nothing, and leaves nothing behind after the next
/// mount).
fn clean_drafts(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let alive = e
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Unmounts a mount point, also one whose process died (the kernel then
/// answers every access with ENOTCONN): `umount`, then a lazy `umount -l`
/// if it is busy; `fusermount3 -u -z` when not root.
pub fn unmount(mountpoint: &Path) -> std::io::Result<()> {
    let tries: [(&str, &[&str]); 3] = [
        ("umount", &[]),
        ("umount", &["-l"]),
        ("fusermount3", &["-u", "-z"]),
    ];
    let mut last = String::new();
    for (cmd, args) in tries {
        match std::process::Command::new(cmd)
            .args(args)
            .arg(mountpoint)
            .output()
        {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => last = format!("{cmd}: {}", String::from_utf8_lossy(&o.stderr).trim()),
            Err(e) => last = format!("{cmd}: {e}"),
        }
    }
    Err(std::io::Error::other(format!(
        "cannot unmount {}: {last}",
        mountpoint.display()
    )))
}
