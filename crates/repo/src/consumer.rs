//! The repository's consumer side: Interests it sends itself go out
//! through the serve loop ([`Consumer::express`]: pending Interests keyed
//! by name, each with a oneshot that the serve loop completes with the Data
//! or Nack that comes back, or that is forgotten on timeout or
//! cancellation), and prefix subscriptions ([`Consumer::subscribe`]) that
//! hand what comes back under a prefix to a fetch engine's link.
//!
//! Knows nothing of any command protocol: the ndn-python-repo service
//! (`python_repo.rs`) uses it to fetch command messages and segments.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use granary_face::{LinkFields, NetPacket};
use granary_packet::{Data, Interest, InterestFields, Name};
use tokio::sync::{mpsc, oneshot};

/// What came back for an Interest the repository sent.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per Interest, moved straight on
pub(crate) enum Fetched {
    Data(Data),
    Nack(u64),
    Timeout,
}

pub(crate) type Outbox = mpsc::Sender<(NetPacket, LinkFields)>;

type Waiters = Vec<(u64, oneshot::Sender<Fetched>)>;

/// The repository's consumer side: Interests out through the serve loop,
/// replies matched back by name.
pub(crate) struct Consumer {
    pub(crate) out: Outbox,
    pending: Mutex<HashMap<Name, Waiters>>,
    /// Prefixes whose Data and Nacks go to a fetch engine's link.
    subs: Subs,
    next: AtomicU64,
}

type Subs = Arc<Mutex<Vec<(u64, Name, Outbox)>>>;

/// Removes a subscription when dropped.
pub(crate) struct Sub {
    subs: Subs,
    id: u64,
}

impl Drop for Sub {
    fn drop(&mut self) {
        if let Ok(mut s) = self.subs.lock() {
            s.retain(|(id, _, _)| *id != self.id);
        }
    }
}

struct Forget<'a> {
    c: &'a Consumer,
    name: &'a Name,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.c.pending.lock() {
            if let Some(v) = p.get_mut(self.name) {
                v.retain(|(id, _)| *id != self.id);
                if v.is_empty() {
                    p.remove(self.name);
                }
            }
        }
    }
}

impl Consumer {
    pub(crate) fn new(out: Outbox) -> Self {
        Consumer {
            out,
            pending: Mutex::new(HashMap::new()),
            subs: Arc::new(Mutex::new(Vec::new())),
            next: AtomicU64::new(1),
        }
    }

    /// Sends `f` (with a fresh Nonce) and waits for its Data or Nack, or
    /// for its lifetime to pass.
    pub(crate) async fn express(&self, mut f: InterestFields) -> Fetched {
        let lifetime = f.lifetime.unwrap_or(4000);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        f.nonce = Some(fastrand::u32(..));
        let i = f.encode();
        let name = i.name.clone();
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.entry(name.clone()).or_default().push((id, tx));
        }
        let _forget = Forget {
            c: self,
            name: &name,
            id,
        };
        if self
            .out
            .send((NetPacket::Interest(i), LinkFields::default()))
            .await
            .is_err()
        {
            return Fetched::Timeout;
        }
        match tokio::time::timeout(Duration::from_millis(lifetime), rx).await {
            Ok(Ok(r)) => r,
            _ => Fetched::Timeout,
        }
    }

    fn take(&self, name: &Name) -> Option<Waiters> {
        self.pending.lock().ok()?.remove(name)
    }

    /// Sends Data and Nacks under `prefix` (not claimed by [`Self::express`])
    /// to `tx`, until the returned guard is dropped.
    pub(crate) fn subscribe(&self, prefix: &Name, tx: Outbox) -> Sub {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut s) = self.subs.lock() {
            s.push((id, prefix.clone(), tx));
        }
        Sub {
            subs: self.subs.clone(),
            id,
        }
    }

    /// Hands a packet to the subscription covering `name`, if any (a full
    /// queue drops it: the engine retransmits).
    fn to_sub(&self, name: &Name, p: NetPacket) -> bool {
        let Ok(s) = self.subs.lock() else {
            return false;
        };
        match s.iter().find(|(_, prefix, _)| prefix.is_prefix_of(name)) {
            Some((_, _, tx)) => {
                let _ = tx.try_send((p, LinkFields::default()));
                true
            }
            None => false,
        }
    }

    /// A Data from the forwarder: completes the requests for its name.
    pub(crate) fn on_data(&self, d: &Data) -> bool {
        let Some(waiters) = self.take(d.name()) else {
            return self.to_sub(d.name(), NetPacket::Data(d.clone()));
        };
        for (_, tx) in waiters {
            let _ = tx.send(Fetched::Data(d.clone()));
        }
        true
    }

    /// A Nack from the forwarder.
    pub(crate) fn on_nack(&self, i: &Interest, reason: u64) -> bool {
        let Some(waiters) = self.take(&i.name) else {
            return self.to_sub(&i.name, NetPacket::Nack(i.clone(), reason));
        };
        for (_, tx) in waiters {
            let _ = tx.send(Fetched::Nack(reason));
        }
        true
    }

    /// Requests in flight.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending
            .lock()
            .map(|p| p.values().map(Vec::len).sum())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use granary_packet::DataBuilder;

    fn name(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }

    fn digest_data(b: DataBuilder) -> Data {
        granary_packet::digest::sign_data(b)
    }

    #[tokio::test]
    async fn consumer_matches_replies_and_forgets_timeouts() {
        let (tx, mut rx) = mpsc::channel(8);
        let c = Arc::new(Consumer::new(tx));
        let mut f = InterestFields::new(name("/a/b"));
        f.lifetime = Some(50);
        assert!(matches!(c.express(f.clone()).await, Fetched::Timeout));
        assert_eq!(c.pending(), 0);
        let _ = rx.recv().await;
        let c2 = c.clone();
        f.lifetime = Some(5000);
        let waiting = tokio::spawn(async move { c2.express(f).await });
        let (p, _) = rx.recv().await.unwrap();
        let NetPacket::Interest(i) = p else { panic!() };
        assert!(i.nonce.is_some());
        assert_eq!(c.pending(), 1);
        assert!(!c.on_data(&digest_data(DataBuilder::new(name("/a")))));
        assert!(c.on_data(&digest_data(DataBuilder::new(name("/a/b")))));
        assert!(matches!(waiting.await.unwrap(), Fetched::Data(_)));
        assert_eq!(c.pending(), 0);
    }
}
