//! Replication policy: `[[replication]] prefix = "/cmip6", replicas = 2` in
//! the daemon's config file. A background task on every node (a) plans:
//! for each version held under a rule's prefix whose holders that are up
//! number fewer than `replicas`, it offers copies to up nodes that do not
//! hold it; (b) claims the copies offered to this node from the shared
//! work queue on the catalog's PostgreSQL
//! ([`granary_catalog::replication::WorkQueue`]: `FOR UPDATE SKIP LOCKED`
//! under a lease) and makes each one with the replication that keeps the
//! publisher's signature ([`crate::replicate::replicate_here`]). A holder
//! that is down does not count, so its versions are copied elsewhere; when
//! it comes back it counts again (a copy beyond `replicas` is not removed).
//!
//! What is held where and which nodes are up comes from the federation's
//! location catalog, seen through the small [`Locations`] trait. Only
//! storage nodes count: routers' and clients' copies are caches, never
//! replicas, sources or targets (decision 0107).
//!
//! The plan converges: a node is offered work only once it answers a probe
//! (its heartbeat is fresh *and* an Interest reaches it); copies offered and
//! not yet made count towards `replicas` (one target per missing copy, not
//! one per round); a copy that failed [`Settings::attempts`] times at its
//! target is abandoned there and the next round offers it to the next
//! candidate; the target fetches from every up storage holder it is given
//! (all of them in the forwarding hint), not from one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use granary_packet::Name;

/// One `[[replication]]` table (prefix, replicas): the catalog's typed rule, so
/// that what a config file says and what the catalog's federation settings hold
/// are one type, checked by one routine
/// ([`granary_catalog::settings::check_rules`]).
pub use granary_catalog::ReplicationRule as Rule;

/// A version and the nodes that hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The name (without version).
    pub name: String,
    /// The version.
    pub version: u64,
    /// Node prefixes that hold it (up or not).
    pub holders: Vec<String>,
}

/// What the policy needs of the location catalog.
pub trait Locations: Send + Sync {
    /// The versions held under `prefix` (the newest version of each name
    /// is enough), with their holders.
    fn held_under(&self, prefix: &str) -> Result<Vec<Held>, String>;
    /// The node prefixes that are up now (heard from within the
    /// federation's node timeout).
    fn up_nodes(&self) -> Result<Vec<String>, String>;
}

/// A copy to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The name.
    pub name: String,
    /// The version.
    pub version: u64,
    /// The node to hold the copy.
    pub target: String,
    /// An up node that holds it (the fetch's forwarding hint).
    pub source: String,
}

/// What the shared work queue holds now, as the planner needs it: copies
/// offered and not yet made (`pending`), and copies abandoned at a target
/// (`abandoned`: not offered to that target again), each (name, version,
/// target).
#[derive(Debug, Default, Clone)]
pub struct Queued {
    /// Offered, not made, not abandoned.
    pub pending: BTreeSet<(String, u64, String)>,
    /// Abandoned at their target (it failed too often, or never claimed).
    pub abandoned: BTreeSet<(String, u64, String)>,
}

/// The copies the rules want made now, [`plan_with`] an empty queue.
pub fn plan(rules: &[Rule], locs: &dyn Locations) -> Result<Vec<Offer>, String> {
    plan_with(rules, locs, &Queued::default())
}

/// The copies the rules want made now. Targets are the up nodes that do
/// not hold the version, those given the fewest copies in this plan first
/// (then by name), so that every node planning from the same catalog makes
/// the same plan and the copies spread. Copies already offered to an up
/// node count as on their way (they are offered again, idempotently, not to
/// one more node); a target where the copy was abandoned is passed over for
/// the next candidate. A version with no up holder cannot be copied (nobody
/// can serve it) and is skipped. The most specific rule (longest prefix)
/// applies to a name.
pub fn plan_with(
    rules: &[Rule],
    locs: &dyn Locations,
    queued: &Queued,
) -> Result<Vec<Offer>, String> {
    let up: BTreeSet<String> = locs.up_nodes()?.into_iter().collect();
    let mut rules: Vec<(Name, &Rule)> = rules
        .iter()
        .filter_map(|r| Some((Name::from_uri(&r.prefix).ok()?, r)))
        .collect();
    rules.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    let mut given: BTreeMap<String, usize> = up.iter().map(|n| (n.clone(), 0)).collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (prefix, rule) in &rules {
        for h in locs.held_under(&rule.prefix)? {
            let Ok(n) = Name::from_uri(&h.name) else {
                continue;
            };
            // A name under a more specific rule is that rule's.
            let own = rules
                .iter()
                .find(|(p, _)| p.is_prefix_of(&n))
                .is_some_and(|(p, _)| p == prefix);
            if !own || !seen.insert((h.name.clone(), h.version)) {
                continue;
            }
            let holders_up: Vec<&String> = h.holders.iter().filter(|x| up.contains(*x)).collect();
            let Some(source) = holders_up.first().map(|s| s.to_string()) else {
                continue;
            };
            let mut missing = (rule.replicas as usize).saturating_sub(holders_up.len());
            // Copies on their way to up nodes count: offered again as they are.
            let key = |t: &str| (h.name.clone(), h.version, t.to_string());
            for t in up.iter() {
                if missing == 0 {
                    break;
                }
                if !h.holders.contains(t) && queued.pending.contains(&key(t)) {
                    missing -= 1;
                    *given.entry(t.clone()).or_default() += 1;
                    out.push(Offer {
                        name: h.name.clone(),
                        version: h.version,
                        target: t.clone(),
                        source: source.clone(),
                    });
                }
            }
            for _ in 0..missing {
                let target = given
                    .iter()
                    .filter(|(node, _)| !h.holders.contains(node))
                    .filter(|(node, _)| !queued.abandoned.contains(&key(node)))
                    .filter(|(node, _)| {
                        !out.iter().any(|o: &Offer| {
                            &o.target == *node && o.name == h.name && o.version == h.version
                        })
                    })
                    .min_by_key(|(node, k)| (**k, (*node).clone()))
                    .map(|(node, _)| node.clone());
                let Some(target) = target else { break };
                *given.entry(target.clone()).or_default() += 1;
                out.push(Offer {
                    name: h.name.clone(),
                    version: h.version,
                    target,
                    source: source.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// How often the policy task plans and claims (default of
/// `replication_period`).
pub const PERIOD: Duration = Duration::from_secs(10);
/// How long a claimed copy is this node's before another claimer may take
/// it (a node that died mid-copy).
pub const LEASE: Duration = Duration::from_secs(1800);
/// Wait before a failed copy is tried again (default of
/// `replication_retry`).
pub const RETRY: Duration = Duration::from_secs(60);
/// Tries of one copy at one target before it is abandoned there and
/// offered to the next candidate (default of `replication_attempts`).
pub const ATTEMPTS: u32 = 3;
/// An offer its target has not claimed after this long is abandoned there
/// (a node that is up but does not claim).
pub const UNCLAIMED: Duration = Duration::from_secs(600);
/// An abandoned copy is forgotten after this long: the target may be
/// offered it again (a site that was fixed).
pub const FORGET: Duration = Duration::from_secs(3600);
/// How long a probe of a node waits for its answer.
pub const PROBE: Duration = Duration::from_secs(2);

/// The policy task's timing, from the daemon's config file
/// (`replication_period`, `replication_retry`, `replication_attempts`).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Between rounds.
    pub period: Duration,
    /// Before a failed copy is tried again at the same target.
    pub retry: Duration,
    /// Tries at one target before the copy goes to the next candidate.
    pub attempts: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            period: PERIOD,
            retry: RETRY,
            attempts: ATTEMPTS,
        }
    }
}

impl Settings {
    /// The timing a node's federation settings give (each key unset: its default).
    /// The values were checked where they were read (config file or catalog).
    pub fn from_federation(f: &granary_catalog::FederationSettings) -> Settings {
        let d = Settings::default();
        let secs = |v: Option<f64>, dflt: Duration| {
            v.filter(|s| s.is_finite() && *s > 0.0)
                .map_or(dflt, Duration::from_secs_f64)
        };
        Settings {
            period: secs(f.replication_period, d.period),
            retry: secs(f.replication_retry, d.retry),
            attempts: f
                .replication_attempts
                .filter(|a| *a > 0)
                .unwrap_or(d.attempts),
        }
    }
}

/// The policy a node applies now: its rules and timing, changed while it runs
/// when the federation settings change ([`crate::settings`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// The rules (none: this node only claims what others offer it).
    pub rules: Vec<Rule>,
    /// Timing.
    pub settings: Settings,
}

/// A [`Policy`] shared between the task that applies it and the one that
/// follows the settings, with a count of its changes.
#[derive(Debug, Default)]
pub struct SharedPolicy {
    now: std::sync::RwLock<(u64, Policy)>,
}

impl SharedPolicy {
    /// A shared policy starting at `p`.
    pub fn new(p: Policy) -> Arc<SharedPolicy> {
        Arc::new(SharedPolicy {
            now: std::sync::RwLock::new((0, p)),
        })
    }

    /// The policy now, and how many times it changed.
    pub fn get(&self) -> (u64, Policy) {
        match self.now.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Replaces the policy; true when it changed.
    pub fn set(&self, p: Policy) -> bool {
        let mut g = match self.now.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.1 == p {
            return false;
        }
        g.0 += 1;
        g.1 = p;
        true
    }
}

/// What the policy task needs of its node.
pub struct Task {
    /// The rules and timing, as the federation settings give them now.
    pub policy: Arc<SharedPolicy>,
    /// The location catalog.
    pub locations: Arc<dyn Locations>,
    /// The catalog's PostgreSQL URL (the shared work queue).
    pub url: String,
    /// This node's prefix.
    pub node: Name,
    /// Its repository.
    pub repo: Arc<granary_repo::Repo>,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// Its daemon's socket.
    pub socket: PathBuf,
    /// Its role: only a storage node claims copies.
    pub role: granary_catalog::Role,
}

/// Runs the policy on a thread of its own, for as long as the daemon runs:
/// plan and offer (with rules), then make the copies offered to this node
/// (a storage node). A catalog that cannot be reached is tried again at the
/// next round.
pub fn start(task: Task, rt: tokio::runtime::Handle) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("replication-policy".into())
        .spawn(move || {
            let me = task.node.to_string();
            let mut queue = None;
            let mut last_warning = String::new();
            loop {
                let (changes, policy) = task.policy.get();
                if let Err(e) = round(&task, &policy, &me, &mut queue, &rt) {
                    if e != last_warning {
                        tracing::warn!("replication policy: {e}; trying again");
                        last_warning = e;
                    }
                    queue = None;
                }
                // The period, cut short when the policy changes (a new one
                // applies at once, not after the old period).
                let t = std::time::Instant::now();
                while t.elapsed() < policy.settings.period && task.policy.get().0 == changes {
                    std::thread::sleep(
                        (policy.settings.period - t.elapsed()).min(Duration::from_millis(500)),
                    );
                }
            }
        })
        .map(|_| ())
}

/// The nodes of `nodes` (other than `me`) that answer a probe now, asked at
/// once ([`crate::replicate::answers`]); `me` answers by definition.
fn answering(
    rt: &tokio::runtime::Handle,
    socket: &std::path::Path,
    me: &str,
    nodes: Vec<String>,
) -> BTreeSet<String> {
    rt.block_on(async {
        let mut asks = Vec::new();
        for n in nodes {
            if n == me {
                asks.push((n, None));
                continue;
            }
            let socket = socket.to_path_buf();
            let Ok(name) = Name::from_uri(&n) else {
                continue;
            };
            let h =
                tokio::spawn(async move { crate::replicate::answers(&socket, &name, PROBE).await });
            asks.push((n, Some(h)));
        }
        let mut out = BTreeSet::new();
        for (n, h) in asks {
            let ok = match h {
                None => true,
                Some(h) => h.await.unwrap_or(false),
            };
            if ok {
                out.insert(n);
            }
        }
        out
    })
}

/// [`Locations`] whose up nodes are only those that answered a probe this
/// round: a node whose heartbeat is fresh but that cannot be reached yet
/// (its faces not re-dialled) is neither a target nor a source.
struct Answering<'a> {
    inner: &'a dyn Locations,
    up: Vec<String>,
}

impl Locations for Answering<'_> {
    fn held_under(&self, prefix: &str) -> Result<Vec<Held>, String> {
        self.inner.held_under(prefix)
    }
    fn up_nodes(&self) -> Result<Vec<String>, String> {
        Ok(self.up.clone())
    }
}

fn round(
    task: &Task,
    policy: &Policy,
    me: &str,
    queue: &mut Option<granary_catalog::replication::WorkQueue>,
    rt: &tokio::runtime::Handle,
) -> Result<(), String> {
    // Nothing to plan and nothing to claim: no connection either.
    if policy.rules.is_empty() && task.role != granary_catalog::Role::Storage {
        return Ok(());
    }
    if queue.is_none() {
        *queue = Some(
            granary_catalog::replication::WorkQueue::connect(&task.url)
                .map_err(|e| e.to_string())?,
        );
    }
    let Some(q) = queue.as_mut() else {
        return Ok(());
    };
    let e = |e: granary_catalog::Error| e.to_string();
    if !policy.rules.is_empty() {
        let (given_up, _) = q.forget_abandoned(UNCLAIMED, FORGET).map_err(e)?;
        if given_up > 0 {
            tracing::warn!(
                "replication policy: {given_up} offer(s) not claimed by their target within {UNCLAIMED:?}: offered to the next candidate"
            );
        }
        let queued = Queued {
            pending: q.pending().map_err(e)?.into_iter().collect(),
            abandoned: q
                .abandoned()
                .map_err(e)?
                .into_iter()
                .map(|(n, v, t, _)| (n, v, t))
                .collect(),
        };
        let up = task.locations.up_nodes()?;
        let live = Answering {
            inner: task.locations.as_ref(),
            up: answering(rt, &task.socket, me, up).into_iter().collect(),
        };
        for o in plan_with(&policy.rules, &live, &queued)? {
            if q.offer(&o.name, o.version, &o.target, Some(&o.source), me)
                .map_err(e)?
            {
                tracing::info!(
                    "replication policy: offered {} v={} to {} (from {})",
                    o.name,
                    o.version,
                    o.target,
                    o.source
                );
            }
        }
    }
    if task.role != granary_catalog::Role::Storage {
        return Ok(());
    }
    while let Some(w) = q.claim(me, LEASE).map_err(e)? {
        let attempt = w.attempts + 1;
        if w.attempts >= policy.settings.attempts as i32 {
            // Claimed that often without an outcome (leases that ran out).
            q.abandon(
                w.id,
                &format!("claimed {} times without an outcome", w.attempts),
            )
            .map_err(e)?;
            continue;
        }
        let r = match sources(task, me, &w, rt) {
            Ok(hints) => {
                let req = crate::replicate::Request {
                    name: w.name.clone(),
                    version: Some(w.version),
                    fwhint: hints,
                };
                let id = format!("policy-{}", w.id);
                rt.block_on(crate::replicate::replicate_here(
                    &task.repo,
                    &task.data_dir,
                    &task.socket,
                    &req,
                    &id,
                ))
                .map(|_| ())
            }
            Err(why) => Err(anyhow::anyhow!(why)),
        };
        match r {
            Ok(()) => {
                tracing::info!("replication policy: holds {} v={} now", w.name, w.version);
                q.done(w.id).map_err(e)?;
            }
            Err(err) if attempt >= policy.settings.attempts as i32 => {
                tracing::warn!(
                    "replication policy: copy of {} v={} failed {attempt} times here ({err:#}); abandoned: offered to another node",
                    w.name,
                    w.version
                );
                q.abandon(w.id, &format!("{err:#}")).map_err(e)?;
            }
            Err(err) => {
                tracing::warn!(
                    "replication policy: copy of {} v={} failed (attempt {attempt} of {}): {err:#}",
                    w.name,
                    w.version,
                    policy.settings.attempts
                );
                q.failed(w.id, &format!("{err:#}"), policy.settings.retry)
                    .map_err(e)?;
            }
        }
    }
    Ok(())
}

/// The forwarding hints for claimed work `w`: the up storage holders of
/// the version that answer a probe from this node, the planner's source
/// first. None answering is an error (the attempt counts).
fn sources(
    task: &Task,
    me: &str,
    w: &granary_catalog::replication::Work,
    rt: &tokio::runtime::Handle,
) -> Result<Vec<String>, String> {
    let up: BTreeSet<String> = task.locations.up_nodes()?.into_iter().collect();
    let mut holders: Vec<String> = task
        .locations
        .held_under(&w.name)?
        .into_iter()
        .filter(|h| h.name == w.name && h.version == w.version)
        .flat_map(|h| h.holders)
        .filter(|n| n != me && up.contains(n))
        .collect();
    if let Some(s) = &w.source {
        if let Some(i) = holders.iter().position(|h| h == s) {
            let s = holders.remove(i);
            holders.insert(0, s);
        } else if s != me && up.contains(s) {
            holders.insert(0, s.clone());
        }
    }
    let live = answering(rt, &task.socket, me, holders.clone());
    let hints: Vec<String> = holders.into_iter().filter(|h| live.contains(h)).collect();
    if hints.is_empty() {
        return Err(format!(
            "no up storage node holding {} v={} answers this node",
            w.name, w.version
        ));
    }
    Ok(hints)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A location table in memory (what the location catalog answers).
    struct Table {
        held: Vec<Held>,
        up: Vec<String>,
    }

    impl Locations for Table {
        fn held_under(&self, prefix: &str) -> Result<Vec<Held>, String> {
            let p = Name::from_uri(prefix).map_err(|e| e.to_string())?;
            Ok(self
                .held
                .iter()
                .filter(|h| p.is_prefix_of(&Name::from_uri(&h.name).unwrap()))
                .cloned()
                .collect())
        }
        fn up_nodes(&self) -> Result<Vec<String>, String> {
            Ok(self.up.clone())
        }
    }

    fn held(name: &str, holders: &[&str]) -> Held {
        Held {
            name: name.into(),
            version: 1,
            holders: holders.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn rule(prefix: &str, replicas: u32) -> Rule {
        Rule {
            prefix: prefix.into(),
            replicas,
        }
    }

    #[test]
    fn a_down_holder_does_not_count_and_copies_spread_over_up_nodes() {
        let mut t = Table {
            held: vec![
                held("/cmip6/x", &["/site/a", "/site/b"]),
                held("/cmip6/y", &["/site/a"]),
                held("/other/z", &["/site/a"]),
            ],
            up: vec!["/site/a".into(), "/site/b".into(), "/site/c".into()],
        };
        let rules = [rule("/cmip6", 2)];
        let p = plan(&rules, &t).unwrap();
        // x has two up holders; y one: one copy, to the node given fewest.
        assert_eq!(
            p,
            [Offer {
                name: "/cmip6/y".into(),
                version: 1,
                target: "/site/b".into(),
                source: "/site/a".into()
            }]
        );
        // A is down: x has one up holder (B), y none (skipped: nobody can
        // serve it); x goes to C, fetched from B.
        t.up = vec!["/site/b".into(), "/site/c".into()];
        let p = plan(&rules, &t).unwrap();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(
            (p[0].target.as_str(), p[0].source.as_str()),
            ("/site/c", "/site/b")
        );
        // A is back: the plan is empty again.
        t.up.push("/site/a".into());
        t.held[1].holders.push("/site/b".into());
        assert!(plan(&rules, &t).unwrap().is_empty());
        // More replicas than up nodes: as many as there are.
        let p = plan(&[rule("/other", 5)], &t).unwrap();
        let targets: BTreeSet<_> = p.iter().map(|o| o.target.as_str()).collect();
        assert_eq!(targets, BTreeSet::from(["/site/b", "/site/c"]));
        // The most specific rule wins: /cmip6/y wants 3 under /cmip6/y.
        let p = plan(&[rule("/cmip6", 1), rule("/cmip6/y", 3)], &t).unwrap();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(
            (p[0].name.as_str(), p[0].target.as_str()),
            ("/cmip6/y", "/site/c")
        );
    }

    #[test]
    fn copies_on_their_way_count_and_an_abandoned_target_is_passed_over() {
        let t = Table {
            held: vec![held("/cmip6/x", &["/site/a"])],
            up: vec![
                "/site/a".into(),
                "/site/b".into(),
                "/site/c".into(),
                "/site/d".into(),
            ],
        };
        let rules = [rule("/cmip6", 2)];
        let key = |n: &str| ("/cmip6/x".to_string(), 1u64, n.to_string());
        // Nothing queued: B (first by name).
        let p = plan_with(&rules, &t, &Queued::default()).unwrap();
        let targets: Vec<&str> = p.iter().map(|o| o.target.as_str()).collect();
        assert_eq!(targets, ["/site/b"]);
        // A copy on its way to D counts: offered again to D, to no one else.
        let q = Queued {
            pending: [key("/site/d")].into(),
            ..Default::default()
        };
        let p = plan_with(&rules, &t, &q).unwrap();
        let targets: Vec<&str> = p.iter().map(|o| o.target.as_str()).collect();
        assert_eq!(targets, ["/site/d"]);
        // B gave up on it: the next candidate, C.
        let q = Queued {
            abandoned: [key("/site/b")].into(),
            ..Default::default()
        };
        let p = plan_with(&rules, &t, &q).unwrap();
        let targets: Vec<&str> = p.iter().map(|o| o.target.as_str()).collect();
        assert_eq!(targets, ["/site/c"]);
        // Every candidate gave up: nothing offered (never retried for ever).
        let q = Queued {
            abandoned: [key("/site/b"), key("/site/c"), key("/site/d")].into(),
            ..Default::default()
        };
        assert!(plan_with(&rules, &t, &q).unwrap().is_empty());
        // A pending copy to a node that is not up does not count.
        let q = Queued {
            pending: [key("/site/z")].into(),
            ..Default::default()
        };
        let p = plan_with(&rules, &t, &q).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].target, "/site/b");
    }

    #[test]
    fn timing_comes_from_the_federation_settings_and_changes_are_counted() {
        let f = granary_catalog::FederationSettings {
            replication_period: Some(2.0),
            replication_retry: Some(0.5),
            replication_attempts: Some(5),
            ..Default::default()
        };
        let s = Settings::from_federation(&f);
        assert_eq!(
            (s.period, s.retry, s.attempts),
            (Duration::from_secs(2), Duration::from_millis(500), 5)
        );
        assert_eq!(
            Settings::from_federation(&Default::default()),
            Settings::default()
        );
        let shared = SharedPolicy::new(Policy::default());
        assert!(!shared.set(Policy::default()), "no change");
        let p = Policy {
            rules: vec![rule("/cmip6", 2)],
            settings: s,
        };
        assert!(shared.set(p.clone()));
        assert_eq!(shared.get(), (1, p));
    }
}
