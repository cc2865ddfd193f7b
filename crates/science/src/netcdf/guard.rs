//! The guards around the parser: a byte budget and a deadline on every range read, a
//! worker thread with a timeout, and `catch_unwind` as the last line of defence.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use hdf5_reader::{Storage, StorageBuffer};
use netcdf_reader::{NcFile, NcMetadataMode, NcOpenOptions};

use super::extract;
use super::meta::{map_err, sniff, Format, Limits, NcError, NcMeta};

/// A random-access byte source: a local file, or later the segments of a remote one.
pub trait ReadAt: Send + Sync {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exactly `len` bytes at `offset` (an error when past the end).
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>>;
}

/// A local file read with `pread`: no memory map, so a file truncated under us gives an
/// I/O error instead of SIGBUS.
pub(super) struct FileSource {
    file: File,
    len: u64,
}

impl FileSource {
    pub(super) fn open(path: &Path) -> std::io::Result<FileSource> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileSource { file, len })
    }
}

impl ReadAt for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > self.len) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("range {offset}+{len} is past the end ({} bytes)", self.len),
            ));
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }
}

/// Why the guard stopped the parser, if it did.
#[derive(Default)]
struct Tripped {
    timeout: AtomicBool,
    budget: AtomicBool,
}

/// The parser's view of the source: every read is checked against the file length,
/// the byte budget, and the deadline before any buffer is allocated.
struct Guarded {
    inner: Arc<dyn ReadAt>,
    deadline: Instant,
    remaining: AtomicU64,
    tripped: Arc<Tripped>,
}

fn refuse(_offset: u64, msg: String) -> hdf5_reader::error::Error {
    hdf5_reader::error::Error::Io(std::io::Error::other(msg))
}

impl Storage for Guarded {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_range(&self, offset: u64, len: usize) -> hdf5_reader::error::Result<StorageBuffer> {
        let file_len = self.inner.len();
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > file_len) {
            return Err(hdf5_reader::error::Error::UnexpectedEof {
                offset,
                needed: len as u64,
                available: file_len.saturating_sub(offset),
            });
        }
        if Instant::now() > self.deadline {
            self.tripped.timeout.store(true, Ordering::Relaxed);
            return Err(refuse(offset, "deadline passed".into()));
        }
        let want = len as u64;
        let ok = self
            .remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                r.checked_sub(want)
            })
            .is_ok();
        if !ok {
            self.tripped.budget.store(true, Ordering::Relaxed);
            return Err(refuse(offset, "read budget exhausted".into()));
        }
        let bytes = self.inner.read_at(offset, len)?;
        Ok(StorageBuffer::from_vec(bytes))
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Gives the memory a parse freed back to the system. The daemon keeps up to
/// 64 MiB of freed memory per glibc arena (`crates/cli/src/alloc.rs`, for
/// the forwarder's buffers), and a parse's short-lived buffers (the reader's
/// blocks, chunks, decoded slices) land in the arenas of the worker thread
/// and the threads that read for it: floods of `/api/preview` left the
/// daemon at ~260 MiB of RSS after 2,600 requests, ~370 MiB after 4,000,
/// for 64 MiB of answers kept. `malloc_trim(0)` hands back the free pages of
/// every arena (glibc ≥ 2.8); once per parse, after the worker is done.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes an integer and only releases memory malloc
    // holds free (under its arena locks); it touches no memory of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Parses on a worker thread, under `catch_unwind`, and gives up after the timeout.
/// A worker that overruns is abandoned (detached): its reads fail from the deadline on,
/// so it ends at its next read.
pub(super) fn run_guarded(source: Arc<dyn ReadAt>, limits: &Limits) -> Result<NcMeta, NcError> {
    let limits2 = limits.clone();
    run_with_file(
        source,
        limits,
        limits.max_coord_values.saturating_mul(8),
        move |file, file_len, subgroups| extract::extract(file, file_len, &limits2, subgroups),
    )
}

/// Opens the source as a netCDF file behind the guards (budget, deadline, HDF5
/// truncation and group-cycle checks, a worker thread under `catch_unwind`, the
/// timeout) and runs `f` on it there: `f(file, file length, sub-group count)`.
/// `max_read_bytes` bounds any one variable read the parser decodes.
pub(crate) fn run_with_file<T: Send + 'static>(
    source: Arc<dyn ReadAt>,
    limits: &Limits,
    max_read_bytes: u64,
    f: impl FnOnce(&NcFile, u64, usize) -> Result<T, NcError> + Send + 'static,
) -> Result<T, NcError> {
    let file_len = source.len();
    if file_len < 4 {
        return Err(NcError::NotNetcdf);
    }
    let tripped = Arc::new(Tripped::default());
    let storage = Guarded {
        inner: source,
        deadline: Instant::now() + limits.timeout,
        remaining: AtomicU64::new(limits.max_bytes_read),
        tripped: tripped.clone(),
    };
    let limits2 = limits.clone();
    let (tx, rx) = mpsc::sync_channel(1);
    let worker = std::thread::Builder::new()
        .name("netcdf-read".into())
        .stack_size(16 << 20)
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                parse(Arc::new(storage), file_len, &limits2, max_read_bytes, f)
            }));
            let _ = tx.send(result);
        })
        .map_err(|e| NcError::Limit(format!("cannot start the reader thread: {e}")))?;
    // A little grace beyond the deadline for the worker to notice it.
    let wait = limits.timeout + limits.timeout / 10 + std::time::Duration::from_millis(50);
    let outcome = match rx.recv_timeout(wait) {
        Ok(r) => r,
        Err(_) => return Err(NcError::Timeout(limits.timeout)),
    };
    let _ = worker.join();
    release_freed_memory();
    let result = match outcome {
        Ok(r) => r,
        Err(p) => return Err(NcError::Panic(panic_text(p.as_ref()))),
    };
    if tripped.timeout.load(Ordering::Relaxed) {
        return Err(NcError::Timeout(limits.timeout));
    }
    if tripped.budget.load(Ordering::Relaxed) {
        return Err(NcError::Limit(format!(
            "the parser asked for more than {} bytes",
            limits.max_bytes_read
        )));
    }
    result
}

fn parse<T>(
    storage: Arc<Guarded>,
    file_len: u64,
    limits: &Limits,
    max_read_bytes: u64,
    f: impl FnOnce(&NcFile, u64, usize) -> Result<T, NcError>,
) -> Result<T, NcError> {
    let options = NcOpenOptions {
        metadata_mode: NcMetadataMode::Strict,
        // Never decode more than this at once (the metadata read: the coordinate limit).
        max_read_bytes: usize::try_from(max_read_bytes).unwrap_or(usize::MAX),
        chunk_cache_bytes: 8 << 20,
        ..NcOpenOptions::default()
    };
    let mut subgroups = 0;
    if storage
        .read_range(0, 8)
        .is_ok_and(|b| sniff(&b) == Some(Format::Netcdf4))
    {
        check_hdf5_eof(&storage, file_len)?;
        subgroups = walk_hdf5_groups(storage.clone(), limits)?;
    }
    let file = NcFile::from_storage_with_options(storage, options).map_err(map_err)?;
    f(&file, file_len, subgroups)
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0, |acc, &x| (acc << 8) | u64::from(x))
}

/// HDF5's own truncation check: the end-of-file address stored in a superblock at the
/// start of the file must not lie past the real end (a user block moves the superblock
/// and is left to the parser).
fn check_hdf5_eof(storage: &Guarded, file_len: u64) -> Result<(), NcError> {
    let Ok(head) = storage.read_range(0, 64.min(file_len as usize)) else {
        return Err(NcError::Malformed("HDF5 superblock is truncated".into()));
    };
    let version = head.get(8).copied().unwrap_or(u8::MAX);
    let (size_at, base_at) = match version {
        0 => (13, 24),
        1 => (13, 28),
        2 | 3 => (9, 12),
        v => {
            return Err(NcError::Malformed(format!(
                "unsupported HDF5 superblock version {v}"
            )))
        }
    };
    let o = usize::from(head.get(size_at).copied().unwrap_or(0));
    if !matches!(o, 2 | 4 | 8) {
        return Err(NcError::Malformed(format!("HDF5 offset size {o}")));
    }
    // Base address, then (v0/1) free-space address or (v2/3) extension address, then EOF.
    let field = |i: usize| head.get(base_at + i * o..base_at + (i + 1) * o).map(le);
    let (Some(base), Some(eof)) = (field(0), field(2)) else {
        return Err(NcError::Malformed("HDF5 superblock is truncated".into()));
    };
    if base.saturating_add(eof) > file_len {
        return Err(NcError::Malformed(format!(
            "truncated HDF5 file: its superblock says {} bytes, the file has {file_len}",
            base.saturating_add(eof)
        )));
    }
    Ok(())
}

/// Walks the HDF5 group tree with a visited set and a depth bound, because the
/// netCDF-4 model builder recurses into child groups without a cycle check (a group
/// linking to an ancestor would overflow the stack). Returns the number of sub-groups.
fn walk_hdf5_groups(storage: Arc<Guarded>, limits: &Limits) -> Result<usize, NcError> {
    let h5 = hdf5_reader::Hdf5File::from_storage(storage)
        .map_err(|e| NcError::Malformed(e.to_string()))?;
    let root = h5
        .root_group()
        .map_err(|e| NcError::Malformed(e.to_string()))?;
    let mut visited = std::collections::HashSet::new();
    visited.insert(root.address());
    let mut stack = vec![(root, 0usize)];
    let mut count = 0usize;
    while let Some((g, depth)) = stack.pop() {
        let children = g.groups().map_err(|e| NcError::Malformed(e.to_string()))?;
        for c in children {
            if !visited.insert(c.address()) {
                return Err(NcError::Malformed(format!(
                    "cyclic or shared HDF5 group structure (group at address {} reached twice)",
                    c.address()
                )));
            }
            count += 1;
            if depth + 1 > 64 || count > limits.max_vars {
                return Err(NcError::Limit(
                    "HDF5 group tree too deep or too large".into(),
                ));
            }
            stack.push((c, depth + 1));
        }
    }
    Ok(count)
}

/// The guarded storage (byte budget, deadline, file-length checks) over a source, for
/// readers other than [`run_guarded`]'s metadata parse (the chunk index).
pub(super) fn guarded_storage(
    source: Arc<dyn ReadAt>,
    limits: &Limits,
) -> Arc<dyn Storage + Send + Sync> {
    Arc::new(Guarded {
        inner: source,
        deadline: Instant::now() + limits.timeout,
        remaining: AtomicU64::new(limits.max_bytes_read),
        tripped: Arc::new(Tripped::default()),
    })
}
