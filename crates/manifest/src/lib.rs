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
//!   segment size, segment count and SHA-256, and is the only Data signed with
//!   the publisher's key;
//! - segments 1.. are the blocks of the levels below the top, top-down,
//!   each checked against its parent's hash (DigestSha256-signed only).
//!
//! A 4 GiB file (524,288 segments) has levels of 524,288 → 2,048 → 8 hashes:
//! one signature, 2,056 manifest blocks, and every data segment verifiable
//! as soon as its block arrives.

use bytes::{Bytes, BytesMut};
use granary_packet::tlv::{self, Reader};
use granary_packet::types::content_type;
use granary_packet::{Component, Data, DataBuilder, Name};
use granary_security::Signer;
use sha2::{Digest, Sha256};

/// Hashes per manifest block.
pub const FANOUT: u64 = 256;
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
}

/// Shape of a manifest: hash counts per level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// counts[0] = data segments; the last entry is the root's level.
    pub counts: Vec<u64>,
}

impl Layout {
    /// The layout for `segments` data segments.
    pub fn new(segments: u64) -> Layout {
        let mut counts = vec![segments];
        while *counts.last().unwrap_or(&0) > ROOT_HASHES {
            let c = counts.last().copied().unwrap_or(0);
            counts.push(c.div_ceil(FANOUT));
        }
        Layout { counts }
    }

    /// Index of the root's level.
    pub fn top(&self) -> usize {
        self.counts.len() - 1
    }

    /// Blocks of level `l` (below the top).
    pub fn blocks(&self, l: usize) -> u64 {
        self.counts[l].div_ceil(FANOUT)
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
    /// Whole-file SHA-256.
    pub file_sha256: [u8; 32],
    /// Levels below the top.
    pub levels: u64,
    /// Top-level hashes.
    pub hashes: Bytes,
}

impl Root {
    /// Encodes the root content.
    pub fn encode(&self) -> Bytes {
        let mut c = BytesMut::new();
        tlv::put_nni_tlv(&mut c, tt::SEGMENT_COUNT, self.segment_count);
        tlv::put_nni_tlv(&mut c, tt::SEGMENT_SIZE, self.segment_size);
        tlv::put_nni_tlv(&mut c, tt::FILE_SIZE, self.file_size);
        tlv::put_tlv(&mut c, tt::FILE_SHA256, &self.file_sha256);
        tlv::put_nni_tlv(&mut c, tt::LEVELS, self.levels);
        tlv::put_tlv(&mut c, tt::HASHES, &self.hashes);
        c.freeze()
    }

    /// Decodes and checks the root content against its own layout.
    pub fn decode(content: &Bytes) -> Result<Root, String> {
        let mut r = Reader::new(content);
        let (mut sc, mut ss, mut fs, mut fh, mut lv, mut hs) = (None, None, None, None, None, None);
        while !r.is_empty() {
            let e = r.read().map_err(|e| e.to_string())?;
            match e.typ {
                tt::SEGMENT_COUNT => sc = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::SEGMENT_SIZE => ss = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::FILE_SIZE => fs = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::FILE_SHA256 => fh = <[u8; 32]>::try_from(r.value_ref(&e)).ok(),
                tt::LEVELS => lv = Some(r.nni(&e).map_err(|e| e.to_string())?),
                tt::HASHES => hs = Some(r.value(&e)),
                _ => {}
            }
        }
        let root = match (sc, ss, fs, fh, lv, hs) {
            (Some(a), Some(b), Some(c), Some(d), Some(e), Some(f)) => Root {
                segment_count: a,
                segment_size: b,
                file_size: c,
                file_sha256: d,
                levels: e,
                hashes: f,
            },
            _ => return Err("manifest root lacks a field".into()),
        };
        let layout = Layout::new(root.segment_count);
        if layout.top() as u64 != root.levels
            || root.hashes.len() as u64 != layout.counts[layout.top()] * 32
        {
            return Err("manifest root is inconsistent with its segment count".into());
        }
        Ok(root)
    }
}

fn hash_blocks(level: &[u8]) -> Vec<u8> {
    level
        .chunks((FANOUT * 32) as usize)
        .flat_map(|b| <[u8; 32]>::from(Sha256::digest(b)))
        .collect()
}

/// Everything a manifest needs, computed from the level-0 hashes: the upper
/// levels (1..top-1, concatenated) and the root content.
pub fn compute(
    level0: &[u8],
    segment_size: u64,
    file_size: u64,
    file_sha256: [u8; 32],
) -> (Vec<u8>, Root) {
    let layout = Layout::new(level0.len() as u64 / 32);
    // Level 0 is borrowed (it can be 16 MiB for 4 GiB); upper levels are small.
    let mut upper = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for _ in 0..layout.top() {
        let next = hash_blocks(current.as_deref().unwrap_or(level0));
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
    };
    (upper, root)
}

/// Signs the root Data of `versioned`'s manifest.
pub fn sign_root(versioned: &Name, root: &Root, signer: &Signer) -> granary_security::Result<Data> {
    let layout = Layout::new(root.segment_count);
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
#[derive(Debug)]
pub struct Checker {
    /// The root.
    pub root: Root,
    layout: Layout,
    /// Known hashes per level (filled as blocks are accepted).
    levels: Vec<Vec<Option<[u8; 32]>>>,
}

impl Checker {
    /// A checker for a root whose signature was verified by the caller.
    pub fn new(root: Root) -> Checker {
        let layout = Layout::new(root.segment_count);
        let mut levels: Vec<Vec<Option<[u8; 32]>>> = layout
            .counts
            .iter()
            .map(|c| vec![None; *c as usize])
            .collect();
        let top = layout.top();
        for (i, h) in root.hashes.chunks(32).enumerate() {
            levels[top][i] = <[u8; 32]>::try_from(h).ok();
        }
        Checker {
            root,
            layout,
            levels,
        }
    }

    /// Manifest segments to fetch (beyond the root).
    pub fn manifest_segments(&self) -> u64 {
        self.layout.total_segments()
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
        let start = (b * FANOUT) as usize;
        let expect = ((self.layout.counts[l] - b * FANOUT).min(FANOUT) * 32) as usize;
        if content.len() != expect {
            return Err(format!(
                "manifest segment {seg} has {} bytes, expected {expect}",
                content.len()
            ));
        }
        for (i, h) in content.chunks(32).enumerate() {
            self.levels[l][start + i] = <[u8; 32]>::try_from(h).ok();
        }
        Ok(())
    }

    /// True when data segment `seg`'s content matches the manifest.
    pub fn check_segment(&self, seg: u64, content: &[u8]) -> Result<(), String> {
        let want = self.levels[0]
            .get(seg as usize)
            .copied()
            .flatten()
            .ok_or(format!("no verified hash for segment {seg}"))?;
        if <[u8; 32]>::from(Sha256::digest(content)) == want {
            Ok(())
        } else {
            Err(format!("segment {seg} does not match the signed manifest"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let (upper, root) = compute(&l0, 10, 10 * n as u64, [0; 32]);
        let root = Root::decode(&root.encode()).unwrap();
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
        let (_, root) = compute(&l0, 1, 1000, [0; 32]);
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
}
