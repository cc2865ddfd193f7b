//! The requests a run has out or queued — the consumer's own PIT: by token, by name
//! (a Data or Nack finds its requests), their timers and the send queue.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Instant;

use granary_packet::Name;

use super::{Job, JobState, Request};

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Slot {
    InFlight,
    Queued,
}

pub(super) struct Entry {
    pub(super) job: usize,
    pub(super) key: u64,
    pub(super) req: Request,
    pub(super) sent: Instant,
    /// Transmissions so far beyond the first.
    pub(super) retx: u32,
    /// Incremented per transmission; stale timers are ignored.
    pub(super) gen: u64,
    pub(super) slot: Slot,
    /// Generation of its object's located hint at the last transmission.
    pub(super) hint_gen: u64,
}

/// A run's requests.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) entries: HashMap<u64, Entry>,
    by_name: HashMap<Name, Vec<u64>>,
    /// (when, token, generation): stale generations are skipped.
    timers: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    /// Tokens waiting for the window (retransmissions first).
    pub(super) queue: VecDeque<u64>,
    next_token: u64,
    pub(super) in_flight: usize,
    /// Entries with CanBePrefix (a Data may then answer a shorter name).
    prefix_lookups: usize,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets the requests of jobs that stopped running.
    pub(super) fn drop_stopped(&mut self, running: &[bool]) {
        let gone: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| !running[e.job])
            .map(|(t, _)| *t)
            .collect();
        for t in gone {
            if let Some(e) = self.entries.remove(&t) {
                if e.slot == Slot::InFlight {
                    self.in_flight -= 1;
                }
                self.unlink(&e.req.name, t);
                if e.req.can_be_prefix {
                    self.prefix_lookups -= 1;
                }
            }
        }
    }

    /// A job's new request, queued; its token.
    pub(super) fn add(&mut self, job: usize, key: u64, req: Request, now: Instant) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        self.by_name.entry(req.name.clone()).or_default().push(t);
        if req.can_be_prefix {
            self.prefix_lookups += 1;
        }
        self.entries.insert(
            t,
            Entry {
                job,
                key,
                req,
                sent: now,
                retx: 0,
                gen: 0,
                slot: Slot::Queued,
                hint_gen: 0,
            },
        );
        t
    }

    /// Times the transmission of `t` (generation `gen`) out at `at`.
    pub(super) fn arm(&mut self, at: Instant, t: u64, gen: u64) {
        self.timers.push(Reverse((at, t, gen)));
    }

    /// The earliest live timer.
    pub(super) fn next_deadline(&mut self) -> Option<Instant> {
        loop {
            match self.timers.peek() {
                Some(Reverse((at, t, g))) => match self.entries.get(t) {
                    Some(e) if e.gen == *g && e.slot == Slot::InFlight => break Some(*at),
                    _ => {
                        self.timers.pop();
                    }
                },
                None => break None,
            }
        }
    }

    /// The token of the next timer due by `now` (live or not), taken off.
    pub(super) fn due(&mut self, now: Instant) -> Option<(u64, u64)> {
        let Reverse((at, t, g)) = *self.timers.peek()?;
        if at > now {
            return None;
        }
        self.timers.pop();
        Some((t, g))
    }

    /// The tokens a Data named `name` answers (exact name, and CanBePrefix requests
    /// for a prefix of it), taken off the by-name index.
    pub(super) fn answered_by(&mut self, name: &Name) -> Vec<u64> {
        let mut tokens = self.by_name.remove(name).unwrap_or_default();
        if self.prefix_lookups > 0 {
            for n in (0..name.len()).rev() {
                let p = name.prefix(n as isize);
                if let Some(v) = self.by_name.get_mut(&p) {
                    let entries = &self.entries;
                    let (mine, rest): (Vec<u64>, Vec<u64>) = v
                        .iter()
                        .partition(|t| entries.get(t).is_some_and(|e| e.req.can_be_prefix));
                    tokens.extend(mine);
                    *v = rest;
                    if v.is_empty() {
                        self.by_name.remove(&p);
                    }
                }
            }
        }
        tokens
    }

    /// The request in flight under `name` (a Nack answers the transmission with its
    /// Nonce; an older one's Nack is stale).
    pub(super) fn in_flight_named(&self, name: &Name) -> Option<u64> {
        self.by_name.get(name)?.iter().copied().find(|t| {
            self.entries
                .get(t)
                .is_some_and(|e| e.slot == Slot::InFlight)
        })
    }

    /// Takes entry `t` off (counters kept right); it stays findable by name unless
    /// `unlink`.
    pub(super) fn take(&mut self, t: u64, unlink: bool) -> Option<Entry> {
        let e = self.entries.remove(&t)?;
        if e.slot == Slot::InFlight {
            self.in_flight -= 1;
        }
        if unlink {
            self.unlink(&e.req.name, t);
        }
        // Not findable by name any more (answered, or unlinked): no longer a prefix
        // lookup until requeued.
        if e.req.can_be_prefix && (unlink || !self.listed(&e.req.name, t)) {
            self.prefix_lookups -= 1;
        }
        Some(e)
    }

    fn listed(&self, name: &Name, t: u64) -> bool {
        self.by_name.get(name).is_some_and(|v| v.contains(&t))
    }

    /// Puts an entry back in the send queue, unless its job stopped (or it is dead,
    /// `retx == u32::MAX`).
    pub(super) fn requeue(&mut self, mut e: Entry, t: u64, jobs: &[&mut dyn Job]) {
        if jobs[e.job].state() != JobState::Running || e.retx == u32::MAX {
            return;
        }
        let list = self.by_name.entry(e.req.name.clone()).or_default();
        if !list.contains(&t) {
            list.push(t);
            if e.req.can_be_prefix {
                self.prefix_lookups += 1;
            }
        }
        e.slot = Slot::Queued;
        self.entries.insert(t, e);
        self.queue.push_back(t);
    }

    /// Back in the queue after a timeout, still findable by name (a late Data still
    /// counts).
    pub(super) fn retry(&mut self, mut e: Entry, t: u64) {
        e.slot = Slot::Queued;
        self.entries.insert(t, e);
        self.queue.push_back(t);
    }

    /// No longer findable by name (its retries ran out).
    pub(super) fn delist(&mut self, e: &Entry, t: u64) {
        self.unlink(&e.req.name, t);
        if e.req.can_be_prefix {
            self.prefix_lookups -= 1;
        }
    }

    fn unlink(&mut self, name: &Name, t: u64) {
        if let Some(v) = self.by_name.get_mut(name) {
            v.retain(|x| *x != t);
            if v.is_empty() {
                self.by_name.remove(name);
            }
        }
    }
}
