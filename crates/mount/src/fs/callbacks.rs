//! The FUSE callbacks: each request of the kernel's, answered from the
//! inode table, the fetcher and the drafts through [`GranaryFs`]'s helpers.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

use super::{errno, GranaryFs, Handle};
use granary_packet::Name;

use crate::drafts::{killed, Body};
use crate::fetch::{Child, FetchError};
use crate::inodes::{comp_of, entry_of, Kind, Node, ROOT};
use crate::read_ahead::ReadAhead;
use crate::sync::lock;

impl Filesystem for GranaryFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_readahead(1 << 20);
        // O_TRUNC arrives with open (no separate truncate to 0 first).
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC);
        if self.writable() {
            let _ = config.add_capabilities(fuser::InitFlags::FUSE_BIG_WRITES);
            let _ = config.set_max_write(1 << 20);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ttl = self.s.dir_ttl;
        // A file being written here first.
        if let Some((pname, _)) = self.node(parent.0) {
            if let Ok(c) = comp_of(name) {
                let n = pname.append(&c);
                if let Some(ino) = lock(&self.draft_names).get(&n).copied() {
                    self.entry_given(ino);
                    return reply.entry(&Duration::ZERO, &self.draft_attr(ino), Generation(0));
                }
            }
        }
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let child = Self::child_name(&pname, &e);
        if e.dir {
            let ino = self.give_dir(&child);
            return reply.entry(&ttl, &self.attr(ino, &Kind::Dir), Generation(0));
        }
        match self.meta(&child) {
            Ok((m, size)) => {
                let (ino, kind) = self.give_file(&child, &m, size);
                reply.entry(&ttl, &self.attr(ino, &kind), Generation(0))
            }
            Err(err) => {
                tracing::warn!("{child}: {err}");
                reply.error(errno(&err))
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino.0) {
            Some((_, k)) => {
                let ttl = if lock(&self.drafts).contains_key(&ino.0) {
                    Duration::ZERO
                } else {
                    self.s.dir_ttl
                };
                reply.attr(&ttl, &self.attr(ino.0, &k))
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some((_, k)) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(s) = size {
            // Only a file being written can change size.
            let Some(d) = lock(&self.drafts).get(&ino.0).cloned() else {
                return reply.error(if self.writable() {
                    Errno::EPERM
                } else {
                    Errno::EROFS
                });
            };
            // The size it has already (`ftruncate(fd, 0)` after creating):
            // nothing changes, a stream stays one.
            if d.size() != s || matches!(*lock(&d.body), Body::File(_)) {
                let f = match self.file_of(&d) {
                    Ok(f) => f,
                    Err(e) => return reply.error(e),
                };
                if let Err(e) = f.set_len(s) {
                    return reply.error(e.into());
                }
                d.dirty.store(true, Ordering::Release);
            }
        }
        // Modes, owners and times are not kept: accepted and ignored (as
        // `cp -p` expects), shown as the mount's.
        reply.attr(&Duration::ZERO, &self.attr(ino.0, &k))
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some((name, kind)) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        // Joined under the map's lock: a release that drops the draft
        // decides under it too, so this handle never joins a draft that is
        // going away (close() returns before the kernel sends the release).
        let draft = lock(&self.drafts).get(&ino.0).cloned().inspect(|d| {
            d.opens.fetch_add(1, Ordering::AcqRel);
        });
        if let Some(d) = draft {
            return self.open_joined(ino.0, &d, flags, reply);
        }
        let Kind::File { versioned, .. } = kind else {
            return reply.error(Errno::EISDIR);
        };
        if write {
            if !self.writable() {
                return reply.error(Errno::EROFS);
            }
            // Rewriting a stored file: a draft with its bytes (none with
            // O_TRUNC: then streamed), published as a new version on close.
            let trunc = flags.0 & libc::O_TRUNC != 0;
            let d = match self.new_draft(&name, trunc) {
                Ok(d) => d,
                Err(e) => return reply.error(e.into()),
            };
            if !trunc {
                let copied = match &*lock(&d.body) {
                    Body::File(f) => self.fill(f, &versioned),
                    _ => Err(FetchError::Io("a rewrite's draft is a file".into())),
                };
                if let Err(e) = copied {
                    let _ = std::fs::remove_file(&d.path);
                    return reply.error(errno(&e));
                }
            }
            // Another open may have made a draft of this file while ours
            // was filled: then this handle joins that one and ours goes.
            let joined = {
                let mut g = lock(&self.drafts);
                match g.get(&ino.0) {
                    Some(other) => {
                        other.opens.fetch_add(1, Ordering::AcqRel);
                        Some(other.clone())
                    }
                    None => {
                        g.insert(ino.0, d.clone());
                        None
                    }
                }
            };
            if let Some(other) = joined {
                d.abandoned.store(true, Ordering::Release);
                // A stream is dropped: its ingest removes what it wrote.
                *lock(&d.body) = Body::Failed;
                let _ = std::fs::remove_file(&d.path);
                return self.open_joined(ino.0, &other, flags, reply);
            }
            lock(&self.draft_names).insert(name, ino.0);
            return reply.opened(
                FileHandle(self.new_fh(Handle::Draft(ino.0))),
                FopenFlags::empty(),
            );
        }
        match self.rt.block_on(self.fetcher.open(&versioned)) {
            Ok((id, info)) => {
                let fh = self.new_fh(Handle::Object {
                    id,
                    info,
                    ra: Mutex::new(ReadAhead::default()),
                });
                // One inode is one version: its cached pages stay valid.
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE)
            }
            Err(e) => {
                tracing::warn!("open {versioned}: {e}");
                reply.error(errno(&e))
            }
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(h) = lock(&self.handles).get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        match &*h {
            Handle::Draft(ino) => {
                let Some(d) = lock(&self.drafts).get(ino).cloned() else {
                    return reply.error(Errno::EBADF);
                };
                let f = match self.file_of(&d) {
                    Ok(f) => f,
                    Err(e) => return reply.error(e),
                };
                let mut buf = vec![0; size as usize];
                let mut n = 0;
                while n < buf.len() {
                    match f.read_at(&mut buf[n..], offset + n as u64) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) => return reply.error(e.into()),
                    }
                }
                reply.data(&buf[..n])
            }
            Handle::Object { id, info, ra } => {
                let ahead = match self.s.max_readahead {
                    0 => 0,
                    max => lock(ra).on_read(offset, size as u64, max),
                };
                let (id, info) = (*id, info.clone());
                let f = self.fetcher.clone();
                self.rt.spawn(async move {
                    match f.read(id, &info, offset, size as u64, ahead).await {
                        Ok(b) => reply.data(&b),
                        Err(e) => {
                            tracing::warn!("read {} at {offset}: {e}", info.versioned);
                            reply.error(Errno::EIO)
                        }
                    }
                });
            }
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let h = lock(&self.handles).get(&fh.0).cloned();
        let Some(Handle::Draft(ino)) = h.as_deref() else {
            return reply.error(Errno::EBADF);
        };
        let Some(d) = lock(&self.drafts).get(ino).cloned() else {
            return reply.error(Errno::EBADF);
        };
        {
            // In order: straight into the ingest.
            let mut b = lock(&d.body);
            if let Body::Stream { s, size } = &mut *b {
                if offset == *size {
                    return match s.write(data) {
                        Ok(()) => {
                            *size += data.len() as u64;
                            d.dirty.store(true, Ordering::Release);
                            reply.written(data.len() as u32)
                        }
                        Err(e) => {
                            tracing::error!("{}: {e}", lock(&d.name));
                            *b = Body::Failed;
                            d.abandoned.store(true, Ordering::Release);
                            reply.error(Errno::EIO)
                        }
                    };
                }
            }
        }
        let f = match self.file_of(&d) {
            Ok(f) => f,
            Err(e) => return reply.error(e),
        };
        match f.write_all_at(data, offset) {
            Ok(()) => {
                d.dirty.store(true, Ordering::Release);
                reply.written(data.len() as u32)
            }
            Err(e) => reply.error(e.into()),
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Each close(): a draft is published now, so that when close()
        // returns the version is served; unless its writer is being killed.
        let h = lock(&self.handles).get(&fh.0).cloned();
        let Some(Handle::Draft(ino)) = h.as_deref() else {
            return reply.ok();
        };
        let Some(d) = lock(&self.drafts).get(ino).cloned() else {
            return reply.ok();
        };
        if killed(req.pid()) {
            tracing::warn!(
                "{}: the writer (pid {}) was killed: nothing published",
                lock(&d.name),
                req.pid()
            );
            d.abandoned.store(true, Ordering::Release);
            // A stream is dropped now: its ingest removes what it wrote.
            let mut b = lock(&d.body);
            if matches!(*b, Body::Stream { .. }) {
                *b = Body::Failed;
            }
            return reply.ok();
        }
        match self.publish_draft(*ino, &d) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _ds: bool, reply: ReplyEmpty) {
        let h = lock(&self.handles).get(&fh.0).cloned();
        if let Some(Handle::Draft(ino)) = h.as_deref() {
            let d = lock(&self.drafts).get(ino).cloned();
            // A stream's bytes are durable when published (on close).
            let file = d.and_then(|d| match &*lock(&d.body) {
                Body::File(f) => Some(f.clone()),
                _ => None,
            });
            if let Some(f) = file {
                if let Err(e) = f.sync_data() {
                    return reply.error(e.into());
                }
            }
        }
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let h = lock(&self.handles).remove(&fh.0);
        if let Some(Handle::Draft(ino)) = h.as_deref() {
            let d = lock(&self.drafts).get(ino).cloned();
            if let Some(d) = d {
                if let Err(e) = self.leave_draft(*ino, &d) {
                    return reply.error(e);
                }
            }
        }
        reply.ok()
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some((name, kind)) = self.node(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if !matches!(kind, Kind::Dir) {
            return reply.error(Errno::ENOTDIR);
        }
        let es = match self.entries(ino.0, &name) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let mut all: Vec<(u64, FileType, Vec<u8>)> = vec![
            (ino.0, FileType::Directory, b".".to_vec()),
            (ROOT, FileType::Directory, b"..".to_vec()),
        ];
        let mut seen = HashSet::new();
        let nodes = lock(&self.nodes);
        for e in &es {
            let child = Self::child_name(&name, e);
            let (i, t) = if e.dir {
                (nodes.listed(&(0, child.to_string())), FileType::Directory)
            } else {
                (nodes.listed(&(2, child.to_string())), FileType::RegularFile)
            };
            seen.insert(e.fs_name.clone());
            all.push((i, t, e.fs_name.clone()));
        }
        drop(nodes);
        // Files being written here, not listed yet.
        for (n, i) in lock(&self.draft_names).iter() {
            if n.len() == name.len() + 1 && name.is_prefix_of(n) {
                if let Some(e) = n.last().map(|c| {
                    entry_of(&Child {
                        comp: c.to_owned(),
                        object: true,
                        prefix: false,
                    })
                }) {
                    if seen.insert(e.fs_name.clone()) {
                        all.push((*i, FileType::RegularFile, e.fs_name));
                    }
                }
            }
        }
        for (k, (i, t, n)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(i), k as u64 + 1, t, OsStr::from_bytes(&n)) {
                break;
            }
        }
        reply.ok()
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let n = match self.new_child(parent.0, name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let d = match self.new_draft(&n, true) {
            Ok(d) => d,
            Err(e) => return reply.error(e.into()),
        };
        let ino = {
            let mut g = lock(&self.nodes);
            g.next += 1;
            let ino = g.next;
            g.by_ino.insert(
                ino,
                Node::new(
                    n.clone(),
                    Kind::File {
                        versioned: Name::new(),
                        size: 0,
                        mtime: SystemTime::now(),
                    },
                ),
            );
            g.looked_up(ino);
            ino
        };
        lock(&self.drafts).insert(ino, d);
        lock(&self.draft_names).insert(n, ino);
        let fh = self.new_fh(Handle::Draft(ino));
        reply.created(
            &Duration::ZERO,
            &self.draft_attr(ino),
            Generation(0),
            FileHandle(fh),
            FopenFlags::empty(),
        )
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let n = match self.new_child(parent.0, name) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        if self.find(parent.0, name).is_ok() {
            return reply.error(Errno::EEXIST);
        }
        lock(&self.made_dirs).insert(n.clone());
        self.invalidate(parent.0, None);
        let ino = self.give_dir(&n);
        reply.entry(&self.s.dir_ttl, &self.attr(ino, &Kind::Dir), Generation(0))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let p = match self.publish_of() {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if e.dir {
            return reply.error(Errno::EISDIR);
        }
        let n = Self::child_name(&pname, &e);
        match p.publisher.remove(&n) {
            Ok(()) => {
                self.fetcher.forget(&n);
                self.invalidate(parent.0, Some(&n));
                reply.ok()
            }
            Err(err) => {
                tracing::error!("removing {n}: {err}");
                reply.error(Errno::EIO)
            }
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = self.publish_of() {
            return reply.error(e);
        }
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if !e.dir {
            return reply.error(Errno::ENOTDIR);
        }
        let n = Self::child_name(&pname, &e);
        let ino = self.dir_ino(&n);
        self.invalidate(ino, None);
        match self.entries(ino, &n) {
            Ok(es)
                if es
                    .iter()
                    .any(|x| !lock(&self.made_dirs).contains(&n.append(&x.comp))) =>
            {
                return reply.error(Errno::ENOTEMPTY)
            }
            Ok(es) if !es.is_empty() => return reply.error(Errno::ENOTEMPTY),
            _ => {}
        }
        lock(&self.made_dirs).remove(&n);
        self.invalidate(parent.0, None);
        reply.ok()
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let p = match self.publish_of() {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let (Some((pname, _)), Some((npname, _))) = (self.node(parent.0), self.node(newparent.0))
        else {
            return reply.error(Errno::ENOENT);
        };
        let (old, new) = match (comp_of(name), comp_of(newname)) {
            (Ok(a), Ok(b)) => (pname.append(&a), npname.append(&b)),
            _ => return reply.error(Errno::EINVAL),
        };
        // A file still being written: it will be published under the new
        // name.
        let draft = lock(&self.draft_names).remove(&old);
        if let Some(ino) = draft {
            let d = lock(&self.drafts).get(&ino).cloned();
            if let Some(d) = d {
                // A stream is for its first name: a file from here on.
                if matches!(*lock(&d.body), Body::Stream { .. }) {
                    if let Err(e) = self.file_of(&d) {
                        lock(&self.draft_names).insert(old, ino);
                        return reply.error(e);
                    }
                }
                *lock(&d.name) = new.clone();
            }
            lock(&self.draft_names).insert(new, ino);
            return reply.ok();
        }
        let (pname, e) = match self.find(parent.0, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let old = Self::child_name(&pname, &e);
        if e.dir {
            // Prefixes are not renamed in one step: EXDEV makes `mv` copy
            // and remove instead.
            return reply.error(Errno::EXDEV);
        }
        // rename(2) replaces the target.
        if let Ok((_, t)) = self.find(newparent.0, newname) {
            if t.dir {
                return reply.error(Errno::EISDIR);
            }
            if let Err(err) = p.publisher.remove(&new) {
                tracing::error!("replacing {new}: {err}");
                return reply.error(Errno::EIO);
            }
        }
        match p.publisher.rename(&old, &new) {
            Ok(()) => {
                self.fetcher.forget(&old);
                self.invalidate(parent.0, Some(&old));
                self.invalidate(newparent.0, Some(&new));
                reply.ok()
            }
            Err(err) => {
                tracing::error!("renaming {old} to {new}: {err}");
                reply.error(Errno::EIO)
            }
        }
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::ENODATA))
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: fuser::ReplyXattr) {
        if size == 0 {
            reply.size(0)
        } else {
            reply.data(&[])
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let pinned = lock(&self.drafts).contains_key(&ino.0);
        if lock(&self.nodes).forget(ino.0, nlookup, pinned) {
            lock(&self.dirs).remove(&ino.0);
        }
    }

    /// `files`: the inodes held now (what `df -i` shows as used).
    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: fuser::ReplyStatfs) {
        let files = lock(&self.nodes).by_ino.len() as u64;
        reply.statfs(0, 0, 0, files, 0, 128 << 10, 255, 128 << 10)
    }
}
