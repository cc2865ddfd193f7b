//! Ingest: [`Store::put`] and [`Store::put_file`], the three-stage
//! pipeline (read and cut, hash, write; index entries on a thread of their
//! own) and the data file it writes ([`DataFile`]: direct I/O, or buffered
//! writes with a flusher thread).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use granary_packet::Name;
use sha2::{Digest, Sha256};

use crate::{
    chunking, hash_index, meta, now_us, path, sync_dir, unique, Backend, Chunking, Entry, Error,
    FileMeta, PutOptions, Result, Store,
};

impl Store {
    /// Ingests `reader` as a new version of `name`, streaming: the bytes are
    /// copied to a temp file while they are cut into segments
    /// ([`PutOptions::chunking`]) and each segment is hashed, all in one
    /// pass over a 1 MiB buffer; the version becomes visible only when
    /// complete and durable, and its segments are then added to the hash
    /// index ([`PutOptions::index`]). `progress` gets the byte count so far.
    pub fn put(
        &self,
        name: &Name,
        reader: impl Read,
        opts: &PutOptions,
        progress: impl FnMut(u64),
    ) -> Result<Entry> {
        let id = format!("{}-{}", std::process::id(), unique());
        self.ingest(name, reader, None, &id, opts, progress, &|| None, None)
            .and_then(published)
    }

    /// Ingests the file at `src`. Where the file system can share extents
    /// (reflink: XFS, btrfs; source and store on the same file system) the
    /// temp file is a copy-on-write clone of `src` and the ingest only reads
    /// it once to hash it — no data is written; elsewhere this is [`put`]
    /// on the opened file. The hashes are computed from the clone, so they
    /// describe exactly the stored bytes even if `src` changes meanwhile.
    /// Returns the entry and whether the data was reflinked.
    ///
    /// [`put`]: Store::put
    pub fn put_file(
        &self,
        name: &Name,
        src: &Path,
        opts: &PutOptions,
        progress: impl FnMut(u64),
    ) -> Result<(Entry, bool)> {
        path::object_dir(name)?;
        let id = format!("{}-{}", std::process::id(), unique());
        let clone = self.tmp.join(format!("{id}.data"));
        // A source the caller gives up is moved in (a rename on one file
        // system) and then treated as a reflinked clone: read once, to hash.
        let taken = opts.take_source && fs::rename(src, &clone).is_ok();
        if taken || reflink_copy::reflink(src, &clone).is_ok() {
            let f = fs::File::open(&clone).map_err(Error::io(&clone));
            let r = f.and_then(|f| {
                let hint = f.metadata().ok().map(|m| m.len());
                self.ingest(name, f, Some(&clone), &id, opts, progress, &|| None, hint)
                    .and_then(published)
            });
            if r.is_err() {
                let _ = fs::remove_file(&clone);
            }
            return r.map(|e| (e, true));
        }
        let _ = fs::remove_file(&clone);
        // No reflink: read into the ingest's buffers and written from there
        // (with direct I/O where the file system takes it), so the hashes
        // describe exactly the bytes stored even if `src` changes
        // meanwhile.
        let r = fs::File::open(src)
            .map_err(Error::io(src))
            .and_then(|from| {
                let hint = from.metadata().ok().map(|m| m.len());
                self.ingest(name, from, None, &id, opts, progress, &|| None, hint)
            })
            .and_then(published);
        r.map(|e| (e, false))
    }

    /// One streaming pass over `reader`: per-segment and whole-file hashes,
    /// and the copy into the temp data file ([`DataFile`]) — unless `cloned`
    /// names the temp data file that `reader` reads from (a reflink of the
    /// source). When the input has ended, `keep` says whether to publish
    /// (`None`) or to move the data file, bytes exactly as read, to the
    /// path it gives and publish nothing ([`Store::put_piped`]); the
    /// result is then `None`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ingest(
        &self,
        name: &Name,
        mut reader: impl Read,
        cloned: Option<&Path>,
        id: &str,
        opts: &PutOptions,
        mut progress: impl FnMut(u64),
        keep: &dyn Fn() -> Option<PathBuf>,
        size_hint: Option<u64>,
    ) -> Result<Option<Entry>> {
        const BLOCK: usize = 1 << 20;
        let dir = self.objects.join(path::object_dir(name)?);
        let chunking = opts
            .chunking
            .unwrap_or(Chunking::Fixed(opts.segment_size.max(1)));
        chunking.validate().map_err(Error::Corrupt)?;
        let cutter = chunking.cutter();
        // Known segments only for a taken file with no empty segment.
        let known = opts.known_segments.clone().filter(|k| {
            opts.take_source
                && cloned.is_some()
                && k.lengths.len() == k.hashes.len()
                && k.lengths.len() == k.crcs.len()
                && !k.lengths.is_empty()
                && k.lengths
                    .iter()
                    .all(|&l| l > 0 && l as usize <= cutter.max())
        });
        let version = opts.version.unwrap_or_else(now_us);
        let tmp_data = self.tmp.join(format!("{id}.data"));
        // The files beside the temp data file are named as beside a version
        // (`<data>.<suffix>`): a staged version is an entry like any other.
        let tmp_hash = crate::extra_path(&tmp_data, "hashes");
        let tmp_off = crate::extra_path(&tmp_data, "offsets");
        let tmp_crc = crate::extra_path(&tmp_data, crate::CRC_SUFFIX);
        // Staged: nothing is made durable here ([`Store::commit`] syncs).
        let sync = !opts.staged;
        let variable = !chunking.is_fixed();
        let final_data = dir.join(format!("@{version}"));
        let rel = final_data
            .strip_prefix(&self.objects)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The hash index, if this process can have it (otherwise the mark
        // written below gets the version indexed by whoever holds it).
        let index = if opts.index && !opts.staged {
            self.index_handle()
        } else {
            None
        };
        let result = (|| -> Result<Option<Entry>> {
            let mut data = match cloned {
                Some(c) => DataFile::cloned(c)?,
                None => DataFile::create(&tmp_data)?,
            };
            let hashes =
                std::io::BufWriter::new(fs::File::create(&tmp_hash).map_err(Error::io(&tmp_hash))?);
            let offsets = if variable {
                Some(std::io::BufWriter::new(
                    fs::File::create(&tmp_off).map_err(Error::io(&tmp_off))?,
                ))
            } else {
                None
            };
            let crcs =
                std::io::BufWriter::new(fs::File::create(&tmp_crc).map_err(Error::io(&tmp_crc))?);
            // Three stages, each on its own thread: this one reads and cuts
            // each block into segments; a worker hashes each segment (and
            // the whole file if asked), writes the hash and offset files
            // and feeds the index (a fourth thread); a writer puts the
            // block in the data file. Blocks of 1 MiB go round between
            // them, with `max` bytes of room in front where the reader puts
            // the undecided tail of the previous block (at most one
            // segment): constant memory, each byte copied once, and
            // reading, hashing and writing overlap (the reader never waits
            // for the disk; 16 blocks keep the stages fed through the
            // disk's hiccups). Cutting stays with reading: the bytes are
            // still in this core's cache, and on two cores one thread
            // fewer keeps the hasher running (FastCDC 1 GiB put 1.10 ->
            // 0.97 s, bench/RESULTS.md).
            const BLOCKS: usize = 16;
            // A file known to be small gets blocks of its size (a little
            // more, so that the end is seen in its one block): a buffer is
            // allocated and zeroed for nothing otherwise, 1 MiB a block.
            let block = size_hint
                .map(|h| ((h as usize).saturating_add(1)).next_multiple_of(DataFile::ALIGN))
                .unwrap_or(BLOCK)
                .min(BLOCK);
            let max = cutter.max();
            let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Block>(BLOCKS);
            let (free_tx, free_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(BLOCKS);
            // Buffers are made when needed, up to BLOCKS: room for the
            // carried tail, the block, and the slack that puts the block at
            // an aligned address (direct I/O).
            let mut made = 0;
            let mut next_buf = || match free_rx.try_recv() {
                Ok(b) => Some(b),
                Err(std::sync::mpsc::TryRecvError::Empty) if made < BLOCKS => {
                    made += 1;
                    Some(vec![0u8; max + block + 2 * DataFile::ALIGN])
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => free_rx.recv().ok(),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
            };
            // The writing stage: blocks go to the data file once hashed,
            // then back to the reader. On its own thread so that reading
            // never waits for the disk.
            let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Block>(BLOCKS);
            let write = cloned.is_none();
            let write_thread = spawn("ingest-write", move || -> Result<DataFile> {
                for mut b in done_rx {
                    let offset = b.start + (b.head - b.begin) as u64;
                    if write && b.len > b.head {
                        data.write_block(&mut b.buf[b.head..], b.len - b.head, offset)?;
                    }
                    let _ = free_tx.send(b.buf);
                }
                Ok(data)
            })?;
            let worker_paths = (tmp_hash.clone(), tmp_off.clone(), tmp_crc.clone());
            // One ingest at a time holds a write transaction; others (their
            // marks) are indexed when it is done, never waited for here.
            let writer = match &index {
                Some(ix) if !ix.writing() => ix.writer(&rel).ok(),
                _ => None,
            };
            let whole = opts.file_sha256;
            let known_hashes = known.clone();
            let worker = spawn("ingest-hash", move || {
                segment_worker(
                    full_rx,
                    done_tx,
                    hashes,
                    offsets,
                    crcs,
                    writer,
                    whole,
                    worker_paths,
                    sync,
                    known_hashes,
                )
            })?;
            let mut carver = Carver::new(&cutter, known);
            let mut size = 0u64;
            let read_result = (|| -> Result<()> {
                // Never read again after the end (some readers fail then).
                let mut eof = false;
                while !eof {
                    let Some(mut buf) = next_buf() else {
                        return Ok(()); // a later stage stopped: its error follows
                    };
                    // New bytes go to buf[head..], at an aligned address,
                    // with at least `max` bytes of room in front.
                    let head = max + DataFile::slack(&buf[max..]);
                    let mut len = head;
                    while len < head + block {
                        match reader.read(&mut buf[len..head + block]) {
                            Ok(0) => {
                                eof = true;
                                break;
                            }
                            Ok(k) => len += k,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                return Err(Error::Io {
                                    path: "input".into(),
                                    source: e,
                                })
                            }
                        }
                    }
                    size += (len - head) as u64;
                    progress(size);
                    if full_tx.send(carver.block(buf, head, len, eof)).is_err() {
                        return Ok(()); // a later stage stopped: its error follows
                    }
                }
                Ok(())
            })();
            drop(full_tx);
            let worked = worker
                .join()
                .map_err(|_| Error::Corrupt("segment worker panicked".into()))?;
            let data = write_thread
                .join()
                .map_err(|_| Error::Corrupt("data file writer panicked".into()))?;
            let (segments, index_writer, whole) = worked?;
            let data = data?;
            read_result?;
            if !carver.all_known() {
                return Err(Error::Corrupt(format!(
                    "{name}: the file is not the segments it was fetched as (its length differs); not published"
                )));
            }
            let segments = segments.max(1);
            if let Some(to) = keep() {
                // Not published: the bytes go to the caller's file; the
                // index entries are dropped uncommitted (no mark was made).
                drop(index_writer);
                data.finish(size, false)?;
                crate::pipe::move_file(&tmp_data, &to)?;
                let _ = fs::remove_file(&tmp_hash);
                let _ = fs::remove_file(&tmp_off);
                let _ = fs::remove_file(&tmp_crc);
                return Ok(None);
            }
            if let Some(want) = opts.expect_hashes {
                let got = fs::read(&tmp_hash).map_err(Error::io(&tmp_hash))?;
                if <[u8; 32]>::from(Sha256::digest(&got)) != want {
                    return Err(Error::Corrupt(format!(
                        "{name}: the file's segments are not the expected ones (it changed, or was cut differently); not published"
                    )));
                }
            }
            data.finish(size, sync)?;
            let m = FileMeta {
                name: name.to_string(),
                version,
                size,
                segment_size: chunking.max_len(),
                chunking: chunking.to_string(),
                segments: variable.then_some(segments),
                sha256: whole.map(hex::encode),
                manifest: None,
                signer: None,
                signing: None,
                content_type: opts.content_type.clone(),
                created_ms: now_us() / 1000,
                tags: Default::default(),
            };
            if opts.staged {
                // Left in the temp directory, metadata on it, for
                // [`Store::commit`] to publish with others.
                meta::write(self.backend, &tmp_data, &m)?;
                return Ok(Some(Entry {
                    path: tmp_data.clone(),
                    meta: m,
                    file: None,
                    offsets: None,
                    hashes: None,
                    crcs: None,
                }));
            }
            fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
            // One writer per version: the check and the renames below under
            // the publish lock (another process's put of the same version
            // waits here, then finds it and fails with `Exists`).
            let _lock = self.publish_lock()?;
            if final_data.exists() {
                return Err(Error::Exists(format!("{name} version {version}")));
            }
            // Metadata first (on the temp file, or its sidecar at the final
            // place), hashes and offsets next, an index-pending mark, data
            // last: the data file's rename is the moment the version appears.
            match self.backend {
                Backend::Xattr => meta::write(Backend::Xattr, &tmp_data, &m)?,
                Backend::Sidecar => meta::write(Backend::Sidecar, &final_data, &m)?,
            }
            fs::rename(&tmp_hash, dir.join(format!("@{version}.hashes")))
                .map_err(Error::io(&dir))?;
            fs::rename(
                &tmp_crc,
                dir.join(format!("@{version}.{}", crate::CRC_SUFFIX)),
            )
            .map_err(Error::io(&dir))?;
            if variable {
                fs::rename(&tmp_off, dir.join(format!("@{version}.offsets")))
                    .map_err(Error::io(&dir))?;
            }
            let mark = if opts.index {
                Some(self.mark_pending(&final_data)?)
            } else {
                None
            };
            if let Err(e) = fs::rename(&tmp_data, &final_data) {
                if let Some(m) = &mark {
                    let _ = fs::remove_file(m);
                }
                return Err(Error::io(&final_data)(e));
            }
            sync_dir(&dir);
            let e = Entry {
                path: final_data.clone(),
                meta: m,
                file: None,
                offsets: None,
                hashes: None,
                crcs: None,
            };
            // The version is durable: commit its index entries (made while
            // ingesting), then drop the mark. Without the index here, the
            // mark stays for its holder.
            if let Some(mark) = mark {
                let committed = index_writer.is_some_and(|w| w.commit().is_ok());
                if committed {
                    let _ = fs::remove_file(&mark);
                }
                // This version if it is not in yet, and those of ingests
                // that ran beside this one.
                if let Some(ix) = index.as_ref().filter(|ix| !ix.writing()) {
                    self.catch_up_into(ix, true);
                }
            }
            Ok(Some(e))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp_data);
            let _ = fs::remove_file(&tmp_hash);
            let _ = fs::remove_file(&tmp_off);
            let _ = fs::remove_file(&tmp_crc);
        }
        result
    }
}

/// The entry of an ingest that was to publish.
fn published(e: Option<Entry>) -> Result<Entry> {
    e.ok_or_else(|| Error::Corrupt("the ingest kept its data instead of publishing".into()))
}

/// One block of input on its way to the segment worker: `buf[begin..len]`
/// holds the bytes carried from the previous block (counted, and written
/// with it) up to `head`, then new bytes; `cuts` are the segment ends in
/// `buf` (the first segment starts at `begin`); `start` is the file offset
/// of `buf[begin]`.
struct Block {
    buf: Vec<u8>,
    begin: usize,
    head: usize,
    len: usize,
    cuts: Vec<u32>,
    start: u64,
}

/// The cutting side of reading: puts the undecided tail of the previous
/// block in front of each block's new bytes and cuts where at least `max`
/// bytes follow (or at the end), so boundaries never depend on where
/// blocks fall.
struct Carver<'a> {
    cutter: &'a chunking::Cutter,
    /// Known segment lengths instead of the cutter's, and how many are cut.
    known: Option<(std::sync::Arc<crate::KnownSegments>, usize)>,
    /// The tail of the previous block that is not a whole segment yet.
    carry: Vec<u8>,
    /// File offset of `carry[0]`.
    start: u64,
}

impl<'a> Carver<'a> {
    fn new(
        cutter: &'a chunking::Cutter,
        known: Option<std::sync::Arc<crate::KnownSegments>>,
    ) -> Self {
        Carver {
            cutter,
            known: known.map(|k| (k, 0)),
            carry: Vec::with_capacity(cutter.max()),
            start: 0,
        }
    }

    /// The block of `buf`, whose new bytes are `buf[head..len]` (`head` is
    /// at least `max`); `eof` when nothing follows.
    fn block(&mut self, mut buf: Vec<u8>, head: usize, len: usize, eof: bool) -> Block {
        let max = self.cutter.max();
        let begin = head - self.carry.len();
        buf[begin..head].copy_from_slice(&self.carry);
        let mut cuts = Vec::with_capacity((len - begin) / 1024 + 1);
        let mut pos = begin;
        if let Some((k, at)) = self.known.as_mut() {
            // Whole known segments only; the rest waits for the next block
            // (a segment is at most `max` bytes, so one always fits).
            while let Some(&l) = k.lengths.get(*at) {
                if pos + l as usize > len {
                    break;
                }
                pos += l as usize;
                cuts.push(pos as u32);
                *at += 1;
            }
        } else {
            while pos < len && (eof || len - pos >= max) {
                pos += self.cutter.cut(&buf[pos..len]);
                cuts.push(pos as u32);
            }
        }
        self.carry.clear();
        self.carry.extend_from_slice(&buf[pos..len]);
        let start = self.start;
        self.start += (pos - begin) as u64;
        Block {
            buf,
            begin,
            head,
            len,
            cuts,
            start,
        }
    }

    /// With known segments: every one was cut and no byte is left over.
    fn all_known(&self) -> bool {
        self.known
            .as_ref()
            .is_none_or(|(k, at)| *at == k.lengths.len() && self.carry.is_empty())
    }
}

/// Segment count, the index transaction, the whole-file hash if asked.
type Worked = (u64, Option<hash_index::Writer>, Option<[u8; 32]>);

/// The hashing side of ingest: hashes the segments of each block it
/// receives, writes each segment's hash and start offset, adds them to the
/// index transaction in batches, and hashes the whole file when `whole`.
/// Returns the segment count (an empty input is one empty segment).
#[allow(clippy::too_many_arguments)]
fn segment_worker(
    full: std::sync::mpsc::Receiver<Block>,
    done: std::sync::mpsc::SyncSender<Block>,
    mut hashes: std::io::BufWriter<fs::File>,
    mut offsets: Option<std::io::BufWriter<fs::File>>,
    mut crcs: std::io::BufWriter<fs::File>,
    mut writer: Option<hash_index::Writer>,
    whole: bool,
    (hash_path, off_path, crc_path): (PathBuf, PathBuf, PathBuf),
    sync: bool,
    known: Option<std::sync::Arc<crate::KnownSegments>>,
) -> Result<Worked> {
    // Index entries per batch (sorted before insertion: 1.5 MiB).
    const BATCH: usize = 32 * 1024;
    let mut whole = whole.then(Sha256::new);
    let mut end = 0u64; // file offset just past the last segment
    let mut segments = 0u64;
    let mut batch: Vec<([u8; 32], u64, u32)> = Vec::with_capacity(BATCH);
    // Index inserts run on a thread of their own, beside the other stages.
    let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Vec<([u8; 32], u64, u32)>>(2);
    let indexer = writer.take().and_then(|mut w| {
        spawn("ingest-index", move || {
            for mut b in batch_rx {
                if w.add(&mut b).is_err() {
                    return None; // the mark gets it indexed later
                }
            }
            Some(w)
        })
        .ok() // no thread: no index entries now; the mark gets them later
    });
    let mut last = false;
    while !last {
        let block = full.recv();
        last = block.is_err();
        if let Ok(b) = block {
            if let Some(w) = whole.as_mut() {
                w.update(&b.buf[b.head..b.len]);
            }
            let mut pos = b.begin;
            for &cut in &b.cuts {
                let cut = cut as usize;
                let h: [u8; 32] = match known.as_ref().and_then(|k| k.hashes.get(segments as usize))
                {
                    Some(h) => *h,
                    None => Sha256::digest(&b.buf[pos..cut]).into(),
                };
                hashes.write_all(&h).map_err(Error::io(&hash_path))?;
                let crc = crc32fast::hash(&b.buf[pos..cut]);
                if let Some(k) = known.as_ref() {
                    if k.crcs.get(segments as usize) != Some(&crc) {
                        return Err(Error::Corrupt(format!(
                            "segment {segments}: the bytes on disk are not those fetched and checked (CRC-32 differs); not published"
                        )));
                    }
                }
                crcs.write_all(&crc.to_le_bytes())
                    .map_err(Error::io(&crc_path))?;
                let off = b.start + (pos - b.begin) as u64;
                if let Some(o) = offsets.as_mut() {
                    o.write_all(&off.to_le_bytes())
                        .map_err(Error::io(&off_path))?;
                }
                if indexer.is_some() {
                    batch.push((h, off, (cut - pos) as u32));
                }
                segments += 1;
                pos = cut;
            }
            end = b.start + (pos - b.begin) as u64;
            if done.send(b).is_err() {
                // The writer stopped: its error is the one to report.
                return Ok((segments, None, None));
            }
        }
        if batch.len() >= BATCH || (last && !batch.is_empty()) {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            let _ = batch_tx.send(full);
        }
    }
    if segments == 0 {
        // An empty file is one empty segment (not indexed).
        hashes
            .write_all(&Sha256::digest(b""))
            .map_err(Error::io(&hash_path))?;
        crcs.write_all(&crc32fast::hash(b"").to_le_bytes())
            .map_err(Error::io(&crc_path))?;
        if let Some(o) = offsets.as_mut() {
            o.write_all(&0u64.to_le_bytes())
                .map_err(Error::io(&off_path))?;
        }
        segments = 1;
    }
    let h = hashes
        .into_inner()
        .map_err(|e| Error::io(&hash_path)(e.into_error()))?;
    if sync {
        h.sync_all().map_err(Error::io(&hash_path))?;
    }
    let c = crcs
        .into_inner()
        .map_err(|e| Error::io(&crc_path)(e.into_error()))?;
    if sync {
        c.sync_all().map_err(Error::io(&crc_path))?;
    }
    if let Some(mut o) = offsets {
        // The end of the last segment closes the table.
        o.write_all(&end.to_le_bytes())
            .map_err(Error::io(&off_path))?;
        let o = o
            .into_inner()
            .map_err(|e| Error::io(&off_path)(e.into_error()))?;
        if sync {
            o.sync_all().map_err(Error::io(&off_path))?;
        }
    }
    drop(batch_tx);
    let writer = indexer.and_then(|t| t.join().ok().flatten());
    Ok((segments, writer, whole.map(|w| w.finalize().into())))
}

/// The temp data file of an ingest. Written with direct I/O (`O_DIRECT`)
/// where the file system takes it: the blocks go from the ingest's buffers
/// to the disk without a copy into the page cache. That copy was most of
/// an ingest's CPU time (on a VM each new page-cache page can also cost
/// the host a page fault), and a large ingest no longer pushes everything
/// else out of the cache. Elsewhere (tmpfs, or a write refused) it falls
/// back to buffered writes, flushed every [`DataFile::EVERY`] bytes on a
/// thread of its own so the final `fsync` has only the tail left.
struct DataFile {
    file: fs::File,
    path: PathBuf,
    direct: bool,
    /// The write-back thread (buffered writes only).
    flusher: Option<Flusher>,
    /// The last block was padded to the alignment (direct I/O): cut back.
    padded: bool,
}

impl DataFile {
    /// Alignment of direct I/O: addresses, offsets and lengths (4 KiB
    /// covers 512-byte and 4 KiB sectors).
    const ALIGN: usize = 4096;
    /// Buffered fallback: flush this often.
    const EVERY: u64 = 64 << 20;

    fn create(path: &Path) -> Result<DataFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let direct = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
            .open(path);
        let (file, direct) = match direct {
            Ok(f) => (f, true),
            Err(_) => {
                let _ = fs::remove_file(path);
                (fs::File::create(path).map_err(Error::io(path))?, false)
            }
        };
        let mut d = DataFile {
            file,
            path: path.to_path_buf(),
            direct,
            flusher: None,
            padded: false,
        };
        if !direct {
            d.flusher = Some(Flusher::start(&d.file, path)?);
        }
        Ok(d)
    }

    /// A reflinked clone: nothing is written, only made durable.
    fn cloned(path: &Path) -> Result<DataFile> {
        let file = fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(Error::io(path))?;
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            direct: false,
            flusher: None,
            padded: false,
        })
    }

    /// Bytes to skip from the start of `buf` to an aligned address.
    fn slack(buf: &[u8]) -> usize {
        buf.as_ptr().align_offset(Self::ALIGN).min(Self::ALIGN)
    }

    /// Writes `buf[..n]` at `offset`. `buf` starts at an aligned address
    /// and has room for `n` rounded up to the alignment (the padding is
    /// written too, then cut off by [`DataFile::finish`]).
    fn write_block(&mut self, buf: &mut [u8], n: usize, offset: u64) -> Result<()> {
        use std::os::unix::fs::FileExt;
        if self.direct && !self.padded {
            let whole = n.div_ceil(Self::ALIGN) * Self::ALIGN;
            let aligned =
                offset % Self::ALIGN as u64 == 0 && Self::slack(buf) == 0 && whole <= buf.len();
            if aligned {
                buf[n..whole].fill(0);
                match self.file.write_all_at(&buf[..whole], offset) {
                    Ok(()) => {
                        self.padded = whole != n;
                        return Ok(());
                    }
                    // Refused (a file system that takes O_DIRECT at open
                    // but not this write): buffered from here on.
                    Err(e)
                        if [rustix::io::Errno::INVAL, rustix::io::Errno::OPNOTSUPP]
                            .iter()
                            .any(|n| e.raw_os_error() == Some(n.raw_os_error())) => {}
                    Err(e) => return Err(Error::io(&self.path)(e)),
                }
            }
            self.buffered()?;
        }
        self.file
            .write_all_at(&buf[..n], offset)
            .map_err(Error::io(&self.path))?;
        if let Some(f) = self.flusher.as_mut() {
            f.written(offset + n as u64);
        }
        Ok(())
    }

    /// Leaves direct I/O (the flags of the open file; nothing is lost).
    fn buffered(&mut self) -> Result<()> {
        let flags =
            rustix::fs::fcntl_getfl(&self.file).map_err(|e| Error::io(&self.path)(e.into()))?;
        rustix::fs::fcntl_setfl(&self.file, flags - rustix::fs::OFlags::DIRECT)
            .map_err(|e| Error::io(&self.path)(e.into()))?;
        self.direct = false;
        self.flusher = Some(Flusher::start(&self.file, &self.path)?);
        Ok(())
    }

    /// Cuts the padding off and makes the file durable if `sync`.
    fn finish(mut self, size: u64, sync: bool) -> Result<()> {
        if let Some(f) = self.flusher.take() {
            f.stop();
        }
        if self.padded {
            self.file.set_len(size).map_err(Error::io(&self.path))?;
        }
        if !sync {
            return Ok(());
        }
        self.file.sync_all().map_err(Error::io(&self.path))
    }
}

/// Early write-back of a buffered data file: a thread that flushes what
/// has been written every [`DataFile::EVERY`] bytes (`fdatasync` on its
/// own handle), so the disk works while the CPU cuts and hashes and the
/// final `fsync` waits only for the tail. Errors are left for that final
/// `fsync` to report.
struct Flusher {
    tx: std::sync::mpsc::SyncSender<u64>,
    thread: std::thread::JoinHandle<()>,
    next: u64,
}

impl Flusher {
    fn start(file: &fs::File, path: &Path) -> Result<Flusher> {
        let f = file.try_clone().map_err(Error::io(path))?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(1);
        let thread = spawn("ingest-flush", move || {
            for _ in rx {
                let _ = f.sync_data();
            }
        })?;
        Ok(Flusher {
            tx,
            thread,
            next: DataFile::EVERY,
        })
    }

    /// `size` bytes are written so far; ask for a flush when a new
    /// [`DataFile::EVERY`] boundary is crossed (never waits: a flush still
    /// running covers it).
    fn written(&mut self, size: u64) {
        if size >= self.next {
            let _ = self.tx.try_send(size);
            self.next = size + DataFile::EVERY;
        }
    }

    fn stop(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// Starts a named thread (the name shows in `top -H` and profiles).
fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::Io {
            path: format!("thread {name}"),
            source: e,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer like the ingest's, and the aligned start in it.
    fn buffer(n: usize) -> (Vec<u8>, usize) {
        let buf = vec![0u8; n + 2 * DataFile::ALIGN];
        let at = DataFile::slack(&buf);
        (buf, at)
    }

    /// A new data file in a temp directory (kept alive by the guard).
    fn data_file() -> (tempfile::TempDir, PathBuf, DataFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let f = DataFile::create(&path).unwrap();
        (dir, path, f)
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    /// Full blocks, then a last block that is not a multiple of the
    /// alignment: the file holds exactly the bytes (padding cut off),
    /// whichever way they were written.
    #[test]
    fn data_file_writes_exactly_the_bytes() {
        let (_dir, path, mut f) = data_file();
        let (mut buf, at) = buffer(1 << 16);
        let mut want = Vec::new();
        let mut off = 0u64;
        for (i, n) in [1usize << 16, 1 << 16, 5000].into_iter().enumerate() {
            let p = pattern(n, i as u8);
            buf[at..at + n].copy_from_slice(&p);
            f.write_block(&mut buf[at..], n, off).unwrap();
            off += n as u64;
            want.extend_from_slice(&p);
        }
        f.finish(off, true).unwrap();
        assert_eq!(fs::read(&path).unwrap(), want);
    }

    /// A block at an unaligned address cannot be written directly: the
    /// file drops to buffered writes and still gets every byte.
    #[test]
    fn data_file_falls_back_to_buffered_writes() {
        let (_dir, path, mut f) = data_file();
        let (mut buf, at) = buffer(1 << 16);
        let a = pattern(1 << 16, 1);
        buf[at..at + a.len()].copy_from_slice(&a);
        f.write_block(&mut buf[at..], a.len(), 0).unwrap();
        let b = pattern(3000, 2);
        buf[at + 1..at + 1 + b.len()].copy_from_slice(&b);
        f.write_block(&mut buf[at + 1..], b.len(), a.len() as u64)
            .unwrap();
        assert!(!f.direct, "an unaligned block switches to buffered writes");
        assert!(
            f.flusher.is_some(),
            "buffered writes are flushed as they go"
        );
        f.finish((a.len() + b.len()) as u64, true).unwrap();
        assert_eq!(fs::read(&path).unwrap(), [a, b].concat());
    }
}
