//! Answers of searches made lately, kept until the index changes: the page's
//! record ids (or dataset ids), the total and the facet counts, keyed by the
//! whole query. A search engine's result cache (Solr's `queryResultCache`): many
//! clients ask the same searches (a portal's first page, the facets a notebook
//! pins, a client paging), and each answer costs a pass over every match.
//! The records of a page are still read from the database on each call, so a
//! record's content is never served from here.

use std::collections::{BTreeMap, HashMap};

/// Answers kept (each at most [`MAX_IDS`] ids and its facet counts).
const CAPACITY: usize = 256;
/// Pages of more ids are not kept (large pages are rarely asked twice).
pub(crate) const MAX_IDS: usize = 1_000;
/// Larger dataset sets are not kept (bytes of the serialized bitmap).
const MAX_BITMAP: usize = 4 << 20;
/// All kept answers together, bytes (ids, bitmaps and counts, roughly): with
/// [`CAPACITY`] the second bound, so that many large answers cannot add up.
const BUDGET: usize = 64 << 20;

pub(crate) type Counts = BTreeMap<String, Vec<(String, u64)>>;

/// One kept answer.
#[derive(Clone)]
pub(crate) struct Answer<T> {
    pub total: u64,
    pub ids: Vec<T>,
    pub counts: Counts,
}

/// The datasets a dataset search matches, whatever page is asked: paging
/// through them (a STAC client's `next` links) costs a page, not a pass.
#[derive(Clone)]
pub(crate) struct Hits {
    pub hit: std::sync::Arc<roaring::RoaringBitmap>,
    pub counts: Counts,
}

struct Slot {
    files: Option<Answer<i64>>,
    datasets: Option<Hits>,
    used: u64,
    /// Bytes this slot's answers hold, roughly.
    bytes: usize,
}

fn counts_bytes(c: &Counts) -> usize {
    c.iter()
        .map(|(k, vs)| k.len() + vs.iter().map(|(v, _)| v.len() + 32).sum::<usize>())
        .sum()
}

impl Slot {
    fn weigh(&self) -> usize {
        let f = self
            .files
            .as_ref()
            .map_or(0, |a| a.ids.len() * 8 + counts_bytes(&a.counts));
        let d = self
            .datasets
            .as_ref()
            .map_or(0, |h| h.hit.serialized_size() + counts_bytes(&h.counts));
        64 + f + d
    }
}

/// Which state of the index an answer is for: the change feed's epoch and
/// sequence number it has applied, and its generation (bumped when a position
/// is reused). Any change to the index changes one of them.
pub(crate) type Gen = (i64, i64, u64);

/// The cache; everything in it is for the index state `gen`.
#[derive(Default)]
pub(crate) struct Results {
    gen: Gen,
    map: HashMap<String, Slot>,
    tick: u64,
    /// Bytes of every slot together.
    bytes: usize,
    pub hits: u64,
    pub misses: u64,
}

impl Results {
    fn at(&mut self, gen: Gen) {
        if gen != self.gen {
            self.map.clear();
            self.bytes = 0;
            self.gen = gen;
        }
    }

    pub fn files(&mut self, gen: Gen, key: &str) -> Option<Answer<i64>> {
        self.get(gen, key, |s| s.files.clone())
    }

    pub fn datasets(&mut self, gen: Gen, key: &str) -> Option<Hits> {
        self.get(gen, key, |s| s.datasets.clone())
    }

    fn get<T>(&mut self, gen: Gen, key: &str, f: impl Fn(&Slot) -> Option<T>) -> Option<T> {
        self.at(gen);
        self.tick += 1;
        let tick = self.tick;
        let got = self.map.get_mut(key).and_then(|s| {
            s.used = tick;
            f(s)
        });
        if got.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        got
    }

    pub fn put_files(&mut self, gen: Gen, key: String, a: Answer<i64>) {
        if a.ids.len() <= MAX_IDS {
            self.put(gen, key, |s| s.files = Some(a));
        }
    }

    pub fn put_datasets(&mut self, gen: Gen, key: String, h: Hits) {
        // At most a few MiB of bitmap per answer (a million datasets in runs
        // is far less).
        if h.hit.serialized_size() <= MAX_BITMAP {
            self.put(gen, key, |s| s.datasets = Some(h));
        }
    }

    fn put(&mut self, gen: Gen, key: String, f: impl FnOnce(&mut Slot)) {
        self.at(gen);
        self.tick += 1;
        let used = self.tick;
        let s = self.map.entry(key.clone()).or_insert(Slot {
            files: None,
            datasets: None,
            used,
            bytes: 0,
        });
        s.used = used;
        f(s);
        let before = s.bytes;
        s.bytes = s.weigh();
        self.bytes = self.bytes + s.bytes - before;
        // The least recently used go first, never the one just kept.
        while self.map.len() > CAPACITY || (self.bytes > BUDGET && self.map.len() > 1) {
            let Some(old) = self
                .map
                .iter()
                .filter(|(k, _)| **k != key)
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = self.map.remove(&old) {
                self.bytes -= gone.bytes;
            }
        }
    }
}

/// Searches being computed, by their cache key: a second caller of the same
/// search waits for the first one's answer (then finds it in the cache) instead
/// of computing it again beside it. A crowd asking a portal's first page at once
/// costs one pass over the matches, not one per search thread.
#[derive(Default)]
pub(crate) struct Flights {
    map: std::sync::Mutex<HashMap<String, std::sync::Arc<Flight>>>,
}

#[derive(Default)]
pub(crate) struct Flight {
    done: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

/// Whose turn it is to compute a search.
pub(crate) enum Turn<'a> {
    /// This caller computes it; the others are woken when this is dropped
    /// (an error or a panic included).
    Lead(#[allow(dead_code)] Lead<'a>),
    /// Another caller is computing it: wait, then look in the cache again.
    Wait(std::sync::Arc<Flight>),
}

pub(crate) struct Lead<'a> {
    flights: &'a Flights,
    key: String,
    flight: std::sync::Arc<Flight>,
}

impl Flights {
    pub fn turn(&self, key: &str) -> Turn<'_> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = map.get(key) {
            return Turn::Wait(f.clone());
        }
        let flight = std::sync::Arc::new(Flight::default());
        map.insert(key.to_string(), flight.clone());
        Turn::Lead(Lead {
            flights: self,
            key: key.to_string(),
            flight,
        })
    }
}

impl Flight {
    /// Returns once the leader is done (whatever its outcome).
    pub fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        self.flights
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
        *self.flight.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.flight.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: usize) -> Answer<i64> {
        Answer {
            total: n as u64,
            ids: (0..n as i64).collect(),
            counts: Counts::new(),
        }
    }

    /// One leader per key at a time; the others wait for it, and the next
    /// caller after it leads again.
    #[test]
    fn one_caller_computes_a_search_the_others_wait() {
        let f = Flights::default();
        let lead = match f.turn("k") {
            Turn::Lead(l) => l,
            Turn::Wait(_) => panic!("the first caller leads"),
        };
        let waiter = match f.turn("k") {
            Turn::Wait(w) => w,
            Turn::Lead(_) => panic!("a second caller waits"),
        };
        assert!(
            matches!(f.turn("other"), Turn::Lead(_)),
            "keys are separate"
        );
        let t = std::thread::spawn(move || waiter.wait());
        drop(lead);
        t.join().unwrap();
        assert!(
            matches!(f.turn("k"), Turn::Lead(_)),
            "the key is free again"
        );
    }

    #[test]
    fn answers_are_kept_per_generation_and_bounded() {
        let mut r = Results::default();
        r.put_files((0, 1, 0), "q".into(), a(3));
        assert_eq!(r.files((0, 1, 0), "q").unwrap().ids, vec![0, 1, 2]);
        // Another generation of the index: nothing kept.
        assert!(r.files((0, 2, 0), "q").is_none());
        assert!(r.files((0, 1, 0), "q").is_none());
        // A large page is not kept.
        r.put_files((0, 1, 0), "big".into(), a(MAX_IDS + 1));
        assert!(r.files((0, 1, 0), "big").is_none());
        // At capacity the least recently used goes.
        for i in 0..CAPACITY {
            r.put_files((0, 1, 0), format!("k{i}"), a(1));
        }
        assert!(r.files((0, 1, 0), "k0").is_some());
        r.put_files((0, 1, 0), "new".into(), a(1));
        assert_eq!(r.map.len(), CAPACITY);
        assert!(r.files((0, 1, 0), "k0").is_some(), "k0 was used last");
        assert!(
            r.files((0, 1, 0), "k1").is_none(),
            "k1 was the least recently used"
        );
    }
}
