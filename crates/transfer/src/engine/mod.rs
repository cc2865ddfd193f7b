//! The pipelined fetch engine: any number of [`Job`]s share one congestion
//! window and one RTT estimator. A job hands out [`Request`]s (a name and how
//! to ask for it) and judges each Data it gets back; the engine sends, times,
//! retransmits and adapts the window.
//!
//! - window: fixed / AIMD / CUBIC ([`crate::cc`]); conservative window
//!   adaptation (at most one decrease per RTT: only a loss of an Interest
//!   sent after the last decrease shrinks the window) unless disabled;
//! - RTO per RFC 6298 ([`crate::rtt`]) with Karn's rule and backoff;
//! - congestion marks (NDNLPv2 CongestionMark on Data) and Nack Congestion
//!   shrink the window; Nack Duplicate is retransmitted with a new Nonce;
//!   Nack NoRoute (or any other reason) ends the request: the job may offer
//!   an alternative ([`Job::on_failure`]) or fail;
//! - a request is retransmitted at most `retries` times (timeouts, Nacks,
//!   and Data the job rejected, e.g. a corrupt segment) before the job is
//!   asked for an alternative.
//!
//! `run` is the loop; the requests it has out or queued are a [`pending::Pending`]
//! (the consumer's own PIT), and each step of the loop — fill the window, take a Data,
//! take a Nack, expire timers — is in `pipeline.rs`.

mod pending;
mod pipeline;

use pending::{Entry, Pending};

use std::collections::HashMap;
use std::time::{Duration, Instant};

use granary_face::NetPacket;
use granary_packet::types::nack_reason;
use granary_packet::{Data, InterestFields, Name};

use crate::cc::Window;
use crate::config::Config;
use crate::link::{Incoming, Link};
use crate::rtt::RttEstimator;
use crate::Error;
use granary_face::LinkFields;

/// One Interest a job wants answered.
#[derive(Debug, Clone)]
pub struct Request {
    /// Name.
    pub name: Name,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
    /// InterestLifetime; `None` uses the engine's `lifetime`. A short one
    /// suits a speculative request (e.g. a neighbour's cache first).
    pub lifetime: Option<Duration>,
    /// Retransmissions allowed; `None` uses the engine's `retries`.
    pub retries: Option<u32>,
    /// ForwardingHint.
    pub forwarding_hint: Vec<Name>,
    /// ApplicationParameters; `name` must then end with their
    /// ParametersSha256DigestComponent (see [`Request::with_params`]).
    pub app_params: Option<bytes::Bytes>,
}

impl Request {
    /// An exact-name request with the engine's defaults.
    pub fn new(name: Name) -> Request {
        Request {
            name,
            can_be_prefix: false,
            must_be_fresh: false,
            lifetime: None,
            retries: None,
            forwarding_hint: Vec::new(),
            app_params: None,
        }
    }

    /// A request carrying ApplicationParameters: its name is `prefix` plus
    /// their ParametersSha256DigestComponent (the name the answer has).
    pub fn with_params(prefix: &Name, params: bytes::Bytes) -> Request {
        let f = InterestFields {
            name: prefix.clone(),
            app_params: Some(params.clone()),
            ..Default::default()
        };
        let mut r = Request::new(f.encode().name.clone());
        r.app_params = Some(params);
        r
    }
}

/// What a job says about a Data.
#[derive(Debug)]
pub enum Verdict {
    /// Accepted; the request is complete. The number is the payload bytes
    /// it contributed (for goodput).
    Done(u64),
    /// Rejected (bad signature, wrong hash): ask again (counts as a
    /// retransmission; when they run out the job's `on_failure` decides).
    Again(String),
    /// Rejected; ask this instead.
    Instead(Request),
    /// Rejected, and the job gave the request up (it goes on without it).
    Discard,
    /// The job cannot go on.
    Fatal(String),
}

/// Why a request ended without an accepted Data.
#[derive(Debug, Clone)]
pub enum Failure {
    /// Retransmissions exhausted after timeouts.
    Timeout,
    /// A Nack that is not worth retrying (NoRoute, or unknown reason).
    Nack(u64),
    /// Retransmissions exhausted; the last Data was rejected for this reason.
    Rejected(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => f.write_str("no answer (retries exhausted)"),
            Failure::Nack(r) => write!(f, "Nack {}", nack_reason::name(*r)),
            Failure::Rejected(why) => write!(f, "{why}"),
        }
    }
}

/// What a job does about a failed request.
#[derive(Debug)]
pub enum Recovery {
    /// Ask this instead, with fresh retries.
    Instead(Request),
    /// Forget the request; the job goes on without it.
    GiveUp,
    /// The job fails (with the request's name and the reason).
    Fail,
}

/// Where a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Still has requests, or waits for some.
    Running,
    /// Complete.
    Done,
    /// Failed with this error.
    Failed(String),
}

/// A unit of work for the engine (a file, a manifest, one packet…).
pub trait Job: Send {
    /// The next request to send, with a key of the job's choosing; `None`
    /// when the job has nothing more to ask for now.
    fn next_request(&mut self) -> Option<(u64, Request)>;
    /// A Data answered request `key`.
    fn on_data(&mut self, key: u64, data: Data) -> Verdict;
    /// Request `key` failed: try another request instead (e.g. the
    /// producer's name after a neighbour's), give it up, or fail the job.
    fn on_failure(&mut self, key: u64, why: &Failure) -> Recovery;
    /// The job's state; the engine stops serving it when not Running.
    fn state(&self) -> JobState;
    /// The engine gave up on the job (after `on_failure` said `Fail` or a
    /// Fatal verdict): record the error.
    fn fail(&mut self, error: String);
    /// True while the job waits on something outside the engine (e.g. a
    /// full output queue): the engine then polls it every millisecond
    /// instead of declaring it stalled.
    fn blocked(&self) -> bool {
        false
    }
}

/// Transfer statistics (ndncatchunks' summary).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    /// Seconds spent in `run`.
    pub seconds: f64,
    /// Data accepted.
    pub segments: u64,
    /// Payload bytes accepted.
    pub bytes: u64,
    /// Interests sent (first transmissions and retransmissions).
    pub interests: u64,
    /// Retransmissions.
    pub retransmissions: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// Data carrying a CongestionMark.
    pub congestion_marks: u64,
    /// Nacks by reason.
    pub nacks_congestion: u64,
    /// Nack Duplicate.
    pub nacks_duplicate: u64,
    /// Nack NoRoute / other.
    pub nacks_other: u64,
    /// Data a job rejected (verification failed).
    pub rejected: u64,
    /// Window decreases, by cause.
    pub decreases_loss: u64,
    /// Decreases after marks.
    pub decreases_mark: u64,
    /// Decreases after Nack Congestion.
    pub decreases_nack: u64,
    /// RTT min/avg/max (ms) over Karn-valid samples.
    pub rtt_min_ms: f64,
    /// Mean RTT.
    pub rtt_avg_ms: f64,
    /// Max RTT.
    pub rtt_max_ms: f64,
    /// Final RTO (ms).
    pub rto_ms: f64,
    /// Largest window reached.
    pub max_cwnd: f64,
    /// Unsolicited or late packets ignored.
    pub ignored: u64,
    /// Times slow start ended on rising delay (HyStart).
    pub slow_start_exits: u64,
    /// Location lookups made after a fetch by name failed ([`crate::locate`]).
    pub lookups: u64,
    /// Switches of the forwarding hint to a location (the first one after a
    /// lookup, then one per failover).
    pub hint_switches: u64,
    /// Data accepted for a name already accepted in this engine (with a
    /// locator: a verified segment fetched twice; 0 after a clean failover).
    pub refetched: u64,
}

impl Stats {
    /// Goodput in bit/s.
    pub fn goodput_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds
        } else {
            0.0
        }
    }

    /// Total window decreases.
    pub fn decreases(&self) -> u64 {
        self.decreases_loss + self.decreases_mark + self.decreases_nack
    }

    fn add(&mut self, o: &Stats) {
        self.seconds += o.seconds;
        self.segments += o.segments;
        self.bytes += o.bytes;
        self.interests += o.interests;
        self.retransmissions += o.retransmissions;
        self.timeouts += o.timeouts;
        self.congestion_marks += o.congestion_marks;
        self.nacks_congestion += o.nacks_congestion;
        self.nacks_duplicate += o.nacks_duplicate;
        self.nacks_other += o.nacks_other;
        self.rejected += o.rejected;
        self.decreases_loss += o.decreases_loss;
        self.decreases_mark += o.decreases_mark;
        self.decreases_nack += o.decreases_nack;
        self.ignored += o.ignored;
        self.slow_start_exits += o.slow_start_exits;
        self.lookups += o.lookups;
        self.hint_switches += o.hint_switches;
        self.refetched += o.refetched;
        self.max_cwnd = self.max_cwnd.max(o.max_cwnd);
    }
}

/// The engine: window, RTT estimator and statistics persist across runs
/// (e.g. a manifest, then the data it describes).
pub struct Engine {
    cfg: Config,
    window: Window,
    rtt: RttEstimator,
    /// Nonces of the Interests sent.
    nonces: fastrand::Rng,
    /// Statistics over all runs.
    pub total: Stats,
    progress: Option<Box<dyn FnMut(u64) + Send>>,
    last_backoff: Instant,
    /// Located hints per object (with a locator).
    hints: HashMap<Name, crate::locate::Hints>,
    /// Why lookups failed.
    lookup_errors: Vec<String>,
    /// Hashes of the names accepted (with a locator), for `Stats::refetched`.
    accepted: std::collections::HashSet<u64>,
}

/// `/localhost/…` or `/localhop/…`: this node or its neighbours only, so
/// never sent with the configured forwarding hint.
fn is_scoped(name: &Name) -> bool {
    name.get(0)
        .is_some_and(|c| c.value == b"localhost" || c.value == b"localhop")
}

impl Engine {
    /// A new engine.
    pub fn new(cfg: Config) -> Engine {
        let now = Instant::now();
        Engine {
            window: Window::new(&cfg, now),
            rtt: RttEstimator::new(
                cfg.rto_alpha,
                cfg.rto_beta,
                cfg.rto_k,
                cfg.min_rto,
                cfg.max_rto,
            ),
            cfg,
            nonces: fastrand::Rng::new(),
            total: Stats::default(),
            progress: None,
            last_backoff: now,
            hints: HashMap::new(),
            lookup_errors: Vec::new(),
            accepted: Default::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Calls `f` with the payload bytes of every accepted Data.
    pub fn on_progress(&mut self, f: impl FnMut(u64) + Send + 'static) {
        self.progress = Some(Box::new(f));
    }

    fn next_nonce(&mut self) -> u32 {
        self.nonces.u32(..)
    }

    /// Runs `jobs` to completion (each ends Done or Failed) over `link`.
    /// Returns this run's statistics; a link failure is an error.
    pub async fn run<L: Link>(
        &mut self,
        link: &mut L,
        jobs: &mut [&mut dyn Job],
    ) -> Result<Stats, Error> {
        let start = Instant::now();
        let mut st = Stats::default();
        let mut p = Pending::default();
        let mut batch = Vec::new();
        let mut incoming: Vec<Incoming> = Vec::new();
        let mut rr = 0usize;
        let mut was_running: Vec<bool> = vec![true; jobs.len()];
        loop {
            // Drop work of jobs that stopped running.
            let running: Vec<bool> = jobs
                .iter()
                .map(|j| j.state() == JobState::Running)
                .collect();
            if running != was_running {
                was_running.clone_from(&running);
                p.drop_stopped(&running);
            }
            self.fill_window(&mut p, jobs, &running, &mut rr, &mut batch, &mut st);
            if !batch.is_empty() {
                link.send(&batch).await?;
            }
            let blocked = jobs
                .iter()
                .any(|j| j.state() == JobState::Running && j.blocked());
            if p.is_empty() {
                if jobs.iter().all(|j| j.state() != JobState::Running) {
                    break;
                }
                if blocked {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                // Running jobs with nothing to ask and nothing pending can
                // never finish.
                for j in jobs.iter_mut() {
                    if j.state() == JobState::Running {
                        j.fail("stalled: nothing left to request but not complete".into());
                    }
                }
                break;
            }
            // Wait for packets or the next timer.
            let deadline = p.next_deadline();
            let deadline = if blocked {
                let soon = Instant::now() + Duration::from_millis(1);
                Some(deadline.map_or(soon, |d| d.min(soon)))
            } else {
                deadline
            };
            incoming.clear();
            let got = match deadline {
                Some(at) => tokio::select! {
                    r = link.recv(&mut incoming) => Some(r),
                    _ = tokio::time::sleep_until(at.into()) => None,
                },
                None => Some(link.recv(&mut incoming).await),
            };
            if let Some(r) = got {
                r?;
            }
            let now = Instant::now();
            for (pkt, lf) in incoming.drain(..) {
                match pkt {
                    NetPacket::Data(d) => {
                        self.on_data(&mut p, jobs, &running, d, &lf, now, &mut st)
                    }
                    NetPacket::Nack(i, reason) => {
                        self.on_nack(&mut p, jobs, &i.name, reason, now, &mut st)
                            .await
                    }
                    NetPacket::Interest(_) => st.ignored += 1,
                }
            }
            self.expire(&mut p, jobs, &mut st).await;
        }
        st.seconds = start.elapsed().as_secs_f64();
        st.rtt_min_ms = if self.rtt.samples > 0 {
            self.rtt.min_sample * 1e3
        } else {
            0.0
        };
        st.rtt_avg_ms = self.rtt.mean() * 1e3;
        st.rtt_max_ms = self.rtt.max_sample * 1e3;
        st.rto_ms = self.rtt.rto().as_secs_f64() * 1e3;
        self.total.add(&st);
        self.total.rtt_min_ms = st.rtt_min_ms;
        self.total.rtt_avg_ms = st.rtt_avg_ms;
        self.total.rtt_max_ms = st.rtt_max_ms;
        self.total.rto_ms = st.rto_ms;
        Ok(st)
    }

    /// A request failed (a Nack that is not Congestion or Duplicate, or
    /// timeouts) by name or under a located hint: with a locator, it is sent
    /// again under the next location of its object (after a lookup the first
    /// time), with fresh retries. False when there is no other location (or
    /// no locator, or the request's hint is not the engine's to change).
    async fn failover(&mut self, e: &mut Entry, st: &mut Stats) -> bool {
        let Some(loc) = self.cfg.locator.clone() else {
            return false;
        };
        if !e.req.forwarding_hint.is_empty()
            || !self.cfg.forwarding_hint.is_empty()
            || is_scoped(&e.req.name)
        {
            return false;
        }
        let key = crate::locate::object_of(&e.req.name);
        if key.is_empty() {
            return false;
        }
        let h = self.hints.entry(key.clone()).or_default();
        if e.hint_gen < h.gen {
            // Sent under a hint already given up: again, under the current one.
            e.retx = 0;
            return true;
        }
        if !h.looked_up {
            h.looked_up = true;
            st.lookups += 1;
            let found = loc.0.locate(&key).await;
            let h = self.hints.entry(key.clone()).or_default();
            match found {
                Ok(v) => {
                    for n in v {
                        if !n.is_empty() && !h.next.contains(&n) && !h.current.contains(&n) {
                            h.next.push_back(n);
                        }
                    }
                }
                Err(why) => {
                    self.lookup_errors.push(format!("{key}: {why}"));
                }
            }
        }
        let h = self.hints.entry(key).or_default();
        match h.next.pop_front() {
            Some(n) => {
                h.current = vec![n];
                h.gen += 1;
                st.hint_switches += 1;
                e.retx = 0;
                true
            }
            None => false,
        }
    }

    /// The located hint of `object` now (empty: by name, or no lookup made).
    pub fn located_hint(&self, object: &Name) -> Vec<Name> {
        self.hints
            .get(&crate::locate::object_of(object))
            .map(|h| h.current.clone())
            .unwrap_or_default()
    }

    /// Why lookups failed (the locator's reasons), oldest first.
    pub fn lookup_errors(&self) -> &[String] {
        &self.lookup_errors
    }

    /// Conservative window adaptation: only a loss of an Interest sent
    /// after the last decrease (i.e. one RTT later) shrinks the window again.
    fn may_decrease(&self, sent: Instant) -> bool {
        self.cfg.disable_cwa || sent > self.window.last_decrease()
    }
}

/// The request ran out of chances: ask the job for an alternative (the
/// entry then carries it, with fresh retries), or drop it / fail the job
/// (the entry is marked dead with `retx = u32::MAX`).
fn fail_or_replace(jobs: &mut [&mut dyn Job], e: &mut Entry, why: Failure) {
    let job = &mut jobs[e.job];
    match job.on_failure(e.key, &why) {
        Recovery::Instead(r) => {
            e.req = r;
            e.retx = 0;
        }
        Recovery::GiveUp => e.retx = u32::MAX,
        Recovery::Fail => {
            if job.state() == JobState::Running {
                job.fail(format!("{}: {why}", e.req.name));
            }
            e.retx = u32::MAX;
        }
    }
}

fn name_hash(n: &Name) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    n.hash(&mut h);
    h.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::link::ChannelLink;
    use granary_face::LinkFields;
    use granary_packet::{Component, DataBuilder};
    use tokio::sync::mpsc;

    /// Answers `/a/seg=N` (every 5th with a congestion mark); `/slow/…`
    /// never; `/dup/…` first with Nack Duplicate, then Data; `/none/…`
    /// with Nack NoRoute.
    pub(crate) fn responder() -> ChannelLink {
        let (tx, mut from_engine) = mpsc::channel::<Incoming>(1024);
        let (to_engine, rx) = mpsc::channel::<Incoming>(1024);
        tokio::spawn(async move {
            let mut dup_seen = std::collections::HashSet::new();
            while let Some((p, _)) = from_engine.recv().await {
                let NetPacket::Interest(i) = p else { continue };
                let first = i.name.get(0).map(|c| c.value.to_vec()).unwrap_or_default();
                let reply = |mark: bool| {
                    let d = DataBuilder::new(i.name.clone())
                        .content(vec![1u8; 10])
                        .encode_with_signature(bytes::Bytes::from_static(&[0; 32]));
                    let lf = LinkFields {
                        congestion_mark: mark.then_some(1),
                        ..Default::default()
                    };
                    (NetPacket::Data(d), lf)
                };
                let out = match first.as_slice() {
                    b"a" => {
                        let n = i.name.last().and_then(|c| c.as_segment()).unwrap_or(0);
                        Some(reply(n % 5 == 4))
                    }
                    b"dup" if dup_seen.insert(i.name.clone()) => Some((
                        NetPacket::Nack(i.clone(), nack_reason::DUPLICATE),
                        LinkFields::default(),
                    )),
                    b"dup" => Some(reply(false)),
                    // Answered only with a ForwardingHint (h), only without (localhost).
                    b"h" if i.forwarding_hint == [Name::from_uri("/site/a").unwrap()] => {
                        Some(reply(false))
                    }
                    b"localhost" if i.forwarding_hint.is_empty() => Some(reply(false)),
                    // Located objects: by name and at /site/liar a NoRoute, at
                    // /site/dead no answer, at /site/b the Data.
                    b"loc" => match i.forwarding_hint.first().map(|h| h.to_string()) {
                        Some(h) if h == "/site/b" => Some(reply(false)),
                        Some(h) if h == "/site/dead" => None,
                        _ => Some((
                            NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE),
                            LinkFields::default(),
                        )),
                    },
                    b"none" => Some((
                        NetPacket::Nack(i.clone(), nack_reason::NO_ROUTE),
                        LinkFields::default(),
                    )),
                    _ => None,
                };
                if let Some(o) = out {
                    if to_engine.send(o).await.is_err() {
                        return;
                    }
                }
            }
        });
        ChannelLink { tx, rx }
    }

    /// Fetches a list of alternatives per key.
    struct Alts {
        todo: Vec<(u64, Vec<Request>)>,
        alts: HashMap<u64, Vec<Request>>,
        got: HashMap<u64, Name>,
        given_up: Vec<u64>,
        want: usize,
        error: Option<String>,
        give_up_instead_of_fail: bool,
    }

    impl Alts {
        fn new(items: Vec<Vec<Request>>, give_up: bool) -> Alts {
            let want = items.len();
            Alts {
                todo: items
                    .into_iter()
                    .enumerate()
                    .map(|(k, v)| (k as u64, v))
                    .rev()
                    .collect(),
                alts: HashMap::new(),
                got: HashMap::new(),
                given_up: Vec::new(),
                want,
                error: None,
                give_up_instead_of_fail: give_up,
            }
        }
    }

    impl Job for Alts {
        fn next_request(&mut self) -> Option<(u64, Request)> {
            let (k, mut v) = self.todo.pop()?;
            let first = v.remove(0);
            self.alts.insert(k, v);
            Some((k, first))
        }
        fn on_data(&mut self, key: u64, data: Data) -> Verdict {
            self.got.insert(key, data.name().clone());
            Verdict::Done(data.content().len() as u64)
        }
        fn on_failure(&mut self, key: u64, _: &Failure) -> Recovery {
            match self.alts.get_mut(&key).filter(|v| !v.is_empty()) {
                Some(v) => Recovery::Instead(v.remove(0)),
                None if self.give_up_instead_of_fail => {
                    self.given_up.push(key);
                    Recovery::GiveUp
                }
                None => Recovery::Fail,
            }
        }
        fn state(&self) -> JobState {
            match &self.error {
                Some(e) => JobState::Failed(e.clone()),
                None if self.got.len() + self.given_up.len() == self.want => JobState::Done,
                None => JobState::Running,
            }
        }
        fn fail(&mut self, error: String) {
            self.error = Some(error);
        }
    }

    fn req(uri: &str, lifetime_ms: Option<u64>, retries: Option<u32>) -> Request {
        let mut r = Request::new(Name::from_uri(uri).unwrap());
        r.lifetime = lifetime_ms.map(Duration::from_millis);
        r.retries = retries;
        r
    }

    #[tokio::test]
    async fn window_marks_alternatives_and_nacks() {
        let mut link = responder();
        // A first window of 100: its 20 marks arrive within one RTT.
        let mut e = Engine::new(Config {
            init_cwnd: 100.0,
            ..Config::default()
        });
        let base = Name::from_uri("/a").unwrap();
        let mut items: Vec<Vec<Request>> = (0..200)
            .map(|s| vec![Request::new(base.append(&Component::segment(s)))])
            .collect();
        // A neighbour that never answers (short lifetime, no retries), then the producer.
        items.push(vec![
            req("/slow/x", Some(50), Some(0)),
            req("/a/alt", None, None),
        ]);
        // Nack Duplicate is retransmitted with a new Nonce.
        items.push(vec![req("/dup/y", None, None)]);
        let mut job = Alts::new(items, false);
        let st = e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!(job.state(), JobState::Done);
        assert_eq!(job.got[&200].to_string(), "/a/alt");
        assert_eq!(st.segments, 202);
        assert_eq!(st.timeouts, 1);
        assert_eq!(st.nacks_duplicate, 1);
        assert_eq!(st.congestion_marks, 40);
        assert!(st.decreases_mark >= 1, "{st:?}");
        // Conservative adaptation: one decrease for the first window's 20
        // marks; the later, smaller windows each see about one mark.
        assert!(st.decreases_mark <= 40 - 19, "{st:?}");
        assert!(st.max_cwnd >= 100.0);
    }

    #[tokio::test]
    async fn configured_forwarding_hint_goes_on_every_interest_but_scoped_ones() {
        let mut link = responder();
        let mut e = Engine::new(Config {
            forwarding_hint: vec![Name::from_uri("/site/a").unwrap()],
            ..Config::default()
        });
        let mut job = Alts::new(
            vec![
                vec![req("/h/1", Some(200), Some(0))],
                vec![req("/localhost/x", Some(200), Some(0))],
            ],
            false,
        );
        e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!(job.state(), JobState::Done);
        // Without the hint /h/1 is not answered.
        let mut e = Engine::new(Config::default());
        let mut job = Alts::new(vec![vec![req("/h/1", Some(100), Some(0))]], true);
        e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!(job.given_up, vec![0]);
    }

    /// Gives fixed locations and counts the lookups.
    struct Fixed(
        Vec<&'static str>,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    );

    impl crate::Locator for Fixed {
        fn locate(&self, object: &Name) -> crate::LocateFuture {
            assert_eq!(object.to_string(), "/loc/f", "the object, without segment");
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let v = self.0.iter().map(|u| Name::from_uri(u).unwrap()).collect();
            Box::pin(async move { Ok(v) })
        }
    }

    fn located(locs: Vec<&'static str>) -> (Config, std::sync::Arc<std::sync::atomic::AtomicU64>) {
        let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let cfg = Config {
            locator: Some(crate::LocatorRef(std::sync::Arc::new(Fixed(
                locs,
                n.clone(),
            )))),
            min_rto: Duration::from_millis(50),
            ..Config::default()
        };
        (cfg, n)
    }

    fn segments(n: u64) -> Vec<Vec<Request>> {
        let base = Name::from_uri("/loc/f").unwrap();
        (0..n)
            .map(|k| {
                let mut r = Request::new(base.append(&Component::segment(k)));
                r.lifetime = Some(Duration::from_millis(150));
                vec![r]
            })
            .collect()
    }

    /// By name: NoRoute; the lookup gives a node that lies (NoRoute), one that does
    /// not answer (timeouts) and one that holds it: every request ends at the last,
    /// after one lookup, and nothing accepted is asked again.
    #[tokio::test]
    async fn located_hints_fail_over_without_refetching() {
        let mut link = responder();
        let (cfg, lookups) = located(vec!["/site/liar", "/site/dead", "/site/b"]);
        let mut e = Engine::new(cfg);
        let mut job = Alts::new(segments(40), false);
        let st = e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!(job.state(), JobState::Done);
        assert_eq!(job.got.len(), 40);
        assert_eq!(lookups.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!((st.lookups, st.hint_switches, st.refetched), (1, 3, 0));
        assert_eq!(st.segments, 40);
        assert_eq!(
            e.located_hint(
                &Name::from_uri("/loc/f")
                    .unwrap()
                    .append(&Component::segment(3))
            ),
            [Name::from_uri("/site/b").unwrap()]
        );
        // No location holds it: the job fails with the by-name reason, no hang.
        let (cfg, _) = located(vec!["/site/liar", "/site/dead"]);
        let mut e = Engine::new(cfg);
        let mut job = Alts::new(segments(3), false);
        let t = Instant::now();
        e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert!(
            matches!(job.state(), JobState::Failed(_)),
            "{:?}",
            job.state()
        );
        assert!(t.elapsed() < Duration::from_secs(30));
        // Without a locator nothing is looked up.
        let mut e = Engine::new(Config::default());
        let mut job = Alts::new(segments(1), true);
        let st = e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!((st.lookups, st.hint_switches), (0, 0));
    }

    #[tokio::test]
    async fn no_route_fails_the_job_or_is_given_up() {
        let mut link = responder();
        let mut e = Engine::new(Config::default());
        let mut job = Alts::new(
            vec![
                vec![req("/none/z", None, None)],
                vec![req("/a/ok", None, None)],
            ],
            false,
        );
        e.run(&mut link, &mut [&mut job]).await.unwrap();
        match job.state() {
            JobState::Failed(m) => assert!(m.contains("/none/z") && m.contains("NoRoute"), "{m}"),
            s => panic!("{s:?}"),
        }
        let mut job = Alts::new(
            vec![
                vec![req("/none/z", None, None)],
                vec![req("/a/ok", None, None)],
            ],
            true,
        );
        e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!(job.state(), JobState::Done);
        assert_eq!(job.given_up, vec![0]);
    }

    #[tokio::test]
    async fn retries_run_out_on_timeouts() {
        let mut link = responder();
        let mut e = Engine::new(Config {
            min_rto: Duration::from_millis(10),
            max_rto: Duration::from_millis(20),
            retries: 2,
            ..Config::default()
        });
        let mut job = Alts::new(vec![vec![req("/slow/q", Some(30), None)]], false);
        let st = e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert!(matches!(job.state(), JobState::Failed(_)));
        assert_eq!(st.timeouts, 3, "first try + 2 retries");
        assert_eq!(st.retransmissions, 2);
    }
}
