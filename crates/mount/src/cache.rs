//! The shared block cache: verified segments, keyed by (object, segment),
//! bounded in bytes, least recently used evicted first; and the table of
//! segments being fetched, so two readers of one segment wait on one fetch.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use lru::LruCache;
use tokio::sync::watch;

/// A segment's key: the object's id (one per versioned name) and its index.
pub type Key = (u64, u64);

/// What a waiter gets: the verified segment, or why it could not be had.
pub type Outcome = Option<Result<Bytes, String>>;

/// Verified segments, at most `cap` bytes of them.
pub struct BlockCache {
    inner: Mutex<Inner>,
    cap: usize,
}

struct Inner {
    lru: LruCache<Key, Bytes>,
    bytes: usize,
    inflight: HashMap<Key, watch::Receiver<Outcome>>,
    hits: u64,
    misses: u64,
}

/// What `claim` found for each segment asked for.
pub enum Claim {
    /// In the cache.
    Have(Bytes),
    /// Being fetched by someone else: wait on it.
    Wait(watch::Receiver<Outcome>),
    /// Claimed by the caller, who must fetch it and `fill` or `fail` it.
    Fetch(watch::Sender<Outcome>, watch::Receiver<Outcome>),
}

impl BlockCache {
    /// A cache of at most `cap` bytes (0: nothing is kept beyond the read
    /// that fetched it).
    pub fn new(cap: usize) -> BlockCache {
        BlockCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
                inflight: HashMap::new(),
                hits: 0,
                misses: 0,
            }),
            cap,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every
        // update is a single insert or remove), so the poison is ignored.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// For each key: the cached bytes, a fetch to wait on, or a claim.
    pub fn claim(&self, keys: impl IntoIterator<Item = Key>) -> Vec<(Key, Claim)> {
        let mut g = self.lock();
        let mut out = Vec::new();
        for k in keys {
            if let Some(b) = g.lru.get(&k).cloned() {
                g.hits += 1;
                out.push((k, Claim::Have(b)));
            } else if let Some(rx) = g.inflight.get(&k).cloned() {
                g.hits += 1;
                out.push((k, Claim::Wait(rx)));
            } else {
                g.misses += 1;
                let (tx, rx) = watch::channel(None);
                g.inflight.insert(k, rx.clone());
                out.push((k, Claim::Fetch(tx, rx)));
            }
        }
        out
    }

    /// True when the segment is cached or being fetched.
    pub fn known(&self, k: &Key) -> bool {
        let g = self.lock();
        g.lru.contains(k) || g.inflight.contains_key(k)
    }

    /// A claimed segment arrived (verified): cache it and wake its waiters.
    pub fn fill(&self, k: Key, tx: &watch::Sender<Outcome>, b: Bytes) {
        {
            let mut g = self.lock();
            g.inflight.remove(&k);
            if b.len() <= self.cap {
                g.bytes += b.len();
                if let Some(old) = g.lru.put(k, b.clone()) {
                    g.bytes -= old.len();
                }
                while g.bytes > self.cap {
                    match g.lru.pop_lru() {
                        Some((_, old)) => g.bytes -= old.len(),
                        None => break,
                    }
                }
            }
        }
        tx.send_replace(Some(Ok(b)));
    }

    /// A claimed segment could not be had: wake its waiters with the error.
    pub fn fail(&self, k: Key, tx: &watch::Sender<Outcome>, why: &str) {
        self.lock().inflight.remove(&k);
        tx.send_replace(Some(Err(why.to_string())));
    }

    /// Bytes held, hits (cached or in flight) and misses.
    pub fn stats(&self) -> (usize, u64, u64) {
        let g = self.lock();
        (g.bytes, g.hits, g.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_lru_and_claims() {
        let c = BlockCache::new(10);
        let mut tx = Vec::new();
        for (k, cl) in c.claim([(1, 0), (1, 1), (1, 2)]) {
            match cl {
                Claim::Fetch(t, _) => tx.push((k, t)),
                _ => panic!("nothing is cached yet"),
            }
        }
        // A second reader waits on the fetches in flight.
        assert!(c
            .claim([(1, 0)])
            .into_iter()
            .all(|(_, cl)| matches!(cl, Claim::Wait(_))));
        for (k, t) in &tx {
            c.fill(*k, t, Bytes::from(vec![k.1 as u8; 4]));
        }
        // 12 bytes in a 10-byte cache: the least recently used went.
        assert_eq!(c.stats().0, 8);
        assert!(!c.known(&(1, 0)));
        assert!(matches!(c.claim([(1, 2)])[0].1, Claim::Have(ref b) if b[..] == [2; 4]));
        // A failure wakes waiters with the error and forgets the claim.
        let (k, cl) = c.claim([(2, 0)]).pop().unwrap();
        let Claim::Fetch(t, rx) = cl else { panic!() };
        c.fail(k, &t, "bad");
        assert!(matches!(&*rx.borrow(), Some(Err(e)) if e == "bad"));
        assert!(!c.known(&(2, 0)));
    }
}
