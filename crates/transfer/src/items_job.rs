//! A ready-made job for a list of independent items, each with ordered
//! alternative requests and its own check — e.g. a content-addressed chunk
//! asked first of a neighbour's cache with a short lifetime, then of the
//! producer. Everything shares the engine's window with whatever else runs.

use std::collections::VecDeque;

use granary_packet::Data;

use crate::engine::{Failure, Job, JobState, Recovery, Request, Verdict};

/// Checks a Data for an item (hash, signature…); `Err` rejects it.
pub type Check = Box<dyn FnMut(&Data) -> Result<(), String> + Send>;

/// One thing to fetch.
pub struct Item {
    /// Requests to try in order: the next one is used when the previous
    /// runs out of retries, gets a NoRoute Nack, or keeps failing `check`.
    pub requests: Vec<Request>,
    /// The item's check.
    pub check: Check,
    /// When every request failed: true = give the item up (reported in
    /// [`ItemsJob::failed`]), false = fail the whole job.
    pub optional: bool,
}

/// What became of an item.
#[allow(clippy::large_enum_variant)] // one per item, moved once
pub enum Outcome {
    /// Fetched and checked: the Data and which request (index) gave it.
    Got(Data, usize),
    /// Every request failed (optional items only); the last reason.
    Failed(String),
}

struct Slot {
    item: Item,
    at: usize,
    rejected: u32,
    outcome: Option<Outcome>,
}

/// Called as each item completes.
pub type OnDone = Box<dyn FnMut(usize, &Outcome) + Send>;

/// Rejections of one request's Data before moving to the next request.
const REJECTS_PER_REQUEST: u32 = 2;

/// Fetches items; results in item order via [`ItemsJob::into_outcomes`], or
/// streamed to a callback as they complete.
pub struct ItemsJob {
    slots: Vec<Slot>,
    todo: VecDeque<usize>,
    left: usize,
    error: Option<String>,
    on_done: Option<OnDone>,
}

impl ItemsJob {
    /// A job for `items`.
    pub fn new(items: Vec<Item>) -> ItemsJob {
        let left = items.len();
        ItemsJob {
            todo: (0..items.len()).collect(),
            slots: items
                .into_iter()
                .map(|item| Slot {
                    item,
                    at: 0,
                    rejected: 0,
                    outcome: None,
                })
                .collect(),
            left,
            error: None,
            on_done: None,
        }
    }

    /// Calls `f(index, outcome)` as each item completes.
    pub fn on_done(mut self, f: impl FnMut(usize, &Outcome) + Send + 'static) -> Self {
        self.on_done = Some(Box::new(f));
        self
    }

    /// Indexes of optional items that could not be fetched.
    pub fn failed(&self) -> Vec<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.outcome, Some(Outcome::Failed(_))))
            .map(|(i, _)| i)
            .collect()
    }

    /// The outcomes, in item order (`None`: not completed).
    pub fn into_outcomes(self) -> Vec<Option<Outcome>> {
        self.slots.into_iter().map(|s| s.outcome).collect()
    }

    fn finish(&mut self, i: usize, o: Outcome) {
        if let Some(f) = self.on_done.as_mut() {
            f(i, &o);
        }
        self.slots[i].outcome = Some(o);
        self.left -= 1;
    }

    /// The next request of item `i`, or what to do when there is none.
    fn advance(&mut self, i: usize, why: String) -> Recovery {
        let s = &mut self.slots[i];
        s.at += 1;
        s.rejected = 0;
        match s.item.requests.get(s.at) {
            Some(r) => Recovery::Instead(r.clone()),
            None if s.item.optional => {
                self.finish(i, Outcome::Failed(why));
                Recovery::GiveUp
            }
            None => Recovery::Fail,
        }
    }
}

impl Job for ItemsJob {
    fn next_request(&mut self) -> Option<(u64, Request)> {
        loop {
            let i = self.todo.pop_front()?;
            let s = &self.slots[i];
            match s.item.requests.first() {
                Some(r) => return Some((i as u64, r.clone())),
                None => {
                    if s.item.optional {
                        self.finish(i, Outcome::Failed("no request".into()));
                    } else {
                        self.error = Some(format!("item {i} has no request"));
                        return None;
                    }
                }
            }
        }
    }

    fn on_data(&mut self, key: u64, data: Data) -> Verdict {
        let i = key as usize;
        let Some(s) = self.slots.get_mut(i) else {
            return Verdict::Done(0);
        };
        if s.outcome.is_some() {
            return Verdict::Done(0);
        }
        match (s.item.check)(&data) {
            Ok(()) => {
                let n = data.content().len() as u64;
                let at = s.at;
                self.finish(i, Outcome::Got(data, at));
                Verdict::Done(n)
            }
            Err(why) => {
                s.rejected += 1;
                if s.rejected <= REJECTS_PER_REQUEST {
                    let mut r = s.item.requests[s.at].clone();
                    r.must_be_fresh = true;
                    return Verdict::Instead(r);
                }
                match self.advance(i, why.clone()) {
                    Recovery::Instead(r) => Verdict::Instead(r),
                    Recovery::GiveUp => Verdict::Discard,
                    Recovery::Fail => Verdict::Fatal(format!(
                        "{}: failed its check {} times ({why})",
                        data.name(),
                        REJECTS_PER_REQUEST + 1
                    )),
                }
            }
        }
    }

    fn on_failure(&mut self, key: u64, why: &Failure) -> Recovery {
        self.advance(key as usize, why.to_string())
    }

    fn state(&self) -> JobState {
        match &self.error {
            Some(e) => JobState::Failed(e.clone()),
            None if self.left == 0 => JobState::Done,
            None => JobState::Running,
        }
    }

    fn fail(&mut self, error: String) {
        self.error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::responder;
    use crate::{Config, Engine};
    use granary_packet::Name;
    use std::time::Duration;

    fn req(uri: &str, lifetime_ms: Option<u64>, retries: Option<u32>) -> Request {
        let mut r = Request::new(Name::from_uri(uri).unwrap());
        r.lifetime = lifetime_ms.map(Duration::from_millis);
        r.retries = retries;
        r
    }

    fn accept() -> Check {
        Box::new(|_| Ok(()))
    }

    #[tokio::test]
    async fn alternatives_checks_and_optional_items() {
        let mut link = responder();
        let mut e = Engine::new(Config::default());
        let items = vec![
            // A neighbour that does not answer (short lifetime), then the producer.
            Item {
                requests: vec![req("/slow/c1", Some(40), Some(0)), req("/a/c1", None, None)],
                check: accept(),
                optional: false,
            },
            // The first source's bytes fail the check: the second is used.
            Item {
                requests: vec![req("/a/bad", None, None), req("/a/good", None, None)],
                check: Box::new(|d| {
                    if d.name().to_string().ends_with("bad") {
                        Err("hash mismatch".into())
                    } else {
                        Ok(())
                    }
                }),
                optional: false,
            },
            // No route anywhere, optional: given up, the job goes on.
            Item {
                requests: vec![req("/none/x", None, None)],
                check: accept(),
                optional: true,
            },
        ];
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let d2 = done.clone();
        let mut job = ItemsJob::new(items).on_done(move |_, _| {
            d2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let st = e.run(&mut link, &mut [&mut job]).await.unwrap();
        assert_eq!(job.state(), JobState::Done);
        assert_eq!(job.failed(), vec![2]);
        assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(st.rejected, 3, "the bad source was asked 3 times: {st:?}");
        let out = job.into_outcomes();
        match &out[0] {
            Some(Outcome::Got(d, 1)) => assert_eq!(d.name().to_string(), "/a/c1"),
            _ => panic!("item 0"),
        }
        match &out[1] {
            Some(Outcome::Got(d, 1)) => assert_eq!(d.name().to_string(), "/a/good"),
            _ => panic!("item 1"),
        }
    }

    #[tokio::test]
    async fn a_required_item_that_cannot_be_fetched_fails_the_job() {
        let mut link = responder();
        let mut e = Engine::new(Config::default());
        let mut job = ItemsJob::new(vec![Item {
            requests: vec![req("/none/y", None, None)],
            check: accept(),
            optional: false,
        }]);
        e.run(&mut link, &mut [&mut job]).await.unwrap();
        match job.state() {
            JobState::Failed(m) => assert!(m.contains("/none/y"), "{m}"),
            s => panic!("{s:?}"),
        }
    }
}
