//! Drafts (publish mode): a file being written into the mount, streamed
//! into the repository while it is written in order from the start, else
//! kept in a temporary file, and published as a new version on close
//! (never when its writer is being killed by a signal: [`killed`]).

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fuser::Errno;
use granary_packet::Name;

use crate::publisher::{Publisher, Stream};
use crate::sync::lock;

/// Publish mode's state.
pub struct PublishState {
    /// Publishes, renames, removes.
    pub publisher: Arc<dyn Publisher>,
    /// Where drafts are written.
    pub drafts_dir: PathBuf,
}

/// A file being written (publish mode), published on close as a new
/// version of `name`: streamed into the repository while it is written in
/// order, else a temporary file at `path`.
pub(crate) struct Draft {
    pub(crate) name: Mutex<Name>,
    pub(crate) path: PathBuf,
    pub(crate) body: Mutex<Body>,
    pub(crate) dirty: AtomicBool,
    pub(crate) abandoned: AtomicBool,
    pub(crate) opens: AtomicU64,
}

/// Where a draft's bytes are.
pub(crate) enum Body {
    /// Written in order from the start so far: each write goes straight
    /// into the repository's ingest (no file here, no second pass).
    Stream { s: Box<dyn Stream>, size: u64 },
    /// A temporary file, written at any offset, published from its path.
    File(Arc<File>),
    /// Published from a stream and not changed since: the bytes are that
    /// version's (fetched into a file if the draft is changed or read).
    Published { versioned: Name, size: u64 },
    /// A stream that failed or was abandoned: its bytes are gone.
    Failed,
}

impl Draft {
    /// A new, empty draft of `name`: `streamed` when the publisher gave a
    /// stream, else a temporary file at `path`.
    pub(crate) fn new(
        name: &Name,
        path: PathBuf,
        streamed: Option<Box<dyn Stream>>,
    ) -> std::io::Result<Draft> {
        let body = match streamed {
            Some(s) => Body::Stream { s, size: 0 },
            None => Body::File(Arc::new(draft_file(&path)?)),
        };
        Ok(Draft {
            name: Mutex::new(name.clone()),
            path,
            body: Mutex::new(body),
            dirty: AtomicBool::new(true),
            abandoned: AtomicBool::new(false),
            opens: AtomicU64::new(1),
        })
    }

    /// The draft's file, made first when the draft is a stream (the bytes
    /// written so far become the file) or a published stream (`fill`
    /// copies its version's bytes into it).
    pub(crate) fn file(
        &self,
        fill: impl FnOnce(&File, &Name) -> Result<(), Errno>,
    ) -> Result<Arc<File>, Errno> {
        let mut b = lock(&self.body);
        match &*b {
            Body::File(f) => return Ok(f.clone()),
            Body::Failed => return Err(Errno::EIO),
            _ => {}
        }
        let f = match std::mem::replace(&mut *b, Body::Failed) {
            Body::Stream { s, .. } => {
                if let Err(e) = s.into_file(&self.path) {
                    tracing::error!("{}: keeping the streamed bytes: {e}", lock(&self.name));
                    self.abandoned.store(true, Ordering::Release);
                    return Err(Errno::EIO);
                }
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&self.path)
                    .map_err(Errno::from)?
            }
            Body::Published { versioned, .. } => {
                let f = draft_file(&self.path).map_err(Errno::from)?;
                fill(&f, &versioned)?;
                f
            }
            Body::File(_) | Body::Failed => unreachable!("handled above"),
        };
        let f = Arc::new(f);
        *b = Body::File(f.clone());
        Ok(f)
    }

    /// Publishes the draft through `publisher` as a new version of its
    /// name, unless it is unchanged since it was last published or
    /// abandoned (`None`). Returns the name, the versioned name and the
    /// size.
    pub(crate) fn publish(
        &self,
        publisher: &dyn Publisher,
    ) -> Result<Option<(Name, Name, u64)>, Errno> {
        if !self.dirty.swap(false, Ordering::AcqRel) || self.abandoned.load(Ordering::Acquire) {
            return Ok(None);
        }
        let name = lock(&self.name).clone();
        let mut b = lock(&self.body);
        let (published, size) = match std::mem::replace(&mut *b, Body::Failed) {
            Body::Stream { s, size } => {
                let r = s.publish();
                match &r {
                    Ok(v) => {
                        *b = Body::Published {
                            versioned: v.clone(),
                            size,
                        }
                    }
                    // The bytes went with the stream: nothing to retry.
                    Err(_) => self.abandoned.store(true, Ordering::Release),
                }
                (r, size)
            }
            Body::File(f) => {
                let _ = f.sync_data();
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                *b = Body::File(f);
                let r = publisher.publish(&name, &self.path);
                if r.is_err() {
                    self.dirty.store(true, Ordering::Release);
                }
                (r, size)
            }
            other => {
                *b = other;
                return Ok(None);
            }
        };
        drop(b);
        match published {
            Ok(versioned) => Ok(Some((name, versioned, size))),
            Err(e) => {
                tracing::error!("publishing {name}: {e}");
                Err(Errno::EIO)
            }
        }
    }

    /// Bytes in the draft so far.
    pub(crate) fn size(&self) -> u64 {
        match &*lock(&self.body) {
            Body::Stream { size, .. } | Body::Published { size, .. } => *size,
            Body::File(f) => f.metadata().map(|m| m.len()).unwrap_or(0),
            Body::Failed => 0,
        }
    }
}

/// A new, empty draft file.
fn draft_file(path: &std::path::Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
}

/// True when the process behind a close is dying of a signal (killed
/// midway): its draft must not be published. Linux sets the exit code
/// before closing the files of an exiting task (`/proc/PID/stat`,
/// fields 9 (flags, PF_EXITING = 4) and 52 (exit code, wait status)).
pub(crate) fn killed(pid: u32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Fields after the command (in parentheses, which may hold spaces).
    let Some(rest) = s.rfind(')').map(|i| &s[i + 1..]) else {
        return false;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state).
    let flags: u64 = f.get(9 - 3).and_then(|v| v.parse().ok()).unwrap_or(0);
    let code: i64 = f.get(52 - 3).and_then(|v| v.parse().ok()).unwrap_or(0);
    flags & 4 != 0 && code & 0x7f != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The state field of `/proc/PID/stat` (after the command in
    /// parentheses), or None once the process is gone.
    fn state(pid: u32) -> Option<char> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        s[s.rfind(')')? + 1..]
            .split_whitespace()
            .next()?
            .chars()
            .next()
    }

    /// Waits until `pid` has exited but is not reaped yet (a zombie keeps
    /// its flags and exit code in `/proc/PID/stat`).
    fn until_zombie(pid: u32) {
        let t = std::time::Instant::now();
        while state(pid) != Some('Z') {
            assert!(t.elapsed().as_secs() < 10, "{pid} never exited");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn a_live_process_is_not_being_killed() {
        assert!(!killed(std::process::id()));
        assert!(!killed(u32::MAX), "no such process");
    }

    #[test]
    fn a_process_killed_by_a_signal_is_recognised() {
        let mut child = Command::new("sleep").arg("100").spawn().unwrap();
        let pid = child.id();
        assert!(!killed(pid), "alive and sleeping");
        child.kill().unwrap(); // SIGKILL
        until_zombie(pid);
        assert!(killed(pid), "exited of SIGKILL, not reaped yet");
        child.wait().unwrap();
        assert_eq!(state(pid), None, "reaped");
        assert!(!killed(pid), "a pid that is gone has no draft to refuse");
    }

    #[test]
    fn a_process_that_exits_by_itself_is_not_killed() {
        for code in ["0", "3"] {
            let mut child = Command::new("sh")
                .args(["-c", &format!("exit {code}")])
                .spawn()
                .unwrap();
            let pid = child.id();
            until_zombie(pid);
            assert!(!killed(pid), "exit {code} is no signal");
            child.wait().unwrap();
        }
    }
}
