//! # granary-manifest
//!
//! The signed per-version manifest format: one asymmetric signature per file
//! version. No I/O: the repository builds and stores manifests, the fetcher
//! checks what it receives against them.
//!
//! The manifest of `<name>/v=<V>` is a segmented object
//! `<name>/v=<V>/32=manifest/seg=<k>`:
//!
//! - level 0 is the SHA-256 of every data segment's content (the store's
//!   `.hashes` file); level i+1 is the SHA-256 of each 8 KiB block (256
//!   hashes) of level i, until a level has at most [`ROOT_HASHES`] hashes;
//! - segment 0, the **root**, holds that top level plus the file's size,
//!   segment size, segment count and (when the publisher computed it) the
//!   whole file's SHA-256, and is the only Data signed with
//!   the publisher's key;
//! - segments 1.. are the blocks of the levels below the top, top-down,
//!   each checked against its parent's hash (DigestSha256-signed only).
//!
//! A 4 GiB file (524,288 segments) has levels of 524,288 → 2,048 → 8 hashes:
//! one signature, 2,056 manifest blocks, and every data segment verifiable
//! as soon as its block arrives.
//!
//! **Formats.** Format 1 (no `Format` field in the root): fixed-size
//! segments; level-0 entries are bare 32-byte hashes and every segment but
//! the last is `segment_size` long. Format 2 (`Format` = 2): variable-size
//! (content-defined) segments; each level-0 entry is 44 bytes — SHA-256 ‖
//! offset (u64 BE) ‖ length (u32 BE) — 180 entries per block (7,920 bytes),
//! and `segment_size` is the largest segment. Format-1 manifests decode as
//! before. [`Checker::segment_offset`] / [`Checker::segment_len`] give any
//! segment's byte range in either format.

use bytes::{Bytes, BytesMut};
use granary_packet::tlv::{self, Reader};
use granary_packet::types::content_type;
use granary_packet::{Component, Data, DataBuilder, Name};
use granary_security::Signer;
use sha2::{Digest, Sha256};

/// Hashes per manifest block.
pub const FANOUT: u64 = 256;
/// Level-0 entries per block in format 2.
pub const LEAF_FANOUT_V2: u64 = 180;
/// Bytes of a level-0 entry in format 2 (hash, offset, length).
pub const ENTRY_V2: usize = 44;
/// Fixed-size segments.
pub const FORMAT_FIXED: u64 = 1;
/// Variable-size segments with offsets and lengths.
pub const FORMAT_VARIABLE: u64 = 2;
/// Most hashes the root holds (leaves room for a long name in 8800 bytes).
pub const ROOT_HASHES: u64 = 128;

/// TLV types of the root's content (even: non-critical, Granary range).
pub mod tt {
    /// Number of data segments.
    pub const SEGMENT_COUNT: u64 = 0xF580;
    /// Content bytes per data segment.
    pub const SEGMENT_SIZE: u64 = 0xF582;
    /// File size.
    pub const FILE_SIZE: u64 = 0xF584;
    /// SHA-256 of the whole file.
    pub const FILE_SHA256: u64 = 0xF586;
    /// Number of levels below the root's.
    pub const LEVELS: u64 = 0xF588;
    /// The top level's hashes.
    pub const HASHES: u64 = 0xF58A;
    /// Manifest format (absent = 1).
    pub const FORMAT: u64 = 0xF58C;
    /// How a format-2 version was cut (`fastcdc:<min>:<avg>:<max>`, UTF-8),
    /// so that a consumer keeping a copy cuts it the same way: optional,
    /// advisory (the hashes decide), ignored by readers that do not know it.
    pub const CHUNKING: u64 = 0xF58E;
}

/// Shape of a manifest: hash counts per level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// counts[0] = data segments; the last entry is the root's level.
    pub counts: Vec<u64>,
    /// Format ([`FORMAT_FIXED`] or [`FORMAT_VARIABLE`]).
    pub format: u64,
}

impl Layout {
    /// The format-1 layout for `segments` data segments.
    pub fn new(segments: u64) -> Layout {
        Layout::with_format(segments, FORMAT_FIXED)
    }

    /// The layout for `segments` data segments in `format`.
    pub fn with_format(segments: u64, format: u64) -> Layout {
        let mut counts = vec![segments];
        while *counts.last().unwrap_or(&0) > ROOT_HASHES {
            let l = counts.len() - 1;
            let c = counts[l];
            counts.push(c.div_ceil(fanout(format, l)));
        }
        Layout { counts, format }
    }

    /// Entries per block of level `l`.
    pub fn fanout(&self, l: usize) -> u64 {
        fanout(self.format, l)
    }

    /// Bytes per entry of level `l`.
    pub fn entry_size(&self, l: usize) -> usize {
        if l == 0 && self.format == FORMAT_VARIABLE {
            ENTRY_V2
        } else {
            32
        }
    }

    /// Index of the root's level.
    pub fn top(&self) -> usize {
        self.counts.len() - 1
    }

    /// Blocks of level `l` (below the top).
    pub fn blocks(&self, l: usize) -> u64 {
        self.counts[l].div_ceil(self.fanout(l))
    }

    /// Manifest segments in all (root included).
    pub fn total_segments(&self) -> u64 {
        1 + (0..self.top()).map(|l| self.blocks(l)).sum::<u64>()
    }

    /// Manifest segment number of block `b` of level `l`.
    pub fn segment_of(&self, l: usize, b: u64) -> u64 {
        1 + (l + 1..self.top()).map(|x| self.blocks(x)).sum::<u64>() + b
    }

    /// Level and block of manifest segment `seg` (≥ 1).
    pub fn locate(&self, seg: u64) -> Option<(usize, u64)> {
        let mut s = seg.checked_sub(1)?;
        for l in (0..self.top()).rev() {
            if s < self.blocks(l) {
                return Some((l, s));
            }
            s -= self.blocks(l);
        }
        None
    }
}

fn fanout(format: u64, l: usize) -> u64 {
    if l == 0 && format == FORMAT_VARIABLE {
        LEAF_FANOUT_V2
    } else {
        FANOUT
    }
}

/// One level-0 entry of format 2.
pub fn encode_entry(hash: &[u8; 32], offset: u64, len: u32) -> [u8; ENTRY_V2] {
    let mut e = [0u8; ENTRY_V2];
    e[..32].copy_from_slice(hash);
    e[32..40].copy_from_slice(&offset.to_be_bytes());
    e[40..].copy_from_slice(&len.to_be_bytes());
    e
}

fn decode_entry(e: &[u8]) -> Option<([u8; 32], u64, u32)> {
    Some((
        e.get(..32)?.try_into().ok()?,
        u64::from_be_bytes(e.get(32..40)?.try_into().ok()?),
        u32::from_be_bytes(e.get(40..44)?.try_into().ok()?),
    ))
}

/// The manifest name of a versioned name.
pub fn manifest_name(versioned: &Name) -> Name {
    versioned.append(&Component::keyword(b"manifest"))
}

/// Root content fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    /// Data segments.
    pub segment_count: u64,
    /// Segment size.
    pub segment_size: u64,
    /// File size.
    pub file_size: u64,
    /// Whole-file SHA-256, when the publisher computed it (optional: the
    /// hash tree already identifies the content).
    pub file_sha256: Option<[u8; 32]>,
    /// Levels below the top.
    pub levels: u64,
    /// Top-level hashes (level-0 entries when the root is level 0).
    pub hashes: Bytes,
    /// Format ([`FORMAT_FIXED`] or [`FORMAT_VARIABLE`]).
    pub format: u64,
    /// The publisher's chunking scheme ([`tt::CHUNKING`]), when it said.
    pub chunking: Option<String>,
}

impl Root {
    /// Encodes the root content.
    pub fn encode(&self) -> Bytes {
        let mut c = BytesMut::new();
        tlv::put_nni_tlv(&mut c, tt::SEGMENT_COUNT, self.segment_count);
        tlv::put_nni_tlv(&mut c, tt::SEGMENT_SIZE, self.segment_size);
        tlv::put_nni_tlv(&mut c, tt::FILE_SIZE, self.file_size);
        if let Some(h) = &self.file_sha256 {
            tlv::put_tlv(&mut c, tt::FILE_SHA256, h);
        }
        tlv::put_nni_tlv(&mut c, tt::LEVELS, self.levels);
        tlv::put_tlv(&mut c, tt::HASHES, &self.hashes);
        if self.format != FORMAT_FIXED {
            tlv::put_nni_tlv(&mut c, tt::FORMAT, self.format);
        }
        if let Some(ch) = &self.chunking {
            tlv::put_tlv(&mut c, tt::CHUNKING, ch.as_bytes());
        }
        c.freeze()
    }

    /// Decodes and checks the root content against its own layout.
    pub fn decode(content: &Bytes) -> Result<Root, String> {
        let mut r = Reader::new(content);
        let (mut sc, mut ss, mut fs, mut fh, mut lv, mut hs) = (None, None, None, None, None, None);
        let mut format = FORMAT_FIXED;
        let mut chunking = None;
        while !r.is_empty() {
            let e = r.read().map_err(|e| e.to_string())?;
            match e.typ {
                tt::SEGMENT_COUNT => sc = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::SEGMENT_SIZE => ss = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::FILE_SIZE => fs = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::FILE_SHA256 => fh = <[u8; 32]>::try_from(r.value_ref(&e)).ok(),
                tt::LEVELS => lv = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::HASHES => hs = Some(r.value(&e)),
                tt::FORMAT => format = r.nni(&e).map_err(|e| e.to_string())?,
                // Advisory: a value that is not short UTF-8 is ignored.
                tt::CHUNKING => {
                    chunking = std::str::from_utf8(r.value_ref(&e))
                        .ok()
                        .filter(|v| v.len() <= 64)
                        .map(str::to_string)
                }
                _ => {}
            }
        }
        let root = match (sc, ss, fs, fh, lv, hs) {
            (Some(a), Some(b), Some(c), d, Some(e), Some(f)) => Root {
                segment_count: a,
                segment_size: b,
                file_size: c,
                file_sha256: d,
                levels: e,
                hashes: f,
                format,
                chunking,
            },
            _ => return Err("manifest root lacks a field".into()),
        };
        if format != FORMAT_FIXED && format != FORMAT_VARIABLE {
            return Err(format!("manifest format {format} is not supported"));
        }
        if root.segment_size == 0 && root.file_size > 0 {
            return Err("manifest root has segment size 0".into());
        }
        // The segment count must be one the sizes allow (a fetcher sizes
        // its work by it): fixed segments are all full but the last;
        // variable ones are at most `segment_size` and at least one byte.
        let fs = root.file_size;
        let least = fs.div_ceil(root.segment_size.max(1));
        let fits = if fs == 0 {
            root.segment_count <= 1
        } else if format == FORMAT_FIXED {
            root.segment_count == least
        } else {
            (least..=fs).contains(&root.segment_count)
        };
        if !fits {
            return Err(format!(
                "manifest root's {} segments of at most {} bytes cannot hold {fs} bytes",
                root.segment_count, root.segment_size
            ));
        }
        let layout = root.layout();
        if layout.top() as u64 != root.levels
            || root.hashes.len() as u64
                != layout.counts[layout.top()] * layout.entry_size(layout.top()) as u64
        {
            return Err("manifest root is inconsistent with its segment count".into());
        }
        Ok(root)
    }

    /// The layout of this manifest.
    pub fn layout(&self) -> Layout {
        Layout::with_format(self.segment_count, self.format)
    }

    /// True for variable-size (content-defined) segments.
    pub fn is_variable(&self) -> bool {
        self.format == FORMAT_VARIABLE
    }
}

fn hash_blocks(level: &[u8], block_bytes: usize) -> Vec<u8> {
    level
        .chunks(block_bytes)
        .flat_map(|b| <[u8; 32]>::from(Sha256::digest(b)))
        .collect()
}

/// Everything a format-1 manifest needs, computed from the level-0 hashes:
/// the upper levels (1..top-1, concatenated) and the root content.
pub fn compute(
    level0: &[u8],
    segment_size: u64,
    file_size: u64,
    file_sha256: Option<[u8; 32]>,
) -> (Vec<u8>, Root) {
    compute_with(FORMAT_FIXED, level0, segment_size, file_size, file_sha256)
}

/// The same for a format-2 manifest: `level0` is the [`encode_entry`]
/// entries of every segment, `max_segment` the largest segment size.
pub fn compute_variable(
    level0: &[u8],
    max_segment: u64,
    file_size: u64,
    file_sha256: Option<[u8; 32]>,
) -> (Vec<u8>, Root) {
    compute_with(FORMAT_VARIABLE, level0, max_segment, file_size, file_sha256)
}

/// A format-2 manifest from its level 1 (the SHA-256 of each level-0
/// block, in order), for producers that stream level 0 instead of holding
/// it: `segments` is the level-0 count. With at most [`ROOT_HASHES`]
/// segments the root holds level 0 itself: use [`compute_variable`].
pub fn compute_variable_from_level1(
    level1: Vec<u8>,
    segments: u64,
    max_segment: u64,
    file_size: u64,
    file_sha256: Option<[u8; 32]>,
) -> (Vec<u8>, Root) {
    let layout = Layout::with_format(segments, FORMAT_VARIABLE);
    let mut upper = Vec::new();
    let mut current = level1;
    for l in 1..layout.top() {
        let next = hash_blocks(&current, (layout.fanout(l) as usize) * layout.entry_size(l));
        upper.extend_from_slice(&current);
        current = next;
    }
    let root = Root {
        segment_count: segments,
        segment_size: max_segment,
        file_size,
        file_sha256,
        levels: layout.top() as u64,
        hashes: Bytes::from(current),
        format: FORMAT_VARIABLE,
        chunking: None,
    };
    (upper, root)
}

fn compute_with(
    format: u64,
    level0: &[u8],
    segment_size: u64,
    file_size: u64,
    file_sha256: Option<[u8; 32]>,
) -> (Vec<u8>, Root) {
    let probe = Layout::with_format(0, format);
    let layout = Layout::with_format(level0.len() as u64 / probe.entry_size(0) as u64, format);
    // Level 0 is borrowed (it can be 16 MiB for 4 GiB); upper levels are small.
    let mut upper = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for l in 0..layout.top() {
        let block = (layout.fanout(l) as usize) * layout.entry_size(l);
        let next = hash_blocks(current.as_deref().unwrap_or(level0), block);
        if let Some(done) = current.take() {
            upper.extend_from_slice(&done);
        }
        current = Some(next);
    }
    let hashes = Bytes::from(current.unwrap_or_else(|| level0.to_vec()));
    let root = Root {
        segment_count: layout.counts[0],
        segment_size,
        file_size,
        file_sha256,
        levels: layout.top() as u64,
        hashes,
        format,
        chunking: None,
    };
    (upper, root)
}

/// Signs the root Data of `versioned`'s manifest.
pub fn sign_root(versioned: &Name, root: &Root, signer: &Signer) -> granary_security::Result<Data> {
    let layout = root.layout();
    let name = manifest_name(versioned).append(&Component::segment(0));
    signer.sign_data(
        DataBuilder::new(name)
            .content(root.encode())
            .content_type(content_type::BLOB)
            .freshness_period(3_600_000)
            .final_block_id(Component::segment(layout.total_segments() - 1)),
    )
}

/// Checks fetched manifest blocks and data segments against a verified root.
///
/// Offset math for fetchers lives here: [`Checker::segment_offset`] and
/// [`Checker::segment_len`] place a segment in the file (format 1: from the
/// root alone; format 2: once the segment's level-0 block is accepted).
///
/// Memory grows with the blocks accepted, not with the counts the root
/// claims: a root (signed, so from a trusted publisher, but possibly wrong)
/// that claims 2^60 segments costs nothing until their blocks arrive. Taken
/// in segment order, as the fetcher does, it stays proportional to the
/// manifest bytes received.
#[derive(Debug)]
pub struct Checker {
    /// The root.
    pub root: Root,
    layout: Layout,
    /// Known hashes per level, as far as blocks were accepted (a missing
    /// or `None` entry: not known yet).
    levels: Vec<Vec<Option<[u8; 32]>>>,
    /// Format 2: (offset, length) of each data segment, as far as known.
    spans: Vec<Option<(u64, u32)>>,
}

/// Sets `v[i]`, growing `v` with `None` up to it.
fn set_at<T: Copy>(v: &mut Vec<Option<T>>, i: usize, x: T) {
    if v.len() <= i {
        v.resize(i + 1, None);
    }
    v[i] = Some(x);
}

impl Checker {
    /// A checker for a root whose signature was verified by the caller.
    /// A format-2 root that holds level 0 itself and is inconsistent leaves
    /// every segment without a hash (nothing verifies).
    pub fn new(root: Root) -> Checker {
        let layout = root.layout();
        let mut levels: Vec<Vec<Option<[u8; 32]>>> = vec![Vec::new(); layout.counts.len()];
        let top = layout.top();
        let mut ck = Checker {
            layout,
            levels: Vec::new(),
            spans: Vec::new(),
            root,
        };
        if top == 0 && ck.root.is_variable() {
            let hashes = ck.root.hashes.clone();
            // Checked like a block; an inconsistent root leaves every
            // segment without a hash (so nothing verifies).
            let _ = ck.fill_level0(&mut levels[0], 0, &hashes);
        } else {
            // At most ROOT_HASHES entries (Root::decode checked the length).
            levels[top] = ck
                .root
                .hashes
                .chunks(32)
                .map(|h| <[u8; 32]>::try_from(h).ok())
                .collect();
        }
        ck.levels = levels;
        ck
    }

    /// Manifest segments to fetch (beyond the root).
    pub fn manifest_segments(&self) -> u64 {
        self.layout.total_segments()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of data segments.
    pub fn segments(&self) -> u64 {
        self.root.segment_count
    }

    /// Format-2 level-0 entries `first..` from `content`: checks sizes,
    /// contiguity (with the block before, when known) and bounds, then
    /// records hashes and spans.
    fn fill_level0(
        &mut self,
        level0: &mut Vec<Option<[u8; 32]>>,
        first: u64,
        content: &[u8],
    ) -> Result<(), String> {
        let n = content.len() / ENTRY_V2;
        let mut parsed = Vec::with_capacity(n);
        // A block joins the one before it when that one is known.
        let mut expect_next: Option<u64> = match first.checked_sub(1) {
            None => Some(0),
            Some(p) => self
                .spans
                .get(p as usize)
                .copied()
                .flatten()
                .map(|(off, len)| off + len as u64),
        };
        for (i, e) in content.chunks_exact(ENTRY_V2).enumerate() {
            let (h, off, len) = decode_entry(e).ok_or("short manifest entry")?;
            let seg = first + i as u64;
            let end = off
                .checked_add(len as u64)
                .ok_or("segment offset overflows")?;
            if len as u64 > self.root.segment_size
                || end > self.root.file_size
                || expect_next.is_some_and(|x| x != off)
                || (len == 0 && self.root.file_size > 0)
            {
                return Err(format!("manifest entry of segment {seg} is inconsistent"));
            }
            if seg + 1 == self.root.segment_count && end != self.root.file_size {
                return Err("manifest: the last segment does not end the file".into());
            }
            expect_next = Some(end);
            parsed.push((h, off, len));
        }
        for (i, (h, off, len)) in parsed.into_iter().enumerate() {
            let seg = (first as usize) + i;
            set_at(level0, seg, h);
            set_at(&mut self.spans, seg, (off, len));
        }
        Ok(())
    }

    /// Accepts manifest segment `seg` (≥ 1) if its content matches its parent hash.
    pub fn accept_block(&mut self, seg: u64, content: &[u8]) -> Result<(), String> {
        let (l, b) = self.layout.locate(seg).ok_or("no such manifest segment")?;
        let parent = self.levels[l + 1]
            .get(b as usize)
            .copied()
            .flatten()
            .ok_or("parent block not verified yet")?;
        if <[u8; 32]>::from(Sha256::digest(content)) != parent {
            return Err(format!(
                "manifest segment {seg} does not match its parent hash"
            ));
        }
        let fan = self.layout.fanout(l);
        let size = self.layout.entry_size(l);
        let start = (b * fan) as usize;
        let expect = ((self.layout.counts[l] - b * fan).min(fan) as usize) * size;
        if content.len() != expect {
            return Err(format!(
                "manifest segment {seg} has {} bytes, expected {expect}",
                content.len()
            ));
        }
        if l == 0 && self.root.is_variable() {
            let mut level0 = std::mem::take(&mut self.levels[0]);
            let r = self.fill_level0(&mut level0, start as u64, content);
            self.levels[0] = level0;
            return r;
        }
        for (i, h) in content.chunks(32).enumerate() {
            if let Ok(h) = <[u8; 32]>::try_from(h) {
                set_at(&mut self.levels[l], start + i, h);
            }
        }
        Ok(())
    }

    /// The verified SHA-256 of data segment `seg`, once its block is accepted.
    pub fn segment_hash(&self, seg: u64) -> Option<[u8; 32]> {
        self.levels.first()?.get(seg as usize).copied().flatten()
    }

    /// Byte offset of data segment `seg` in the file (format 2: once its
    /// block is accepted).
    pub fn segment_offset(&self, seg: u64) -> Option<u64> {
        if seg >= self.root.segment_count {
            return None;
        }
        if self.root.is_variable() {
            self.spans.get(seg as usize).copied().flatten().map(|s| s.0)
        } else {
            Some(seg * self.root.segment_size)
        }
    }

    /// Length of data segment `seg` (format 2: once its block is accepted).
    pub fn segment_len(&self, seg: u64) -> Option<u64> {
        if seg >= self.root.segment_count {
            return None;
        }
        if self.root.is_variable() {
            self.spans
                .get(seg as usize)
                .copied()
                .flatten()
                .map(|s| s.1 as u64)
        } else {
            let start = seg * self.root.segment_size;
            Some((self.root.file_size - start.min(self.root.file_size)).min(self.root.segment_size))
        }
    }

    /// True when data segment `seg`'s content matches the manifest (hash,
    /// and length where the manifest gives it).
    pub fn check_segment(&self, seg: u64, content: &[u8]) -> Result<(), String> {
        let digest = <[u8; 32]>::from(Sha256::digest(content));
        self.check_segment_digest(seg, &digest, content.len() as u64)
    }

    /// [`Checker::check_segment`] with the content's SHA-256 and length
    /// already computed (e.g. by the thread that received the packet).
    pub fn check_segment_digest(
        &self,
        seg: u64,
        digest: &[u8; 32],
        len: u64,
    ) -> Result<(), String> {
        let want = self
            .segment_hash(seg)
            .ok_or(format!("no verified hash for segment {seg}"))?;
        if *digest != want {
            return Err(format!("segment {seg} does not match the signed manifest"));
        }
        if self.segment_len(seg).is_some_and(|l| l != len) {
            return Err(format!("segment {seg} has the wrong length"));
        }
        Ok(())
    }
}

/// Oracles for the fuzz targets (`fuzz/fuzz_targets/manifest_*.rs`), also
/// replayed on stable Rust by this crate's tests. Not an API.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// Any root content: refused or decoded; what decodes re-encodes to the
    /// same root; a checker over it answers every question and refuses a
    /// block that does not match, without panicking or allocating for the
    /// counts the root claims.
    pub fn root(data: &[u8]) {
        // The first byte gives the root's length (in 4-byte units); the
        // bytes after the root are offered as a block and a segment.
        let Some((&n, data)) = data.split_first() else {
            return;
        };
        let (content, rest) = data.split_at((n as usize * 4).min(data.len()));
        let Ok(root) = Root::decode(&Bytes::copy_from_slice(content)) else {
            return;
        };
        let again = Root::decode(&root.encode()).expect("a decoded root re-encodes");
        assert_eq!(again, root);
        let mut ck = Checker::new(root);
        let count = ck.segments();
        for seg in (0..count.min(300)).chain([count, count.saturating_sub(1), u64::MAX]) {
            let _ = ck.segment_hash(seg);
            if let (Some(o), Some(l)) = (ck.segment_offset(seg), ck.segment_len(seg)) {
                assert!(o.checked_add(l).is_some_and(|e| e <= ck.root.file_size));
            }
            assert!(ck.check_segment(seg, rest).is_err() || ck.segment_hash(seg).is_some());
        }
        for seg in [0, 1, 2, ck.manifest_segments(), u64::MAX] {
            let _ = ck.accept_block(seg, rest);
        }
    }

    /// A publisher's whole tree (it signs whatever it is given): level 0
    /// from the input, the levels above computed as a publisher does, the
    /// root made consistent with its sizes. The checker takes every block
    /// in order or refuses one; what it takes places each segment inside
    /// the file, and, when it took every block, the segments tile the file.
    pub fn tree(data: &[u8]) {
        if data.len() < 9 {
            return;
        }
        let variable = data[0] & 1 == 1;
        let ss = u64::from(u16::from_be_bytes([data[1], data[2]])).max(1);
        let x = u64::from_be_bytes(data[1..9].try_into().unwrap_or_default());
        let level0 = &data[9..];
        let entry = if variable { ENTRY_V2 } else { 32 };
        let level0 = &level0[..level0.len() / entry * entry];
        let count = (level0.len() / entry) as u64;
        let fs = match count {
            0 => 0,
            _ if variable => count + x % (count * (ss - 1) + 1),
            _ => (count - 1) * ss + 1 + x % ss,
        };
        let (upper, root) = if variable {
            compute_variable(level0, ss, fs, None)
        } else {
            compute(level0, ss, fs, None)
        };
        let root = Root::decode(&root.encode()).expect("a computed root decodes");
        let mut ck = Checker::new(root);
        let layout = ck.layout().clone();
        // Where each level starts in `upper` (levels 1..top, in order).
        let mut at = vec![0usize; layout.counts.len()];
        for l in 2..layout.top() {
            at[l] = at[l - 1] + layout.counts[l - 1] as usize * 32;
        }
        // A root that holds level 0 itself was checked by `Checker::new`
        // (inconsistent: no segment placed, so nothing verifies).
        let mut all = layout.top() > 0 || !variable || count == 0 || ck.segment_len(0).is_some();
        for seg in 1..=layout.total_segments().saturating_sub(1) {
            let Some((l, b)) = layout.locate(seg) else {
                panic!("manifest segment {seg} has no place");
            };
            let size = layout.fanout(l) as usize * layout.entry_size(l);
            let (src, base) = if l == 0 {
                (level0, 0)
            } else {
                (&upper[..], at[l])
            };
            let lo = base + b as usize * size;
            let hi = (lo + size).min(base + layout.counts[l] as usize * layout.entry_size(l));
            if ck.accept_block(seg, &src[lo..hi]).is_err() {
                all = false;
                break;
            }
        }
        let mut next = 0u64;
        for seg in 0..count {
            match (ck.segment_offset(seg), ck.segment_len(seg)) {
                (Some(o), Some(l)) => {
                    assert!(o + l <= fs, "segment {seg} ends past the file");
                    if all {
                        assert_eq!(o, next, "segment {seg} does not join the one before");
                    }
                    next = o + l;
                }
                _ => assert!(!all, "segment {seg} unplaced after every block was taken"),
            }
        }
        if all && count > 0 {
            assert_eq!(next, fs, "the segments do not end the file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunking_field_round_trips_and_is_optional() {
        let level0: Vec<u8> = (0..3u8)
            .flat_map(|i| encode_entry(&[i; 32], i as u64 * 10, 10))
            .collect();
        let (_, mut root) = compute_variable(&level0, 10, 30, None);
        assert_eq!(Root::decode(&root.encode()).unwrap().chunking, None);
        root.chunking = Some("fastcdc:3072:5120:8192".into());
        let back = Root::decode(&root.encode()).unwrap();
        assert_eq!(back, root);
        // Not UTF-8: ignored, the root still decodes.
        let mut c = BytesMut::from(&root.encode()[..]);
        tlv::put_tlv(&mut c, tt::CHUNKING, &[0xff, 0xfe]);
        let mut r2 = root.clone();
        r2.chunking = None;
        let mut plain = BytesMut::from(&r2.encode()[..]);
        tlv::put_tlv(&mut plain, tt::CHUNKING, &[0xff, 0xfe]);
        assert_eq!(Root::decode(&plain.freeze()).unwrap().chunking, None);
        assert!(Root::decode(&c.freeze()).is_ok());
    }

    #[test]
    fn a_root_claiming_huge_counts_costs_nothing_until_blocks_arrive() {
        // 2^60 one-byte segments: consistent sizes, a 7-level tree with 16
        // hashes at the top. The checker used to size every level up front.
        let count = 1u64 << 60;
        let layout = Layout::new(count);
        let top = layout.top();
        let root = Root {
            segment_count: count,
            segment_size: 1,
            file_size: count,
            file_sha256: None,
            levels: top as u64,
            hashes: Bytes::from(vec![7u8; layout.counts[top] as usize * 32]),
            format: FORMAT_FIXED,
            chunking: None,
        };
        let root = Root::decode(&root.encode()).unwrap();
        let mut ck = Checker::new(root);
        assert_eq!(ck.segments(), count);
        assert_eq!(ck.segment_hash(count - 1), None);
        assert_eq!(ck.segment_offset(count - 1), Some(count - 1));
        assert!(ck.check_segment(5, b"x").is_err());
        assert!(ck.accept_block(1, &[0u8; 8192]).is_err());
        // The same in format 2.
        let l0 = Layout::with_format(count, FORMAT_VARIABLE);
        let root = Root {
            hashes: Bytes::from(vec![7u8; l0.counts[l0.top()] as usize * 32]),
            levels: l0.top() as u64,
            format: FORMAT_VARIABLE,
            ..ck.root.clone()
        };
        let ck = Checker::new(Root::decode(&root.encode()).unwrap());
        assert_eq!(ck.segment_len(count - 1), None);
    }

    #[test]
    fn a_root_whose_count_does_not_fit_its_sizes_is_refused() {
        let ok = |sc, ss, fs, format| {
            let layout = Layout::with_format(sc, format);
            let top = layout.top();
            let r = Root {
                segment_count: sc,
                segment_size: ss,
                file_size: fs,
                file_sha256: None,
                levels: top as u64,
                hashes: Bytes::from(vec![
                    1u8;
                    (layout.counts[top] as usize) * layout.entry_size(top)
                ]),
                format,
                chunking: None,
            };
            Root::decode(&r.encode()).is_ok()
        };
        let (f, v) = (FORMAT_FIXED, FORMAT_VARIABLE);
        assert!(ok(3, 10, 25, f) && ok(3, 10, 30, f) && ok(0, 10, 0, f) && ok(1, 10, 0, f));
        assert!(!ok(3, 10, 20, f) && !ok(3, 10, 31, f) && !ok(2, 10, 0, f));
        assert!(!ok(1 << 40, 8192, 100, f));
        assert!(ok(3, 10, 3, v) && ok(3, 10, 30, v) && ok(0, 10, 0, v));
        assert!(!ok(3, 10, 2, v) && !ok(3, 10, 31, v) && !ok(1 << 40, 8192, 100, v));
    }

    #[test]
    fn a_level0_block_must_join_the_one_before() {
        // 200 ten-byte segments in two level-0 blocks (180 + 20); segment
        // 179, the first block's last, is one byte short, so the second
        // block starts after a one-byte gap. Each block is consistent alone.
        let mut next = 0u64;
        let level0: Vec<u8> = (0..200u64)
            .flat_map(|i| {
                let len = if i == 179 { 9 } else { 10 };
                let off = if i == 180 { next + 1 } else { next };
                next = off + len;
                encode_entry(&[i as u8; 32], off, len as u32)
            })
            .collect();
        let (upper, root) = compute_variable(&level0, 10, next, None);
        assert!(upper.is_empty());
        let mut ck = Checker::new(Root::decode(&root.encode()).unwrap());
        let block = LEAF_FANOUT_V2 as usize * ENTRY_V2;
        ck.accept_block(1, &level0[..block]).unwrap();
        let e = ck.accept_block(2, &level0[block..]).unwrap_err();
        assert!(e.contains("segment 180"), "{e}");
        assert_eq!(ck.segment_len(180), None);
    }

    #[test]
    fn fuzz_oracles_replay_seeds_and_saved_inputs() {
        // Valid trees of both formats and sizes around the level limits,
        // then each cut short and corrupted; then whatever the fuzzer
        // found and was fixed (fuzz/regressions/manifest_*).
        let mut seeds = Vec::new();
        for (variable, n) in [(false, 0), (false, 3), (false, 129), (true, 1), (true, 200)] {
            let entry = if variable { ENTRY_V2 } else { 32 };
            let mut t = vec![variable as u8, 0, 10, 0, 0, 0, 0, 0, 5];
            for i in 0..n as u64 {
                if variable {
                    t.extend(encode_entry(&[i as u8; 32], i * 10, 10));
                } else {
                    t.extend([i as u8; 32]);
                }
            }
            assert_eq!((t.len() - 9) % entry, 0);
            seeds.push(t);
        }
        let mut cases = Vec::new();
        for t in &seeds {
            cases.push(t.clone());
            for cut in [1, t.len() / 2, t.len() - 1] {
                cases.push(t[..cut].to_vec());
            }
            let mut m = t.clone();
            let i = m.len() * 2 / 3;
            m[i] ^= 0x5a;
            cases.push(m);
        }
        for c in &cases {
            fuzzing::tree(c);
            // The same bytes as a root: a computed root behind a length byte.
            let root = {
                let (_, r) = compute(&c[9.min(c.len())..], 10, 0, None);
                r.encode()
            };
            let mut r = vec![(root.len() / 4) as u8];
            r.extend_from_slice(&root);
            r.extend_from_slice(c);
            fuzzing::root(&r);
            fuzzing::root(c);
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
        for (t, f) in [
            ("manifest_root", fuzzing::root as fn(&[u8])),
            ("manifest_tree", fuzzing::tree),
        ] {
            for e in std::fs::read_dir(dir.join(t))
                .into_iter()
                .flatten()
                .flatten()
            {
                f(&std::fs::read(e.path()).unwrap());
            }
        }
    }

    /// Every manifest segment's (level, block) maps back to its number, and
    /// the checker asks for as many segments as the layout has.
    #[test]
    fn segment_numbers_and_blocks_are_inverse() {
        for n in [129u64, 70_000, 524_288] {
            let layout = Layout::new(n);
            for seg in 1..layout.total_segments() {
                let (l, b) = layout.locate(seg).unwrap();
                assert_eq!(layout.segment_of(l, b), seg, "n {n}, segment {seg}");
            }
        }
        let level0 = vec![0u8; 32 * 70_000];
        let (_, root) = compute(&level0, 10, 700_000, None);
        assert_eq!(Checker::new(root).manifest_segments(), 1 + 274 + 2);
    }

    /// The manifest is named `<versioned>/32=manifest`; its signed root is
    /// segment 0, and its FinalBlockId names the last manifest segment.
    #[test]
    fn signed_root_is_named_and_ends_where_the_layout_does() {
        let versioned = Name::from_uri("/a/b")
            .unwrap()
            .append(&Component::version(7));
        let m = manifest_name(&versioned);
        assert_eq!(m.len(), versioned.len() + 1);
        assert!(versioned.is_prefix_of(&m));
        let last = m.get(-1).unwrap();
        assert_eq!(
            (last.typ, last.value),
            (granary_packet::types::COMP_KEYWORD, &b"manifest"[..])
        );
        let level0 = vec![0u8; 32 * 70_000];
        let (_, root) = compute(&level0, 10, 700_000, None);
        let d = sign_root(&versioned, &root, &Signer::Digest).unwrap();
        assert_eq!(d.name(), &m.append(&Component::segment(0)));
        assert_eq!(
            d.final_block_id().and_then(|c| c.as_ref().as_segment()),
            Some(1 + 274 + 2 - 1)
        );
    }

    /// A root's own fields must agree: segment size 0 only for an empty
    /// file, and levels and hash bytes as its segment count implies.
    #[test]
    fn a_root_inconsistent_with_itself_is_refused() {
        let root = |sc: u64, ss, fs, levels, hash_bytes: usize| Root {
            segment_count: sc,
            segment_size: ss,
            file_size: fs,
            file_sha256: None,
            levels,
            hashes: Bytes::from(vec![1u8; hash_bytes]),
            format: FORMAT_FIXED,
            chunking: None,
        };
        let ok = |r: Root| Root::decode(&r.encode()).is_ok();
        assert!(ok(root(0, 0, 0, 0, 0)), "an empty file may say size 0");
        assert!(!ok(root(10, 0, 10, 0, 320)), "size 0 for bytes");
        assert!(ok(root(10, 1, 10, 0, 320)));
        assert!(!ok(root(10, 1, 10, 1, 320)), "wrong levels");
        assert!(!ok(root(10, 1, 10, 0, 288)), "wrong hash bytes");
    }

    /// Format 2: a level-0 entry of length 0 in a non-empty file, or a last
    /// segment that stops short of the file's end, leaves nothing verifiable.
    #[test]
    fn variable_entries_must_be_non_empty_and_end_the_file() {
        let verifies = |entries: &[(u64, u32)], fs: u64| {
            let level0: Vec<u8> = entries
                .iter()
                .enumerate()
                .flat_map(|(i, &(off, len))| encode_entry(&[i as u8; 32], off, len))
                .collect();
            let (_, root) = compute_variable(&level0, 10, fs, None);
            Checker::new(root).segment_hash(0).is_some()
        };
        assert!(verifies(&[(0, 10), (10, 10), (20, 10)], 30));
        assert!(
            !verifies(&[(0, 10), (10, 0), (10, 10)], 20),
            "empty segment"
        );
        assert!(
            !verifies(&[(0, 10), (10, 10), (20, 5)], 30),
            "short of the end"
        );
    }

    #[test]
    fn layouts() {
        assert_eq!(Layout::new(1).counts, vec![1]);
        assert_eq!(Layout::new(128).counts, vec![128]);
        assert_eq!(Layout::new(129).counts, vec![129, 1]);
        let big = Layout::new(524_288);
        assert_eq!(big.counts, vec![524_288, 2048, 8]);
        assert_eq!(big.total_segments(), 1 + 2048 + 8);
        assert_eq!(big.locate(1), Some((1, 0)));
        assert_eq!(big.locate(9), Some((0, 0)));
        assert_eq!(big.segment_of(0, 0), 9);
        assert_eq!(big.locate(2056), Some((0, 2047)));
        assert_eq!(big.locate(2057), None);
    }

    fn check_all(n: usize) {
        let contents: Vec<Vec<u8>> = (0..n).map(|i| vec![(i % 251) as u8; 10]).collect();
        let l0: Vec<u8> = contents
            .iter()
            .flat_map(|c| <[u8; 32]>::from(Sha256::digest(c)))
            .collect();
        // The whole-file hash is optional: present for odd n, absent for
        // even n, and it survives the round trip either way.
        let whole = (n % 2 == 1).then_some([n as u8; 32]);
        let (upper, root) = compute(&l0, 10, 10 * n as u64, whole);
        let root = Root::decode(&root.encode()).unwrap();
        assert_eq!(root.file_sha256, whole);
        let mut ck = Checker::new(root);
        let layout = Layout::new(n as u64);
        // Serve blocks as the repo does: upper levels from `upper`, level 0 from l0.
        let mut offset = 0usize;
        let mut per_level: Vec<&[u8]> = vec![&l0];
        for l in 1..layout.top() {
            let len = layout.counts[l] as usize * 32;
            per_level.push(&upper[offset..offset + len]);
            offset += len;
        }
        for seg in 1..layout.total_segments() {
            let (l, b) = layout.locate(seg).unwrap();
            let bytes = per_level[l];
            let s = (b * FANOUT * 32) as usize;
            let e = (s + (FANOUT * 32) as usize).min(bytes.len());
            ck.accept_block(seg, &bytes[s..e]).unwrap();
        }
        for (i, c) in contents.iter().enumerate() {
            ck.check_segment(i as u64, c).unwrap();
        }
        assert!(ck.check_segment(0, b"tampered").is_err());
    }

    #[test]
    fn trees_verify_end_to_end() {
        for n in [1, 2, 128, 129, 256 * 128, 256 * 128 + 1, 70_000] {
            check_all(n);
        }
    }

    #[test]
    fn wrong_blocks_are_refused() {
        let l0: Vec<u8> = (0..1000u32)
            .flat_map(|i| <[u8; 32]>::from(Sha256::digest(i.to_be_bytes())))
            .collect();
        let (_, root) = compute(&l0, 1, 1000, Some([0; 32]));
        let mut ck = Checker::new(root);
        assert!(ck.accept_block(1, &l0[..8192]).is_ok());
        let mut bad = l0[8192..16384].to_vec();
        bad[5] ^= 1;
        assert!(ck.accept_block(2, &bad).is_err());
        assert!(
            ck.check_segment(300, b"x").is_err(),
            "block 2 not accepted: no hash"
        );
    }

    /// Format 2: variable-size segments, verified and placed out of order.
    fn check_variable(n: usize) {
        let lens: Vec<u32> = (0..n).map(|i| 1000 + (i as u32 * 7919) % 7000).collect();
        let contents: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, l)| vec![(i % 251) as u8; *l as usize])
            .collect();
        let mut l0 = Vec::new();
        let mut off = 0u64;
        for c in &contents {
            let h = <[u8; 32]>::from(Sha256::digest(c));
            l0.extend_from_slice(&encode_entry(&h, off, c.len() as u32));
            off += c.len() as u64;
        }
        let (upper, root) = compute_variable(&l0, 8192, off, Some([0; 32]));
        let root = Root::decode(&root.encode()).unwrap();
        assert!(root.is_variable());
        let mut ck = Checker::new(root);
        let layout = ck.layout().clone();
        let mut per_level: Vec<&[u8]> = vec![&l0];
        let mut o = 0usize;
        for l in 1..layout.top() {
            let len = layout.counts[l] as usize * 32;
            per_level.push(&upper[o..o + len]);
            o += len;
        }
        for seg in 1..layout.total_segments() {
            let (l, b) = layout.locate(seg).unwrap();
            let size = layout.entry_size(l) * layout.fanout(l) as usize;
            let bytes = per_level[l];
            let s = b as usize * size;
            let block = &bytes[s..(s + size).min(bytes.len())];
            assert!(block.len() <= 8192, "blocks fit a packet");
            ck.accept_block(seg, block).unwrap();
        }
        let mut expect = 0u64;
        for (i, c) in contents.iter().enumerate().rev() {
            ck.check_segment(i as u64, c).unwrap();
            assert_eq!(ck.segment_len(i as u64), Some(c.len() as u64));
        }
        for (i, c) in contents.iter().enumerate() {
            assert_eq!(ck.segment_offset(i as u64), Some(expect));
            expect += c.len() as u64;
        }
        assert_eq!(ck.segment_offset(n as u64), None);
        let mut short = contents[0].clone();
        short.pop();
        assert!(ck.check_segment(0, &short).is_err());
    }

    #[test]
    fn streamed_level1_gives_the_same_manifest() {
        for n in [129usize, 180 * 129, 50_000] {
            let mut l0 = Vec::new();
            for i in 0..n {
                let h = <[u8; 32]>::from(Sha256::digest((i as u64).to_be_bytes()));
                l0.extend_from_slice(&encode_entry(&h, i as u64 * 10, 10));
            }
            let (u1, r1) = compute_variable(&l0, 8192, n as u64 * 10, None);
            let level1 = hash_blocks(&l0, LEAF_FANOUT_V2 as usize * ENTRY_V2);
            let (u2, r2) =
                compute_variable_from_level1(level1, n as u64, 8192, n as u64 * 10, None);
            assert_eq!((u1, r1), (u2, r2), "{n}");
        }
    }

    #[test]
    fn variable_trees_verify_end_to_end() {
        for n in [1, 2, 128, 129, 180, 181, 180 * 128 + 1, 50_000] {
            check_variable(n);
        }
    }

    #[test]
    fn inconsistent_variable_entries_are_refused() {
        // Two segments that overlap, under a root that matches their hashes.
        let h = [1u8; 32];
        let mut l0 = Vec::new();
        for (off, len) in [(0u64, 4000u32), (3000, 4000)] {
            l0.extend_from_slice(&encode_entry(&h, off, len));
        }
        let (_, root) = compute_variable(&l0, 8192, 7000, Some([0; 32]));
        let ck = Checker::new(root);
        assert!(ck.segment_hash(0).is_none(), "nothing trusted");
        // A length above the root's maximum.
        let mut l0 = Vec::new();
        l0.extend_from_slice(&encode_entry(&h, 0, 9000));
        let (_, root) = compute_variable(&l0, 8192, 9000, Some([0; 32]));
        assert!(Checker::new(root).segment_len(0).is_none());
        // Format 1 roots decode unchanged, with no Format field.
        let (_, r1) = compute(&[0u8; 64], 10, 20, Some([0; 32]));
        let enc = r1.encode();
        assert!(!enc.windows(3).any(|w| w == [0xFD, 0xF5, 0x8C]));
        assert_eq!(Root::decode(&enc).unwrap().format, FORMAT_FIXED);
    }
}
