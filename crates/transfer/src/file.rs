//! Whole objects to files (with `.part`, resume and an atomic rename) and
//! [`RemoteFile`], random access by byte range.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use granary_packet::Name;
use sha2::Digest;

use crate::engine::{Engine, Job, JobState, Stats};
use crate::link::Link;
use crate::object::{
    discover, Check, FileSink, MemSink, ObjectInfo, ObjectJob, OpenOptions, StreamSink, Trust,
};
use crate::Error;

/// Where one object goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A regular file (or one to be created): written as `<path>.part`,
    /// renamed when complete.
    File(PathBuf),
    /// An existing file that is not a regular one (FIFO, character or block
    /// device, socket): written straight into, in order, as `cp` does — no
    /// `.part`, no rename (which would replace it), not resumable. Opened
    /// once, when first written (see [`Stream`]).
    Special(Stream),
    /// Standard output, in order.
    Stdout(Stream),
}

/// Symbolic links followed before a path is called a loop (Linux's limit).
const MAX_LINKS: usize = 40;

impl Output {
    /// The output for `path`, following symbolic links: an existing
    /// non-regular file is [`Output::Special`] (named as given); anything
    /// else is [`Output::File`] of the final target, so that the `.part`
    /// is made beside the target and renamed onto it and a symbolic link
    /// stays a link (a dangling link's target is created).
    pub fn for_path(path: &Path) -> Result<Output, Error> {
        let mut p = path.to_path_buf();
        let mut links = 0;
        while std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
            links += 1;
            if links > MAX_LINKS {
                return Err(Error::Output(format!(
                    "{}: too many levels of symbolic links",
                    path.display()
                )));
            }
            let t = std::fs::read_link(&p).map_err(|e| io(&p, e))?;
            p = match p.parent() {
                Some(dir) if t.is_relative() => dir.join(t),
                _ => t,
            };
        }
        Ok(match std::fs::metadata(&p) {
            Ok(m) if !m.is_file() && !m.is_dir() => Output::Special(Stream::special(path)),
            _ => Output::File(p),
        })
    }

    /// Standard output.
    pub fn stdout() -> Output {
        Output::Stdout(Stream::stdout())
    }
}

/// An output written in order — a FIFO, device or socket, or standard
/// output — shared by whatever writes the object: a verified local copy,
/// then (if that stops) the network fetch of the rest. It is opened once,
/// when first written, and never again: a FIFO closed and reopened would
/// show its reader an end of file, and the reopen would wait for ever for
/// a reader that has gone. The bytes written are counted, so that what
/// comes after starts where the last writer stopped (every byte once). A
/// reader that goes away (EPIPE) is an error that says so; it is noted
/// ([`Stream::reader_gone`]) so that nothing else is tried on it.
#[derive(Clone)]
pub struct Stream(Arc<std::sync::Mutex<StreamState>>);

struct StreamState {
    /// `None`: standard output.
    path: Option<PathBuf>,
    w: Option<Box<dyn Write + Send>>,
    written: u64,
    gone: bool,
}

impl Stream {
    fn new(path: Option<PathBuf>) -> Stream {
        Stream(Arc::new(std::sync::Mutex::new(StreamState {
            path,
            w: None,
            written: 0,
            gone: false,
        })))
    }

    /// An existing non-regular file (not opened yet).
    pub fn special(path: &Path) -> Stream {
        Stream::new(Some(path.to_path_buf()))
    }

    /// Standard output.
    pub fn stdout() -> Stream {
        Stream::new(None)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, StreamState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The file written (`None`: standard output).
    pub fn path(&self) -> Option<PathBuf> {
        self.state().path.clone()
    }

    /// Bytes written so far (by every writer).
    pub fn written(&self) -> u64 {
        self.state().written
    }

    /// True once a write found that the reader went away.
    pub fn reader_gone(&self) -> bool {
        self.state().gone
    }

    /// A writer; the first one opens the output (a FIFO waits here for its
    /// reader, as `cp` and `curl -o` do).
    pub fn writer(&self) -> Result<StreamWriter, Error> {
        let mut st = self.state();
        if st.w.is_none() {
            st.w = Some(match &st.path {
                Some(p) => open_special(p)?,
                None => Box::new(std::io::stdout()),
            });
        }
        Ok(StreamWriter(self.clone()))
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state();
        f.debug_struct("Stream")
            .field("path", &st.path)
            .field("open", &st.w.is_some())
            .field("written", &st.written)
            .finish()
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Stream {}

/// Writes to a [`Stream`] (see there).
pub struct StreamWriter(Stream);

impl StreamWriter {
    fn with<T>(
        &mut self,
        f: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
        count: impl FnOnce(&T) -> u64,
    ) -> std::io::Result<T> {
        let mut st = self.0.state();
        let st = &mut *st;
        let Some(w) = st.w.as_mut() else {
            return Err(std::io::Error::other("the output is not open"));
        };
        match f(w.as_mut()) {
            Ok(t) => {
                st.written += count(&t);
                Ok(t)
            }
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                st.gone = true;
                let what = st
                    .path
                    .as_ref()
                    .map_or("standard output".to_string(), |p| p.display().to_string());
                Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    format!(
                        "the reader of {what} went away (broken pipe): the output is incomplete"
                    ),
                ))
            }
            Err(e) => Err(e),
        }
    }
}

impl Write for StreamWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.with(|w| w.write(buf), |n| *n as u64)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.with(|w| w.flush(), |_| 0)
    }
}

/// Opens an existing non-regular file for writing: a socket is connected
/// to, anything else opened write-only (never created or truncated). A FIFO
/// waits here for its reader, as `cp` and `curl -o` do.
pub(crate) fn open_special(path: &Path) -> Result<Box<dyn Write + Send>, Error> {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::metadata(path).map_err(|e| io(path, e))?;
    if m.file_type().is_socket() {
        let s = std::os::unix::net::UnixStream::connect(path).map_err(|e| io(path, e))?;
        return Ok(Box::new(s));
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| io(path, e))?;
    Ok(Box::new(f))
}

/// A job writing the whole object to `w` in order (segments that arrive
/// early wait in the sink): standard output and non-regular files.
/// The job that writes `info` to `s`, from where earlier writers stopped.
fn stream_job(info: &ObjectInfo, s: &Stream) -> Result<ObjectJob, Error> {
    let start = s.written();
    let w = s.writer()?;
    Ok(ObjectJob::new(
        info.clone(),
        start,
        u64::MAX,
        Box::new(StreamSink::new(w, start)),
    ))
}

/// The resume state beside `<out>.part`.
#[derive(Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
struct State {
    versioned: String,
    segment_size: u64,
    segments: u64,
    size: Option<u64>,
}

/// What happened to one object.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// Versioned name.
    pub versioned: String,
    /// Output path (None for stdout).
    pub path: Option<PathBuf>,
    /// Object size (bytes), when known.
    pub size: Option<u64>,
    /// Segments in the object.
    pub segments: u64,
    /// Segments reused from a previous partial download.
    pub reused_segments: u64,
    /// How segments were verified.
    pub verified_by: String,
    /// Error, if this object failed.
    pub error: Option<String>,
}

fn side(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

/// The partial-download files of `out`: `.part`, `.part.state`, `.part.hashes`.
pub fn part_paths(out: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (
        side(out, ".part"),
        side(out, ".part.state"),
        side(out, ".part.hashes"),
    )
}

struct Prepared {
    job: ObjectJob,
    out: Output,
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Output(format!("{}: {e}", path.display()))
}

/// Opens `<out>.part` (fresh, or resumed: each segment recorded in the hash
/// side file is read back and re-verified — against the manifest when there
/// is one — and only those that pass are kept).
fn prepare_file(
    info: &ObjectInfo,
    out: &Path,
    resume: bool,
    cfg: &crate::Config,
) -> Result<ObjectJob, Error> {
    let (part, state_p, hashes_p) = part_paths(out);
    let state = State {
        versioned: info.versioned.to_string(),
        segment_size: info.map.segment_size(),
        segments: info.map.count(),
        size: info.map.file_size(),
    };
    let old: Option<State> = if resume {
        std::fs::read(&state_p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    } else {
        None
    };
    // Segments of unknown sizes have no offsets to resume at.
    let resuming = old.as_ref() == Some(&state)
        && part.exists()
        && hashes_p.exists()
        && !info.map.is_sequential();
    if resume && !resuming && old.is_some() {
        eprintln!(
            "{}: the partial download is of another version or layout; starting over",
            out.display()
        );
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true);
    if !resuming {
        opts.truncate(true);
    }
    let file = opts.open(&part).map_err(|e| io(&part, e))?;
    let hashes = opts.open(&hashes_p).map_err(|e| io(&hashes_p, e))?;
    if !resuming {
        std::fs::write(&state_p, serde_json::to_vec(&state).unwrap_or_default())
            .map_err(|e| io(&state_p, e))?;
        hashes
            .set_len(info.map.count() * 32)
            .map_err(|e| io(&hashes_p, e))?;
        if let Some(sz) = info.map.file_size() {
            file.set_len(sz).map_err(|e| io(&part, e))?;
        }
    }
    let mut keep = Vec::new();
    if resuming {
        let mut buf = vec![0u8; info.map.segment_size() as usize];
        let mut h = [0u8; 32];
        for seg in 0..info.map.count() {
            if hashes.read_exact_at(&mut h, seg * 32).is_err() || h == [0; 32] {
                continue;
            }
            let start = info.map.start(seg);
            let len = match info.map.len(seg) {
                Some(l) => l as usize,
                None => {
                    // Last segment of unknown size: what is on disk after its start.
                    let disk = file.metadata().map(|m| m.len()).unwrap_or(0);
                    disk.saturating_sub(start).min(buf.len() as u64) as usize
                }
            };
            let b = &mut buf[..len];
            if file.read_exact_at(b, start).is_err() {
                continue;
            }
            let ok = match &info.check {
                Check::Manifest(ck) => ck.check_segment(seg, b).is_ok(),
                Check::PerPacket(_) => <[u8; 32]>::from(sha2::Sha256::digest(&*b)) == h,
            };
            if ok {
                keep.push(seg);
            } else {
                let _ = hashes.write_all_at(&[0; 32], seg * 32);
            }
        }
    }
    let sink = FileSink::with_cache(
        file,
        0,
        Some(hashes),
        matches!(info.check, Check::PerPacket(_)),
        cfg.keep_output_cached,
    )
    .record_crcs(cfg.segment_crcs.clone());
    let mut job = ObjectJob::new(info.clone(), 0, u64::MAX, Box::new(sink));
    for s in keep {
        job.already_have(s);
    }
    Ok(job)
}

/// Finishes a complete `.part`: size fixed, synced, renamed into place.
fn finish_file(info: &ObjectInfo, out: &Path, last_len: Option<u64>) -> Result<(), Error> {
    let (part, state_p, hashes_p) = part_paths(out);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&part)
        .map_err(|e| io(&part, e))?;
    // (Sequential segments are written end to end: the file is its size.)
    if info.map.file_size().is_none() && !info.map.is_sequential() {
        if let Some(l) = last_len {
            f.set_len(info.map.start(info.map.count() - 1) + l)
                .map_err(|e| io(&part, e))?;
        }
    }
    f.sync_all().map_err(|e| io(&part, e))?;
    std::fs::rename(&part, out).map_err(|e| io(out, e))?;
    let _ = std::fs::remove_file(state_p);
    let _ = std::fs::remove_file(hashes_p);
    Ok(())
}

/// Length of the last segment as stored (for objects of unknown size),
/// read back from the hash side file's neighbour: the `.part` file length.
fn last_len_on_disk(info: &ObjectInfo, out: &Path) -> Option<u64> {
    let (part, _, _) = part_paths(out);
    let disk = std::fs::metadata(part).ok()?.len();
    Some(disk.saturating_sub(info.map.start(info.map.count() - 1)))
}

/// Fetches whole objects with one shared window. Each object's outcome is in
/// its [`Report`]; statistics cover the run.
pub async fn fetch_objects<L: Link>(
    engine: &mut Engine,
    link: &mut L,
    objects: Vec<(ObjectInfo, Output)>,
    resume: bool,
) -> Result<(Vec<Report>, Stats), Error> {
    if resume {
        if let Some((_, Output::Special(s))) = objects
            .iter()
            .find(|(_, o)| matches!(o, Output::Special(_)))
        {
            return Err(Error::Output(format!(
                "{}: not a regular file (a FIFO, device or socket), so there is no partial download to resume; run without --resume",
                s.path().unwrap_or_default().display()
            )));
        }
    }
    let mut prepared = Vec::new();
    for (info, out) in objects {
        let job = match &out {
            Output::File(p) => prepare_file(&info, p, resume, engine.config())?,
            Output::Special(s) | Output::Stdout(s) => stream_job(&info, s)?,
        };
        prepared.push(Prepared { job, out });
    }
    let stats = {
        let mut jobs: Vec<&mut dyn Job> = prepared
            .iter_mut()
            .map(|p| &mut p.job as &mut dyn Job)
            .collect();
        match engine.run(link, &mut jobs).await {
            Ok(st) => st,
            Err(e) => {
                let parts: Vec<String> = prepared
                    .iter()
                    .filter_map(|p| match &p.out {
                        Output::File(f) => Some(part_paths(f).0.display().to_string()),
                        Output::Special(_) | Output::Stdout(_) => None,
                    })
                    .collect();
                return Err(if parts.is_empty() {
                    e
                } else {
                    Error::Fetch(format!(
                        "{e}; the verified part is kept in {} (run again with --resume)",
                        parts.join(", ")
                    ))
                });
            }
        }
    };
    let mut reports = Vec::new();
    for p in prepared {
        let info = p.job.info().clone();
        let mut error = match p.job.state() {
            JobState::Done => None,
            JobState::Failed(e) => Some(e),
            JobState::Running => Some("did not complete".into()),
        };
        let mut verified_by = info.verified_by.clone();
        if !p.job.signers.is_empty() {
            verified_by = format!(
                "{} ({})",
                verified_by,
                p.job.signers.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        let reused = p.job.reused;
        drop(p.job);
        let path = match &p.out {
            Output::File(path) => {
                if error.is_none() {
                    if let Err(e) = finish_file(&info, path, last_len_on_disk(&info, path)) {
                        error = Some(e.to_string());
                    }
                } else {
                    let (part, _, _) = part_paths(path);
                    error = error.map(|e| {
                        format!(
                            "{e} (the verified part is kept in {}; run again with --resume)",
                            part.display()
                        )
                    });
                }
                Some(path.clone())
            }
            Output::Special(s) => s.path(),
            Output::Stdout(_) => None,
        };
        let size = info.map.file_size().or_else(|| {
            path.as_ref()
                .filter(|_| error.is_none() && matches!(p.out, Output::File(_)))
                .and_then(|p| std::fs::metadata(p).ok())
                .map(|m| m.len())
        });
        reports.push(Report {
            versioned: info.versioned.to_string(),
            path,
            size,
            segments: info.map.count(),
            reused_segments: reused,
            verified_by,
            error,
        });
    }
    Ok((reports, stats))
}

/// A remote object opened for random access: `stat`, then `read_at` fetches
/// only the segments covering the range asked for.
pub struct RemoteFile<L: Link> {
    link: L,
    engine: Engine,
    info: ObjectInfo,
}

/// What `stat` says.
#[derive(Debug, Clone)]
pub struct FileStat {
    /// Versioned name.
    pub versioned: Name,
    /// Size, when known.
    pub size: Option<u64>,
    /// Segment size.
    pub segment_size: u64,
    /// Segments.
    pub segments: u64,
    /// Verification.
    pub verified_by: String,
}

impl<L: Link> RemoteFile<L> {
    /// Discovers `name` (version, manifest, layout).
    pub async fn open(
        mut link: L,
        mut engine: Engine,
        name: &Name,
        trust: Arc<Trust>,
        opts: &OpenOptions,
    ) -> Result<RemoteFile<L>, Error> {
        let info = discover(&mut engine, &mut link, name, trust, opts).await?;
        Ok(RemoteFile { link, engine, info })
    }

    /// Size and layout.
    /// The object: versioned name, segment layout, how it is verified.
    pub fn info(&self) -> &ObjectInfo {
        &self.info
    }

    pub fn stat(&self) -> FileStat {
        FileStat {
            versioned: self.info.versioned.clone(),
            size: self.info.map.file_size(),
            segment_size: self.info.map.segment_size(),
            segments: self.info.map.count(),
            verified_by: self.info.verified_by.clone(),
        }
    }

    /// The engine (statistics).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Reads up to `len` bytes at `offset` (fewer at the end of the file).
    pub async fn read_at(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        let hi = offset.saturating_add(len);
        let mut job = ObjectJob::new(
            self.info.clone(),
            offset,
            hi,
            Box::new(MemSink {
                base: offset,
                buf: Vec::new(),
            }),
        );
        self.engine.run(&mut self.link, &mut [&mut job]).await?;
        if let JobState::Failed(e) = job.state() {
            return Err(Error::Fetch(e));
        }
        Ok(job.into_sink().take_bytes().unwrap_or_default())
    }

    /// Streams `len` bytes at `offset` (to the end with `u64::MAX`) in order.
    pub async fn copy_range(
        &mut self,
        offset: u64,
        len: u64,
        w: impl Write + Send + 'static,
    ) -> Result<u64, Error> {
        let hi = offset.saturating_add(len);
        let mut job = ObjectJob::new(
            self.info.clone(),
            offset,
            hi,
            Box::new(StreamSink::new(w, offset)),
        );
        let st = self.engine.run(&mut self.link, &mut [&mut job]).await?;
        if let JobState::Failed(e) = job.state() {
            return Err(Error::Fetch(e));
        }
        Ok(st.bytes)
    }
}
