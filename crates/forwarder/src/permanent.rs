//! Permanent faces (NFD's FacePersistency Permanent): faces to other
//! forwarders that the static routes of the config file (`[[route]]`) or a
//! `faces/create` with Persistency Permanent ask for. When such a face
//! closes (the peer went away), its routes stay in the RIB, the face is
//! listed as down, and it is re-dialled with back-off (1 s doubling to 30 s,
//! ±25 % jitter) under the same face id until the peer answers again; then
//! the routes work again by themselves. While it is down its next hops are
//! not eligible (an Interest goes to another next hop or gets NoRoute at
//! once, never into a dead socket).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use granary_face::{FaceId, Persistency};

use crate::config::FaceContext;

/// First re-dial delay.
pub const REDIAL_FIRST: Duration = Duration::from_secs(1);
/// Longest re-dial delay.
pub const REDIAL_MAX: Duration = Duration::from_secs(30);

/// Where a permanent face connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `tcp4://IP:PORT` or `tcp6://[IP]:PORT`.
    Tcp(SocketAddr),
    /// `udp4://IP:PORT` (through the node's UDP listener).
    Udp(SocketAddr),
    /// `unix:///path` (another forwarder's socket).
    Unix(PathBuf),
}

impl Target {
    /// Parses a FaceUri (`tcp://`, `tcp4://`, `tcp6://`, `udp://`, `udp4://`,
    /// `udp6://`, `unix://`); names are not resolved.
    pub fn parse(uri: &str) -> Result<Target, String> {
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Err(format!(
                "face {uri:?}: expected tcp4://IP:PORT, udp4://IP:PORT or unix:///path"
            ));
        };
        if scheme == "unix" {
            if !rest.starts_with('/') {
                return Err(format!("face {uri:?}: expected unix:///absolute/path"));
            }
            return Ok(Target::Unix(PathBuf::from(rest)));
        }
        let addr: SocketAddr = rest.trim_end_matches('/').parse().map_err(|_| {
            format!("face {uri:?}: expected {scheme}://IP:PORT (host names are not resolved)")
        })?;
        match (scheme, addr) {
            ("tcp" | "tcp4", SocketAddr::V4(_)) | ("tcp" | "tcp6", SocketAddr::V6(_)) => {
                Ok(Target::Tcp(addr))
            }
            ("udp" | "udp4", SocketAddr::V4(_)) | ("udp" | "udp6", SocketAddr::V6(_)) => {
                Ok(Target::Udp(addr))
            }
            _ => Err(format!(
                "face {uri:?}: unsupported scheme (tcp4, tcp6, udp4, udp6 or unix)"
            )),
        }
    }

    /// The canonical FaceUri, as the face lists it.
    pub fn uri(&self) -> String {
        match self {
            Target::Tcp(a @ SocketAddr::V4(_)) => format!("tcp4://{a}"),
            Target::Tcp(a) => format!("tcp6://{a}"),
            Target::Udp(a @ SocketAddr::V4(_)) => format!("udp4://{a}"),
            Target::Udp(a) => format!("udp6://{a}"),
            Target::Unix(p) => format!("unix://{}", p.display()),
        }
    }
}

/// What the dialling task and the forwarder share about one face.
#[derive(Debug, Default)]
pub(crate) struct DialState {
    /// Set when the face is destroyed: the task stops.
    pub cancel: AtomicBool,
    /// Failed connection attempts since the face was last up.
    pub failures: AtomicU64,
    /// Times the face came back after going down.
    pub redials: AtomicU64,
    /// The last connection error.
    pub last_error: Mutex<String>,
    /// Woken to dial now, whatever the back-off (faces/redial: the peer is
    /// known to be back, e.g. its heartbeat returned).
    pub wake: tokio::sync::Notify,
}

/// One permanent face in the forwarder's table of them.
#[derive(Debug, Clone)]
pub(crate) struct PermanentFace {
    pub target: Target,
    /// The face is in the face table (connected).
    pub up: bool,
    /// It was up at least once (a face whose first connection, asked for
    /// by faces/create, failed is forgotten, as NFD refuses the command).
    pub ever_up: bool,
    pub state: Arc<DialState>,
}

impl PermanentFace {
    pub(crate) fn new(target: Target) -> Self {
        PermanentFace {
            target,
            up: false,
            ever_up: false,
            state: Arc::new(DialState::default()),
        }
    }
}

/// Connects once; the face announces itself ([`granary_face::FaceEvent::Created`]).
pub(crate) async fn dial(target: &Target, id: FaceId, ctx: &FaceContext) -> Result<(), String> {
    match target {
        Target::Tcp(a) => granary_face::stream::connect_tcp_as(
            *a,
            id,
            Persistency::Permanent,
            ctx.limits.clone(),
            ctx.events.clone(),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot connect to {}: {e}", target.uri())),
        Target::Unix(p) => granary_face::stream::connect_unix_as(
            p,
            id,
            Persistency::Permanent,
            ctx.limits.clone(),
            ctx.events.clone(),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot connect to {}: {e}", target.uri())),
        Target::Udp(_) => Err("UDP faces are made through the UDP listener".into()),
    }
}

/// The delay before attempt `n` (0-based) of a re-dial: 1 s doubling to
/// 30 s, times a jitter factor in [0.75, 1.25) so that many nodes that lost
/// one peer do not all knock at the same instant.
pub fn backoff(n: u32, rng: &mut fastrand::Rng) -> Duration {
    let base = REDIAL_FIRST
        .saturating_mul(1u32 << n.min(16))
        .min(REDIAL_MAX);
    base.mul_f64(0.75 + rng.f64() * 0.5)
}

/// Sleeps `delay`, or less when the face is woken ([`DialState::wake`]);
/// true when it was woken.
async fn wait(state: &DialState, delay: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        _ = state.wake.notified() => true,
    }
}

/// Dials `target` as face `id` until it connects or the face is destroyed;
/// `now` dials once at once (at start), else the first try waits.
pub(crate) fn spawn_dialler(
    id: FaceId,
    target: Target,
    ctx: FaceContext,
    state: Arc<DialState>,
    now: bool,
) {
    tokio::spawn(async move {
        let mut rng = fastrand::Rng::new();
        let mut n = 0u32;
        if !now {
            if wait(&state, backoff(n, &mut rng)).await {
                n = 0;
            } else {
                n += 1;
            }
        }
        loop {
            if state.cancel.load(Ordering::Acquire) {
                return;
            }
            match dial(&target, id, &ctx).await {
                Ok(()) => {
                    state.failures.store(0, Ordering::Relaxed);
                    return;
                }
                Err(e) => {
                    let k = state.failures.fetch_add(1, Ordering::Relaxed);
                    let delay = backoff(n, &mut rng);
                    if k == 0 || k.is_power_of_two() {
                        tracing::warn!(face = id, "permanent face: {e}; next try in {delay:.1?}");
                    }
                    if let Ok(mut last) = state.last_error.lock() {
                        *last = e;
                    }
                    if wait(&state, delay).await {
                        // The peer is back: the back-off starts again.
                        n = 0;
                    } else {
                        n = n.saturating_add(1);
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn face_uris_parse_and_are_canonical() {
        assert_eq!(
            Target::parse("tcp://127.0.0.1:6363").unwrap().uri(),
            "tcp4://127.0.0.1:6363"
        );
        assert_eq!(
            Target::parse("udp4://10.0.0.1:6363/").unwrap(),
            Target::Udp("10.0.0.1:6363".parse().unwrap())
        );
        assert_eq!(
            Target::parse("unix:///run/x.sock").unwrap().uri(),
            "unix:///run/x.sock"
        );
        for bad in [
            "tcp4://host.example:6363",
            "unix://relative",
            "ws://1.2.3.4:9",
            "tcp6://1.2.3.4:9",
            "nope",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn backoff_doubles_to_the_cap_with_jitter() {
        let mut rng = fastrand::Rng::with_seed(1);
        for n in 0..40 {
            let d = backoff(n, &mut rng);
            let base = REDIAL_FIRST.saturating_mul(1 << n.min(16)).min(REDIAL_MAX);
            assert!(
                d >= base.mul_f64(0.75) && d < base.mul_f64(1.25),
                "{n}: {d:?}"
            );
        }
        assert!(backoff(0, &mut rng) < Duration::from_millis(1250));
        assert!(backoff(30, &mut rng) >= Duration::from_millis(22_500));
    }
}
