//! One hash pass per name, shared by the PIT, the FIB, the strategy choice
//! and the dead-nonce list (as NDN-DPDK's NameTree/PCCT do).
//!
//! [`NameHashes::of`] walks a name's components once and records, for every
//! prefix length `k` (0 ..= number of components), where that prefix ends in
//! the name's TLV-VALUE and a keyed hash of it. Every table then looks a
//! prefix up by `(hash, bytes)`: the hash picks the bucket, one `memcmp`
//! over the prefix bytes confirms it. No `Name` is built and nothing is
//! hashed twice, however many tables or prefix lengths are tried.
//!
//! The hasher is foldhash with per-process random seeds: names come from the
//! network, so the hash must stay keyed (an attacker who cannot predict it
//! cannot aim collisions at one bucket).

use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use granary_packet::Name;
use smallvec::SmallVec;

/// The per-process keyed hash state.
pub(crate) fn state() -> &'static foldhash::fast::RandomState {
    static STATE: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    STATE.get_or_init(foldhash::fast::RandomState::default)
}

/// Names up to this many components keep their prefix table inline.
const INLINE: usize = 16;

/// Prefix hashes of one name (see the module documentation).
#[derive(Debug, Clone)]
pub struct NameHashes {
    /// `ends[k]`: end of the `k`-component prefix in the name's TLV-VALUE.
    ends: SmallVec<[u32; INLINE]>,
    /// `hashes[k]`: hash of the `k`-component prefix.
    hashes: SmallVec<[u64; INLINE]>,
}

impl NameHashes {
    /// Hashes every prefix of `name` in one pass.
    pub fn of(name: &Name) -> NameHashes {
        let mut h = state().build_hasher();
        let mut ends = SmallVec::new();
        let mut hashes = SmallVec::new();
        ends.push(0);
        hashes.push(h.clone().finish());
        let mut end = 0u32;
        for c in name.components() {
            h.write(c.wire);
            end += c.wire.len() as u32;
            ends.push(end);
            hashes.push(h.clone().finish());
        }
        NameHashes { ends, hashes }
    }

    /// Number of components of the name.
    pub fn len(&self) -> usize {
        self.hashes.len() - 1
    }

    /// True for the empty name.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hash of the `k`-component prefix (`k <= len()`).
    pub fn hash(&self, k: usize) -> u64 {
        self.hashes[k]
    }

    /// Hash of the whole name.
    pub fn full(&self) -> u64 {
        self.hashes[self.len()]
    }

    /// TLV-VALUE bytes of the `k`-component prefix of `name` (the name these
    /// hashes were computed from).
    pub fn prefix_bytes<'a>(&self, name: &'a Name, k: usize) -> &'a [u8] {
        &name.value()[..self.ends[k] as usize]
    }
}

/// Hash of a whole name (for tables keyed by full names, e.g. the FIB).
pub fn hash_name(name: &Name) -> u64 {
    let mut h = state().build_hasher();
    for c in name.components() {
        h.write(c.wire);
    }
    h.finish()
}

/// Mixes a name hash with a small value (a nonce, the selector flags).
pub fn mix(hash: u64, v: u64) -> u64 {
    // SplitMix64 finaliser over the pair: cheap and well spread.
    let mut z = hash ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_hash_like_whole_names() {
        let n = Name::from_uri("/a/bb/seg=3").unwrap();
        let h = NameHashes::of(&n);
        assert_eq!(h.len(), 3);
        for k in 0..=3 {
            let p = n.prefix(k as isize);
            assert_eq!(h.hash(k), hash_name(&p));
            assert_eq!(h.prefix_bytes(&n, k), &p.value()[..]);
        }
        assert_ne!(h.hash(1), h.hash(2));
        assert_eq!(h.full(), hash_name(&n));
    }
}
