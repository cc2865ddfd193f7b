//! DigestSha256 values of served segments, kept in memory so that a segment served
//! again costs a read and its integrity check, not a SHA-256 of the whole packet.
//!
//! A segment's signed portion is fixed by its name, its freshness, its FinalBlockId and
//! its bytes; a table is kept per (data file, manifest digest, size, name before the
//! segment component, freshness, last segment), one slot per segment, filled when a
//! segment is first signed. The bytes are the version's own (a version is immutable,
//! and every read is still checked against the CRC-32 or hash taken at ingest before
//! the cached value is used, as before it was computed). A rename changes the name and
//! the path, so it simply misses. Bounded: [`MAX_SEGMENTS`] slots over all tables; the
//! tables used least recently are dropped first. Not on disk: nothing to migrate,
//! nothing to recover after a crash; the first serve of a version after a start pays
//! the hash once per segment.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use granary_packet::Name;
use granary_store::Entry;

/// Most segments whose digest is kept (32 bytes and a flag each: about 40 MiB,
/// about 6 GiB of content-defined segments).
pub const MAX_SEGMENTS: usize = 1 << 20;

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    path: PathBuf,
    manifest: Option<String>,
    size: u64,
    prefix: Name,
    freshness_ms: u64,
    last: u64,
}

/// The digests of one version's segments as served under one name.
pub(crate) struct Table {
    slots: Mutex<Vec<Option<[u8; 32]>>>,
}

impl Table {
    /// The DigestSha256 value of segment `seg`, whose signed portion is `signed`:
    /// kept from an earlier serve, or computed now and kept.
    pub(crate) fn value(&self, seg: u64, signed: &[u8]) -> [u8; 32] {
        if let Ok(s) = self.slots.lock() {
            if let Some(Some(d)) = s.get(seg as usize) {
                return *d;
            }
        }
        let d = granary_packet::sha256(signed);
        if let Ok(mut s) = self.slots.lock() {
            if let Some(slot) = s.get_mut(seg as usize) {
                *slot = Some(d);
            }
        }
        d
    }
}

#[derive(Default)]
struct Tables {
    /// Table, last use, slots.
    map: HashMap<Key, (Arc<Table>, u64, usize)>,
    slots: usize,
    tick: u64,
}

fn tables() -> &'static Mutex<Tables> {
    static T: OnceLock<Mutex<Tables>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// The table for segment `seg` of `e` served as `name` (whose last component must be
/// that segment) with `freshness_ms`; `None` when it cannot be kept (a name of another
/// shape, a version of more segments than the whole budget).
pub(crate) fn table(e: &Entry, name: &Name, seg: u64, freshness_ms: u64) -> Option<Arc<Table>> {
    if name.last()?.as_segment()? != seg {
        return None;
    }
    let segments = e.meta.segments();
    if segments == 0 || segments as usize > MAX_SEGMENTS {
        return None;
    }
    let key = Key {
        path: e.path.clone(),
        manifest: e.meta.manifest.clone(),
        size: e.meta.size,
        prefix: name.prefix(-1),
        freshness_ms,
        last: segments - 1,
    };
    let mut t = tables().lock().ok()?;
    t.tick += 1;
    let tick = t.tick;
    if let Some((table, used, _)) = t.map.get_mut(&key) {
        *used = tick;
        return Some(table.clone());
    }
    while t.slots + segments as usize > MAX_SEGMENTS {
        let Some(oldest) = t
            .map
            .iter()
            .min_by_key(|(_, (_, used, _))| *used)
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        if let Some((_, _, n)) = t.map.remove(&oldest) {
            t.slots -= n;
        }
    }
    let table = Arc::new(Table {
        slots: Mutex::new(vec![None; segments as usize]),
    });
    t.slots += segments as usize;
    t.map.insert(key, (table.clone(), tick, segments as usize));
    Some(table)
}

/// Slots held over all tables, and the tables (for tests and stats).
pub fn held() -> (usize, usize) {
    tables().lock().map_or((0, 0), |t| (t.slots, t.map.len()))
}

#[cfg(test)]
mod tests {
    use granary_packet::{Component, Data, Interest, InterestFields};
    use granary_store::{PutOptions, Store};

    use crate::{answer, Answer};

    fn get(store: &Store, name: &Name) -> Data {
        let i: Interest = InterestFields::new(name.clone()).encode();
        match answer(store, &i) {
            Answer::Data(d) => d,
            Answer::Nack(r) => panic!("{name}: Nack {r}"),
        }
    }

    fn valid(d: &Data) -> bool {
        d.sig_value() == &granary_packet::sha256(d.signed_portion())[..]
    }

    use super::*;

    /// A segment served again carries the digest kept from its first serve, which is
    /// the digest of its own signed portion; a renamed version's segments, and the
    /// same segment under an unversioned name, get digests of their own names.
    #[test]
    fn a_kept_digest_is_the_digest_of_the_packet_it_signs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let n = Name::from_uri("/kept/obj").unwrap();
        let opts = PutOptions {
            version: Some(5),
            ..Default::default()
        };
        store.put(&n, &data[..], &opts, |_| {}).unwrap();
        let seg = |base: &Name, s: u64| {
            base.append(&Component::version(5))
                .append(&Component::segment(s))
        };
        let first = get(&store, &seg(&n, 2));
        let e = store.get(&n, Some(5)).unwrap();
        let t = table(&e, &seg(&n, 2), 2, crate::SEGMENT_FRESHNESS_MS).unwrap();
        assert!(
            t.slots.lock().unwrap()[2].is_some(),
            "not kept at first serve"
        );
        let again = get(&store, &seg(&n, 2));
        assert!(valid(&first) && valid(&again));
        assert_eq!(first.wire(), again.wire());
        // The kept value is what is served: a wrong one would be sent as it is.
        t.slots.lock().unwrap()[2] = Some([7; 32]);
        assert_eq!(get(&store, &seg(&n, 2)).sig_value(), &[7; 32][..]);
        t.slots.lock().unwrap()[2] = None;
        assert!(valid(&get(&store, &seg(&n, 2))));
        // Renamed: another name, another table.
        let m = Name::from_uri("/kept/moved").unwrap();
        store.rename(&n, &m).unwrap();
        let moved = get(&store, &seg(&m, 2));
        assert!(valid(&moved));
        assert_eq!(moved.content(), first.content());
        assert_ne!(moved.sig_value(), first.sig_value());
        // Unversioned (the latest version's segment, another freshness).
        let latest = get(&store, &m.append(&Component::segment(2)));
        assert!(valid(&latest));
        assert!(held().1 >= 3);
    }
}
