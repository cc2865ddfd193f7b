//! Every request's work is bounded (docs/http-api.md, "Limits").
//!
//! Each request runs under a [`Budget`]: a deadline (`--http-deadline`, default
//! [`DEFAULT_DEADLINE`]) and a flag that is raised when the deadline passes or the
//! client goes away (hyper drops the request's future). The [`layer`] answers 503
//! JSON `{"error", "limit": "deadline"}` with `Retry-After` when the handler has not
//! answered by the deadline; work that runs on blocking threads (catalog calls, CQL2
//! evaluation, previews) takes the request's budget with it ([`Budget::current`])
//! and checks it between units of work, so it stops soon after instead of running
//! on unseen.
//!
//! The budget is the time to the response's head: a `/data` body streams for as long
//! as the client reads (the serve loop's idle timeouts bound a client that stops).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// How long a request may work before it is answered 503 (`--http-deadline`).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);

/// Seconds a client is told to wait (`Retry-After`) after a 503.
pub const RETRY_AFTER_SECS: u64 = 5;

tokio::task_local! {
    static BUDGET: Budget;
}

/// One request's budget: its deadline, and whether it was given up.
#[derive(Clone, Debug)]
pub struct Budget {
    deadline: Instant,
    limit: Duration,
    off: Arc<AtomicBool>,
}

/// Why work stopped before it was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The request's deadline passed.
    Deadline(Duration),
    /// The client went away (or the deadline's answer was already sent).
    Gone,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Deadline(d) => write!(
                f,
                "the request's work passed its deadline of {} s (--http-deadline); narrow the request (fewer terms, a smaller page) or try again",
                d.as_secs_f64()
            ),
            Stop::Gone => f.write_str("the request was given up (its client went away)"),
        }
    }
}

impl Budget {
    /// A budget of `limit` from now.
    pub fn new(limit: Duration) -> Budget {
        Budget {
            deadline: Instant::now() + limit,
            limit,
            off: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The budget of the request this task serves, or [`DEFAULT_DEADLINE`] from now
    /// outside a request (tests, background work).
    pub fn current() -> Budget {
        BUDGET
            .try_with(Budget::clone)
            .unwrap_or_else(|_| Budget::new(DEFAULT_DEADLINE))
    }

    /// `Err` once the request is given up or its deadline has passed.
    pub fn check(&self) -> Result<(), Stop> {
        if self.off.load(Ordering::Relaxed) {
            return Err(Stop::Gone);
        }
        if Instant::now() >= self.deadline {
            return Err(Stop::Deadline(self.limit));
        }
        Ok(())
    }

    /// Time left before the deadline.
    pub fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Gives the request up: every later [`check`](Self::check) fails.
    pub fn give_up(&self) {
        self.off.store(true, Ordering::Relaxed);
    }
}

/// A 503 JSON answer for `stop` (`limit`: `"deadline"` or `"gone"`), with `Retry-After`.
pub fn refusal(stop: Stop) -> Response {
    let limit = match stop {
        Stop::Deadline(_) => "deadline",
        Stop::Gone => "gone",
    };
    let body = serde_json::json!({ "error": stop.to_string(), "limit": limit });
    let mut r = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    r
}

/// Raises the budget's flag when dropped unless disarmed: a request whose future
/// is dropped (its client went away) gives its blocking work up.
struct GiveUpOnDrop(Option<Budget>);

impl Drop for GiveUpOnDrop {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            b.give_up();
        }
    }
}

/// The middleware: runs the request under a fresh budget of `deadline`, answers
/// 503 when it passes.
pub async fn layer(State(deadline): State<Duration>, req: Request, next: Next) -> Response {
    let b = Budget::new(deadline);
    let mut guard = GiveUpOnDrop(Some(b.clone()));
    let r = tokio::time::timeout(deadline, BUDGET.scope(b.clone(), next.run(req))).await;
    match r {
        Ok(r) => {
            guard.0 = None;
            r
        }
        // The guard gives the work up as it drops.
        Err(_) => refusal(Stop::Deadline(deadline)),
    }
}

/// True for an I/O error that passes by itself: out of descriptors (per
/// process or system), out of memory or buffers, try again.
pub(crate) fn temporary_io(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(11 | 12 | 23 | 24 | 105))
        || matches!(
            e.kind(),
            std::io::ErrorKind::OutOfMemory | std::io::ErrorKind::WouldBlock
        )
}

/// True for an error message that carries such an I/O error (errors that
/// reach the gateway as text: the keychain's, the fetch engine's).
pub(crate) fn temporary_text(s: &str) -> bool {
    [
        "os error 11)",
        "os error 12)",
        "os error 23)",
        "os error 24)",
        "os error 105)",
    ]
    .iter()
    .any(|x| s.contains(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_fails_after_its_deadline_or_when_given_up() {
        let b = Budget::new(Duration::from_secs(3600));
        assert_eq!(b.check(), Ok(()));
        let c = b.clone();
        c.give_up();
        assert_eq!(b.check(), Err(Stop::Gone));
        let d = Budget::new(Duration::ZERO);
        assert_eq!(d.check(), Err(Stop::Deadline(Duration::ZERO)));
        assert_eq!(d.left(), Duration::ZERO);
    }

    #[tokio::test]
    async fn the_current_budget_is_the_requests() {
        let b = Budget::new(Duration::from_secs(7));
        let seen = BUDGET.scope(b.clone(), async { Budget::current() }).await;
        assert_eq!(seen.limit, Duration::from_secs(7));
        seen.give_up();
        assert_eq!(b.check(), Err(Stop::Gone));
        // Outside a request: the default.
        assert_eq!(Budget::current().limit, DEFAULT_DEADLINE);
    }

    #[tokio::test]
    async fn a_dropped_request_gives_its_work_up() {
        let b = Budget::new(Duration::from_secs(3600));
        {
            let _g = GiveUpOnDrop(Some(b.clone()));
        }
        assert_eq!(b.check(), Err(Stop::Gone));
    }
}
