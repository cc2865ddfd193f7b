//! The one accept loop: every listener (Unix stream, TCP, WebSocket, and the
//! HTTP gateway's) accepts through [`accept_one`] or [`accept_loop`], with
//! the same back-off after a failed accept.
//!
//! A failed accept is almost always the process being out of descriptors
//! (EMFILE, ENFILE) or memory: the pending connection stays queued, so
//! retrying at once fails again at once and spins a core. The loop pauses
//! instead ([`Backoff`]: 10 ms, doubling to at most 1 s, back to 10 ms after
//! the next success), which gives closing faces time to free descriptors.

use std::future::Future;
use std::time::Duration;

/// A listening socket the loop accepts from.
pub trait Listener: Send + Sync {
    /// An accepted connection.
    type Conn: Send;
    /// Its peer's address.
    type Addr: Send;
    /// Accepts one connection.
    fn accept(&self) -> impl Future<Output = std::io::Result<(Self::Conn, Self::Addr)>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;
    fn accept(&self) -> impl Future<Output = std::io::Result<(Self::Conn, Self::Addr)>> + Send {
        tokio::net::TcpListener::accept(self)
    }
}

impl Listener for tokio::net::UnixListener {
    type Conn = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;
    fn accept(&self) -> impl Future<Output = std::io::Result<(Self::Conn, Self::Addr)>> + Send {
        tokio::net::UnixListener::accept(self)
    }
}

/// The pause after a failed accept: [`Backoff::FIRST`] after the first
/// failure, doubling with each further one up to [`Backoff::MAX`], back to
/// the start after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: Self::FIRST }
    }
}

impl Backoff {
    /// The pause after the first failure in a row.
    pub const FIRST: Duration = Duration::from_millis(10);
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);

    /// Records a failure; returns how long to pause before the next try.
    pub fn failed(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        pause
    }

    /// Records a success: the next failure pauses [`Backoff::FIRST`] again.
    pub fn succeeded(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Accepts one connection, pausing per `backoff` after each failed accept
/// (logged as a warning naming `what`, the listener).
pub async fn accept_one<L: Listener>(
    listener: &L,
    backoff: &mut Backoff,
    what: &str,
) -> (L::Conn, L::Addr) {
    loop {
        match listener.accept().await {
            Ok(c) => {
                backoff.succeeded();
                return c;
            }
            Err(e) => {
                let pause = backoff.failed();
                tracing::warn!("{what}: accept failed: {e}; retrying in {pause:?}");
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Accepts connections forever, handing each to `serve` (awaited before the
/// next accept: `serve` spawns what takes long).
pub async fn accept_loop<L, F, Fut>(listener: L, what: &str, mut serve: F)
where
    L: Listener,
    F: FnMut(L::Conn, L::Addr) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut backoff = Backoff::default();
    loop {
        let (conn, addr) = accept_one(&listener, &mut backoff, what).await;
        serve(conn, addr).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    #[test]
    fn backoff_doubles_to_a_second_and_resets_on_success() {
        let mut b = Backoff::default();
        let ms = |d: Duration| d.as_millis() as u64;
        let pauses: Vec<u64> = (0..9).map(|_| ms(b.failed())).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.succeeded();
        assert_eq!(ms(b.failed()), 10);
        assert_eq!(ms(b.failed()), 20);
    }

    /// Fails its first `fails` accepts as a process out of descriptors
    /// does, then accepts connection number `k` (its call count) until
    /// `fails + 2` calls, then waits forever; records when each call came.
    struct Flaky {
        fails: usize,
        calls: AtomicUsize,
        at: Arc<Mutex<Vec<Instant>>>,
    }

    impl Listener for Flaky {
        type Conn = usize;
        type Addr = ();
        fn accept(&self) -> impl Future<Output = std::io::Result<(usize, ())>> + Send {
            let k = self.calls.fetch_add(1, Ordering::SeqCst);
            self.at.lock().unwrap().push(Instant::now());
            let fails = self.fails;
            async move {
                if k < fails {
                    Err(std::io::Error::from_raw_os_error(24)) // EMFILE
                } else if k < fails + 2 {
                    Ok((k, ()))
                } else {
                    std::future::pending().await
                }
            }
        }
    }

    #[tokio::test]
    async fn failed_accepts_are_retried_with_growing_pauses_then_served() {
        let at = Arc::new(Mutex::new(Vec::new()));
        let listener = Flaky {
            fails: 4,
            calls: AtomicUsize::new(0),
            at: at.clone(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(accept_loop(listener, "test", move |c, ()| {
            let _ = tx.send(c);
            async {}
        }));
        let first = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        let second = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        task.abort();
        assert_eq!(first.ok().flatten(), Some(4), "served after the failures");
        assert_eq!(second.ok().flatten(), Some(5), "and the next one");
        let at = at.lock().unwrap().clone();
        assert_eq!(at.len(), 7, "4 failures, 2 connections, 1 waiting");
        // A pause of 10, 20, 40, 80 ms after each failure.
        for (k, want) in [10u64, 20, 40, 80].into_iter().enumerate() {
            let gap = at[k + 1] - at[k];
            assert!(gap >= Duration::from_millis(want), "pause {k}: {gap:?}");
            assert!(
                gap < Duration::from_millis(want + 1000),
                "pause {k}: {gap:?}"
            );
        }
        // No pause after a success.
        assert!(at[6] - at[5] < Duration::from_millis(1000));
    }
}
