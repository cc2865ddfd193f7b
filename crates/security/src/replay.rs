//! Replay protection for signed Interests v0.3: a SignatureTime window, a
//! bounded memory of recent SignatureNonces, and per-key monotonic
//! SignatureTime / SignatureSeqNum.

use std::collections::{HashMap, HashSet, VecDeque};

use granary_packet::{Interest, KeyLocator};

use crate::error::{Error, Result};

/// Checks signed Interests against replays. Memory is bounded by
/// `max_entries` (nonces and keys).
#[derive(Debug)]
pub struct ReplayChecker {
    window_ms: u64,
    max_entries: usize,
    nonces: HashSet<Vec<u8>>,
    order: VecDeque<(u64, Vec<u8>)>,
    last: HashMap<Vec<u8>, (u64, Option<u64>)>,
}

impl Default for ReplayChecker {
    fn default() -> Self {
        ReplayChecker::new(60_000, 65_536)
    }
}

impl ReplayChecker {
    /// A checker accepting SignatureTime within ±`window_ms` of now.
    pub fn new(window_ms: u64, max_entries: usize) -> Self {
        ReplayChecker {
            window_ms,
            max_entries: max_entries.max(1),
            nonces: HashSet::new(),
            order: VecDeque::new(),
            last: HashMap::new(),
        }
    }

    /// Checks `i` (already signature-verified) at time `now_ms`, and records
    /// it when accepted.
    pub fn check(&mut self, i: &Interest, now_ms: u64) -> Result<()> {
        let si = i
            .sig_info
            .as_ref()
            .ok_or(Error::Replay("Interest is not signed"))?;
        let time = si.time.ok_or(Error::Replay("no SignatureTime"))?;
        if time.abs_diff(now_ms) > self.window_ms {
            return Err(Error::Replay("SignatureTime outside the accepted window"));
        }
        let nonce = si
            .nonce
            .as_ref()
            .ok_or(Error::Replay("no SignatureNonce"))?;
        if self.nonces.contains(nonce.as_ref()) {
            return Err(Error::Replay("SignatureNonce seen before"));
        }
        let key = match &si.key_locator {
            Some(KeyLocator::Name(n)) => n.value().to_vec(),
            Some(KeyLocator::Digest(d)) => d.to_vec(),
            None => Vec::new(),
        };
        if let Some(&(last_time, last_seq)) = self.last.get(&key) {
            if time < last_time {
                return Err(Error::Replay(
                    "SignatureTime older than the last accepted for this key",
                ));
            }
            if let (Some(s), Some(l)) = (si.seq_num, last_seq) {
                if s <= l {
                    return Err(Error::Replay("SignatureSeqNum not increasing"));
                }
            }
        }
        // Forget what has left the window, then bound memory.
        while let Some((t, _)) = self.order.front() {
            if t.saturating_add(self.window_ms) < now_ms || self.order.len() >= self.max_entries {
                if let Some((_, n)) = self.order.pop_front() {
                    self.nonces.remove(&n);
                }
            } else {
                break;
            }
        }
        if self.last.len() >= self.max_entries && !self.last.contains_key(&key) {
            self.last.clear();
        }
        self.nonces.insert(nonce.to_vec());
        self.order.push_back((time, nonce.to_vec()));
        let prev_seq = self.last.get(&key).and_then(|x| x.1);
        self.last.insert(key, (time, si.seq_num.or(prev_seq)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use granary_packet::{InterestFields, Name};

    use super::*;
    use crate::key::Signer;

    fn signed(seq: Option<u64>) -> Interest {
        Signer::Digest
            .sign_interest(InterestFields::new(Name::from_uri("/cmd").unwrap()), seq)
            .unwrap()
    }

    #[test]
    fn replayed_nonce_and_stale_time_rejected() {
        let mut rc = ReplayChecker::new(10_000, 100);
        let now = crate::now_ms();
        let i = signed(Some(1));
        rc.check(&i, now).unwrap();
        assert!(
            matches!(rc.check(&i, now), Err(Error::Replay(_))),
            "same nonce twice"
        );
        assert!(
            rc.check(&signed(Some(1)), now).is_err(),
            "seq not increasing"
        );
        rc.check(&signed(Some(2)), now).unwrap();
        assert!(
            rc.check(&signed(Some(3)), now + 60_000).is_err(),
            "outside the window"
        );
        assert!(rc.check(&signed(None), now).is_ok());
    }

    #[test]
    fn memory_is_bounded() {
        let mut rc = ReplayChecker::new(1_000_000, 8);
        let now = crate::now_ms();
        for _ in 0..100 {
            rc.check(&signed(None), now).unwrap();
        }
        assert!(rc.order.len() <= 8 && rc.nonces.len() <= 8);
    }
}
