//! The steps of [`Engine::run`]'s loop: fill the window, take a Data, take a Nack,
//! expire timers. Each keeps the window, the RTT estimator and the statistics.

use std::time::Instant;

use granary_packet::types::nack_reason;
use granary_packet::{Data, Interest, InterestFields, Name};

use super::pending::{Pending, Slot};
use super::{
    fail_or_replace, is_scoped, name_hash, Engine, Failure, Job, LinkFields, Stats, Verdict,
};

impl Engine {
    /// Fills the window: retransmissions first, then new requests from the jobs in
    /// turn (`rr` is whose turn it is); the Interests go into `batch`.
    pub(super) fn fill_window(
        &mut self,
        p: &mut Pending,
        jobs: &mut [&mut dyn Job],
        running: &[bool],
        rr: &mut usize,
        batch: &mut Vec<Interest>,
        st: &mut Stats,
    ) {
        let now = Instant::now();
        let cwnd = (self.window.cwnd().floor() as usize).max(1);
        let default_lifetime = self.cfg.lifetime;
        batch.clear();
        while p.in_flight < cwnd {
            let token = if let Some(t) = p.queue.pop_front() {
                match p.entries.get(&t) {
                    Some(e) if e.slot == Slot::Queued => t,
                    _ => continue,
                }
            } else {
                let mut found = None;
                for _ in 0..jobs.len() {
                    let j = *rr % jobs.len();
                    *rr = rr.wrapping_add(1);
                    if !running[j] {
                        continue;
                    }
                    if let Some((key, req)) = jobs[j].next_request() {
                        found = Some((j, key, req));
                        break;
                    }
                }
                let Some((job, key, req)) = found else {
                    break;
                };
                p.add(job, key, req, now)
            };
            let nonce = self.next_nonce();
            let rto = self.rtt.rto();
            let Some(e) = p.entries.get_mut(&token) else {
                continue;
            };
            let lifetime = e.req.lifetime.unwrap_or(default_lifetime);
            let forwarding_hint = if !e.req.forwarding_hint.is_empty() || is_scoped(&e.req.name) {
                e.req.forwarding_hint.clone()
            } else if !self.cfg.forwarding_hint.is_empty() {
                self.cfg.forwarding_hint.clone()
            } else if self.hints.is_empty() {
                Vec::new()
            } else {
                match self.hints.get(&crate::locate::object_of(&e.req.name)) {
                    Some(h) => {
                        e.hint_gen = h.gen;
                        h.current.clone()
                    }
                    None => Vec::new(),
                }
            };
            let f = InterestFields {
                name: e.req.name.clone(),
                can_be_prefix: e.req.can_be_prefix,
                must_be_fresh: e.req.must_be_fresh,
                forwarding_hint,
                app_params: e.req.app_params.clone(),
                nonce: Some(nonce),
                lifetime: Some(lifetime.as_millis() as u64),
                ..Default::default()
            };
            batch.push(f.encode());
            e.sent = now;
            e.gen += 1;
            e.slot = Slot::InFlight;
            let gen = e.gen;
            p.in_flight += 1;
            st.interests += 1;
            // Time out at the RTO, or at the lifetime if that is shorter.
            p.arm(now + rto.min(lifetime), token, gen);
        }
    }

    /// A Data: every request it answers gets it (RTT sampled, window adapted), and
    /// each one's job judges it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_data(
        &mut self,
        p: &mut Pending,
        jobs: &mut [&mut dyn Job],
        running: &[bool],
        d: Data,
        lf: &LinkFields,
        now: Instant,
        st: &mut Stats,
    ) {
        let tokens = p.answered_by(d.name());
        if tokens.is_empty() {
            st.ignored += 1;
            return;
        }
        let mut d = Some(d);
        let n_tokens = tokens.len();
        for (ti, t) in tokens.into_iter().enumerate() {
            let was_in_flight = p.entries.get(&t).is_some_and(|e| e.slot == Slot::InFlight);
            let Some(mut e) = p.take(t, false) else {
                continue;
            };
            // Karn: sample only Interests sent once.
            if e.retx == 0 && was_in_flight {
                let r = now.duration_since(e.sent);
                self.rtt.add(r);
                if self.window.rtt_sample(r.as_secs_f64()) {
                    st.slow_start_exits += 1;
                }
            }
            if lf.congestion_mark.unwrap_or(0) > 0 {
                st.congestion_marks += 1;
                if !self.cfg.ignore_marks && self.may_decrease(e.sent) && self.window.decrease(now)
                {
                    st.decreases_mark += 1;
                }
            } else {
                let srtt = self.rtt.srtt().map(|d| d.as_secs_f64()).unwrap_or(0.1);
                self.window.increase(now, srtt);
            }
            st.max_cwnd = st.max_cwnd.max(self.window.cwnd());
            if !running[e.job] {
                continue;
            }
            let data = if ti + 1 == n_tokens {
                d.take()
            } else {
                d.clone()
            };
            let Some(data) = data else { continue };
            match jobs[e.job].on_data(e.key, data) {
                Verdict::Done(b) => {
                    st.segments += 1;
                    st.bytes += b;
                    if self.cfg.locator.is_some() {
                        let h = name_hash(&e.req.name);
                        if !self.accepted.insert(h) {
                            st.refetched += 1;
                        }
                    }
                    if let Some(f) = self.progress.as_mut() {
                        f(b);
                    }
                }
                Verdict::Again(why) => {
                    st.rejected += 1;
                    if e.retx >= e.req.retries.unwrap_or(self.cfg.retries) {
                        fail_or_replace(jobs, &mut e, Failure::Rejected(why));
                    } else {
                        e.retx += 1;
                        st.retransmissions += 1;
                    }
                    p.requeue(e, t, jobs);
                }
                Verdict::Instead(r) => {
                    st.rejected += 1;
                    st.retransmissions += 1;
                    e.req = r;
                    e.retx = 0;
                    p.requeue(e, t, jobs);
                }
                Verdict::Discard => st.rejected += 1,
                Verdict::Fatal(why) => jobs[e.job].fail(why),
            }
        }
    }

    /// A Nack for `name`: Congestion shrinks the window and Duplicate is sent again
    /// with a new Nonce (both within the retries); any other reason fails over to
    /// another location, or ends the request.
    pub(super) async fn on_nack(
        &mut self,
        p: &mut Pending,
        jobs: &mut [&mut dyn Job],
        name: &Name,
        reason: u64,
        now: Instant,
        st: &mut Stats,
    ) {
        let Some(t) = p.in_flight_named(name) else {
            st.ignored += 1;
            return;
        };
        let Some(mut e) = p.take(t, true) else {
            return;
        };
        let limit = e.req.retries.unwrap_or(self.cfg.retries);
        match reason {
            nack_reason::CONGESTION => {
                st.nacks_congestion += 1;
                if self.may_decrease(e.sent) && self.window.decrease(now) {
                    st.decreases_nack += 1;
                }
                if e.retx >= limit {
                    fail_or_replace(jobs, &mut e, Failure::Nack(reason));
                } else {
                    e.retx += 1;
                    st.retransmissions += 1;
                }
            }
            nack_reason::DUPLICATE => {
                st.nacks_duplicate += 1;
                if e.retx >= limit {
                    fail_or_replace(jobs, &mut e, Failure::Nack(reason));
                } else {
                    e.retx += 1;
                    st.retransmissions += 1;
                }
            }
            _ => {
                st.nacks_other += 1;
                if !self.failover(&mut e, st).await {
                    fail_or_replace(jobs, &mut e, Failure::Nack(reason));
                }
            }
        }
        p.requeue(e, t, jobs);
    }

    /// Timers due: the RTO backs off once per loss episode, the window shrinks, and
    /// the request is sent again, failed over, or given up.
    pub(super) async fn expire(
        &mut self,
        p: &mut Pending,
        jobs: &mut [&mut dyn Job],
        st: &mut Stats,
    ) {
        let now = Instant::now();
        let mut backed_off = false;
        while let Some((t, g)) = p.due(now) {
            let live = p
                .entries
                .get(&t)
                .is_some_and(|e| e.gen == g && e.slot == Slot::InFlight);
            if !live {
                continue;
            }
            let Some(mut e) = p.take(t, false) else {
                continue;
            };
            st.timeouts += 1;
            // Back off once per loss episode: only for an Interest sent after the
            // previous backoff.
            if !backed_off && e.sent >= self.last_backoff {
                self.rtt.backoff();
                self.last_backoff = now;
                backed_off = true;
            }
            if self.may_decrease(e.sent) && self.window.decrease(now) {
                st.decreases_loss += 1;
            }
            let exhausted = e.retx >= e.req.retries.unwrap_or(self.cfg.retries);
            // Timeouts in a row under one hint (or by name): another location, if
            // there is one, before the retries run out.
            if (exhausted || e.retx + 1 >= self.cfg.failover_timeouts)
                && self.failover(&mut e, st).await
            {
                st.retransmissions += 1;
                p.requeue(e, t, jobs);
            } else if exhausted {
                p.delist(&e, t);
                fail_or_replace(jobs, &mut e, Failure::Timeout);
                p.requeue(e, t, jobs);
            } else {
                // Stays findable by name: a late Data still counts.
                e.retx += 1;
                st.retransmissions += 1;
                p.retry(e, t);
            }
        }
    }
}
