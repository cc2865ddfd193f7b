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
/// the start after a success ([`Backoff::pause`] is the schedule).
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    /// Failures since the last success.
    failures: u32,
}

impl Backoff {
    /// The pause after the first failure in a row.
    pub const FIRST: Duration = Duration::from_millis(10);
    /// The longest pause.
    pub const MAX: Duration = Duration::from_secs(1);

    /// The pause after the `failures`-th failure in a row (counted from 1):
    /// [`Backoff::FIRST`] × 2^(`failures` − 1), at most [`Backoff::MAX`].
    pub fn pause(failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        Self::FIRST
            .checked_mul(1u32 << doublings)
            .map_or(Self::MAX, |d| d.min(Self::MAX))
    }

    /// Records a failure; returns how long to pause before the next try.
    pub fn failed(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        Self::pause(self.failures)
    }

    /// Records a success: the next failure pauses [`Backoff::FIRST`] again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }
}

/// Accepts one connection, pausing per `backoff` after each failed accept
/// (logged as a warning naming `what`, the listener).
pub async fn accept_one<L: Listener>(
    listener: &L,
    backoff: &mut Backoff,
    what: &str,
) -> (L::Conn, L::Addr) {
    accept_one_pausing(listener, backoff, what, tokio::time::sleep).await
}

/// [`accept_one`], pausing with `sleep` (the tests record the pauses
/// instead of taking them).
async fn accept_one_pausing<L, S, Fut>(
    listener: &L,
    backoff: &mut Backoff,
    what: &str,
    mut sleep: S,
) -> (L::Conn, L::Addr)
where
    L: Listener,
    S: FnMut(Duration) -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        match listener.accept().await {
            Ok(c) => {
                backoff.succeeded();
                return c;
            }
            Err(e) => {
                let pause = backoff.failed();
                tracing::warn!("{what}: accept failed: {e}; retrying in {pause:?}");
                sleep(pause).await;
            }
        }
    }
}

/// Accepts connections forever, handing each to `serve` (awaited before the
/// next accept: `serve` spawns what takes long).
pub async fn accept_loop<L, F, Fut>(listener: L, what: &str, serve: F)
where
    L: Listener,
    F: FnMut(L::Conn, L::Addr) -> Fut,
    Fut: Future<Output = ()>,
{
    accept_loop_pausing(listener, what, serve, tokio::time::sleep).await
}

/// [`accept_loop`], pausing with `sleep`.
async fn accept_loop_pausing<L, F, Fut, S, SFut>(
    listener: L,
    what: &str,
    mut serve: F,
    mut sleep: S,
) where
    L: Listener,
    F: FnMut(L::Conn, L::Addr) -> Fut,
    Fut: Future<Output = ()>,
    S: FnMut(Duration) -> SFut,
    SFut: Future<Output = ()>,
{
    let mut backoff = Backoff::default();
    loop {
        let (conn, addr) = accept_one_pausing(&listener, &mut backoff, what, &mut sleep).await;
        serve(conn, addr).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    #[test]
    fn backoff_doubles_to_a_second_and_resets_on_success() {
        let ms = |d: Duration| d.as_millis() as u64;
        let schedule: Vec<u64> = (1..=9).map(|n| ms(Backoff::pause(n))).collect();
        assert_eq!(schedule, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(Backoff::pause(40), Backoff::MAX);
        assert_eq!(Backoff::pause(u32::MAX), Backoff::MAX);
        let mut b = Backoff::default();
        let pauses: Vec<u64> = (0..9).map(|_| ms(b.failed())).collect();
        assert_eq!(pauses, schedule);
        b.succeeded();
        assert_eq!(ms(b.failed()), 10);
        assert_eq!(ms(b.failed()), 20);
    }

    /// What the accept loop did, in order.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Event {
        /// Accept call number `k`, which failed (`false`) or succeeded.
        Accept(usize, bool),
        /// A pause of this many ms before the next accept.
        Pause(u64),
    }

    /// Answers accept call number `k` as `script[k]` says: `false` fails it
    /// as a process out of descriptors does, `true` accepts connection `k`;
    /// calls past the script wait forever. Logs each call.
    struct Flaky {
        script: Vec<bool>,
        calls: AtomicUsize,
        log: Arc<Mutex<Vec<Event>>>,
    }

    impl Listener for Flaky {
        type Conn = usize;
        type Addr = ();
        fn accept(&self) -> impl Future<Output = std::io::Result<(usize, ())>> + Send {
            let k = self.calls.fetch_add(1, Ordering::SeqCst);
            let ok = self.script.get(k).copied();
            if let Some(ok) = ok {
                self.log.lock().unwrap().push(Event::Accept(k, ok));
            }
            async move {
                match ok {
                    Some(true) => Ok((k, ())),
                    Some(false) => Err(std::io::Error::from_raw_os_error(24)), // EMFILE
                    None => std::future::pending().await,
                }
            }
        }
    }

    #[tokio::test]
    async fn failed_accepts_are_retried_with_growing_pauses_then_served() {
        use Event::{Accept, Pause};
        let log = Arc::new(Mutex::new(Vec::new()));
        let listener = Flaky {
            script: vec![false, false, false, false, true, true, false, true],
            calls: AtomicUsize::new(0),
            log: log.clone(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // The pauses the loop asks for are logged, not slept.
        let pauses = log.clone();
        let task = tokio::spawn(accept_loop_pausing(
            listener,
            "test",
            move |c, ()| {
                let _ = tx.send(c);
                async {}
            },
            move |d: Duration| {
                pauses.lock().unwrap().push(Pause(d.as_millis() as u64));
                async {}
            },
        ));
        let mut served = Vec::new();
        for _ in 0..3 {
            // A hang guard only.
            let c = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
            served.push(c.ok().flatten());
        }
        task.abort();
        assert_eq!(
            served,
            [Some(4), Some(5), Some(7)],
            "served after the failures"
        );
        let log = log.lock().unwrap().clone();
        // A pause of 10, 20, 40, 80 ms after each failure in a row; none
        // after a success; the first failure after a success pauses 10 ms.
        assert_eq!(
            log,
            [
                Accept(0, false),
                Pause(10),
                Accept(1, false),
                Pause(20),
                Accept(2, false),
                Pause(40),
                Accept(3, false),
                Pause(80),
                Accept(4, true),
                Accept(5, true),
                Accept(6, false),
                Pause(10),
                Accept(7, true),
            ]
        );
    }
}
