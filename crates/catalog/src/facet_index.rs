//! The in-memory facet index: dictionary-encoded facet columns, a roaring posting list
//! per facet value, a name-ordered map, and the set of latest versions. Filters, counts,
//! sorting and paging are answered here. Free text is answered here too when the back end
//! hands each record's words to the index (PostgreSQL: a posting list per word, see
//! [`Words`]); otherwise the database answers it with record ids (SQLite's FTS5).
//!
//! Positions are assigned in record-id order (`rids` is strictly increasing), so a
//! sorted list of record ids (what free-text search returns) becomes a bitmap of
//! positions by one merge, without a hash lookup per hit. A removed record leaves a
//! hole; holes, and record ids that arrive out of order (two writers on PostgreSQL),
//! are folded away by a rebuild (`compact`).

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use roaring::RoaringBitmap;

/// Dictionaries hash facet values with foldhash (fast, randomly seeded per process).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use crate::feed::IndexRow;
use crate::query::{FacetSel, Query, Sort};
use crate::record::decode_facets;

mod datasets;

const NONE: u32 = u32::MAX;

struct Slot {
    name: Arc<str>,
    version: u64,
    size: u64,
    /// `time_start` and `time_end` in one allocation (see [`pack_times`]).
    times: Option<Box<str>>,
}

/// Both times in one string: a flag character (`0` none, `1` start, `2` end, `3` both),
/// then start, `\x1f`, end. Times hold no control characters (validated).
fn pack_times(s: Option<String>, e: Option<String>) -> Option<Box<str>> {
    let flag = match (&s, &e) {
        (None, None) => return None,
        (Some(_), None) => '1',
        (None, Some(_)) => '2',
        (Some(_), Some(_)) => '3',
    };
    let mut out = String::with_capacity(
        2 + s.as_ref().map_or(0, |x| x.len()) + e.as_ref().map_or(0, |x| x.len()),
    );
    out.push(flag);
    out.push_str(s.as_deref().unwrap_or(""));
    out.push('\x1f');
    out.push_str(e.as_deref().unwrap_or(""));
    Some(out.into_boxed_str())
}

fn unpack_times(t: Option<&str>) -> (Option<&str>, Option<&str>) {
    let Some(t) = t else {
        return (None, None);
    };
    let flag = t.as_bytes().first().copied().unwrap_or(b'0');
    let rest = t.get(1..).unwrap_or("");
    let (s, e) = rest.split_once('\x1f').unwrap_or((rest, ""));
    (
        (flag == b'1' || flag == b'3').then_some(s),
        (flag == b'2' || flag == b'3').then_some(e),
    )
}

impl Slot {
    fn times(&self) -> (Option<&str>, Option<&str>) {
        unpack_times(self.times.as_deref())
    }
}

struct Col {
    key: String,
    dict: HashMap<Box<str>, u32>,
    values: Vec<Box<str>>,
    /// Per position: the value's code, or NONE.
    codes: Vec<u32>,
    post: Vec<RoaringBitmap>,
    /// Per value: how many latest versions carry it (the unfiltered counts).
    latest_n: Vec<u64>,
}

impl Col {
    fn new(key: &str, positions: usize) -> Col {
        Col {
            key: key.to_string(),
            dict: HashMap::default(),
            values: Vec::new(),
            codes: vec![NONE; positions],
            post: Vec::new(),
            latest_n: Vec::new(),
        }
    }

    fn code(&mut self, v: &str) -> u32 {
        if let Some(&c) = self.dict.get(v) {
            return c;
        }
        let c = self.values.len() as u32;
        self.values.push(v.into());
        self.dict.insert(v.into(), c);
        self.post.push(RoaringBitmap::new());
        self.latest_n.push(0);
        c
    }
}

/// Free-text words → positions, for back ends that hand the index each record's words
/// ([`IndexRow::words`]). PostgreSQL's text index visits a table row for every match,
/// so the first ask of a word held by a fifth of 10 M records took longer than a
/// request's deadline; here it is one bitmap. A position's old words are taken out when
/// its record is replaced in place ([`Index::apply`]); a removed record's stay until the
/// next rebuild, unseen, since every search intersects with the live positions.
#[derive(Default)]
struct Words {
    dict: HashMap<Box<str>, u32>,
    post: Vec<RoaringBitmap>,
}

impl Words {
    fn code(&mut self, w: &str) -> usize {
        if let Some(&c) = self.dict.get(w) {
            return c as usize;
        }
        let c = self.post.len();
        self.post.push(RoaringBitmap::new());
        self.dict.insert(w.into(), c as u32);
        c
    }

    /// Adds position `i` to the posting list of each word of `words`.
    fn add(&mut self, words: &str, i: u32) {
        for w in words.split(' ').filter(|w| !w.is_empty()) {
            let c = self.code(w);
            let p = &mut self.post[c];
            if p.try_push(i).is_err() {
                p.insert(i);
            }
        }
    }
}

/// A fresh generation number (never reused in this process).
fn next_gen() -> u64 {
    static GEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[derive(Default)]
pub(crate) struct Index {
    /// (epoch, seq) of the storage state this index reflects; epoch -1 = never loaded.
    pub epoch: i64,
    pub seq: i64,
    /// Changes whenever positions are renumbered or a record is replaced in place: a
    /// cached word → positions bitmap is valid only within one generation (and then
    /// only needs the record ids appended after it).
    pub gen: u64,
    /// Record id per position, strictly increasing (a hole keeps its old id).
    rids: Vec<i64>,
    slots: Vec<Option<Slot>>,
    alive: RoaringBitmap,
    latest: RoaringBitmap,
    order: BTreeMap<(Arc<str>, u64), u32>,
    cols: Vec<Col>,
    col_ix: HashMap<String, usize>,
    /// Positions whose dataset has a newer DRS version (computed when first asked
    /// for after a change).
    stale: std::sync::OnceLock<RoaringBitmap>,
    /// The datasets no newer DRS version of whose directory is held (computed when
    /// first asked for after a change).
    latest_datasets: std::sync::OnceLock<RoaringBitmap>,
    /// The datasets, kept up to date whenever the versions of a name change
    /// ([`Index::relatest`], [`Index::unset`]).
    ds: datasets::Datasets,
    words: Words,
}

/// The facet holding a record's DRS (dataset) version, e.g. `v20190429`.
pub const DATASET_VERSION_FACET: &str = "version";

impl Index {
    pub fn new() -> Index {
        Index {
            epoch: -1,
            gen: next_gen(),
            ..Default::default()
        }
    }

    /// The highest record id held (0 when empty).
    pub fn max_rid(&self) -> i64 {
        self.rids.last().copied().unwrap_or(0)
    }

    pub fn len(&self) -> u64 {
        self.alive.len()
    }

    /// The facet keys that some record holds a value of, sorted.
    pub fn facet_keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .cols
            .iter()
            .filter(|c| c.post.iter().any(|p| !p.is_disjoint(&self.alive)))
            .map(|c| c.key.to_string())
            .collect();
        k.sort_unstable();
        k
    }

    /// (name, version) of every record held.
    pub fn keys(&self) -> Vec<(String, u64)> {
        self.alive
            .iter()
            .filter_map(|p| self.slots.get(p as usize)?.as_ref())
            .map(|s| (s.name.to_string(), s.version))
            .collect()
    }

    fn col_mut(&mut self, key: &str) -> usize {
        if let Some(&j) = self.col_ix.get(key) {
            return j;
        }
        let j = self.cols.len();
        self.cols.push(Col::new(key, self.slots.len()));
        self.col_ix.insert(key.to_string(), j);
        j
    }

    fn col(&self, key: &str) -> Option<&Col> {
        self.col_ix.get(key).map(|&j| &self.cols[j])
    }

    fn pos_of(&self, rid: i64) -> Option<u32> {
        self.rids.binary_search(&rid).ok().map(|p| p as u32)
    }

    fn set_latest(&mut self, i: u32, on: bool) {
        if self.latest.contains(i) == on {
            return;
        }
        if on {
            self.latest.insert(i);
        } else {
            self.latest.remove(i);
        }
        for col in &mut self.cols {
            let c = col.codes[i as usize];
            if c != NONE {
                let n = &mut col.latest_n[c as usize];
                *n = if on { *n + 1 } else { n.saturating_sub(1) };
            }
        }
    }

    /// Empties position `i`; returns the name it held.
    fn unset(&mut self, i: u32) -> Option<Arc<str>> {
        if self.slots.get(i as usize)?.is_none() {
            return None;
        }
        self.set_latest(i, false);
        self.ds_remove(i);
        let slot = self.slots[i as usize].take()?;
        self.alive.remove(i);
        self.order.remove(&(slot.name.clone(), slot.version));
        for col in &mut self.cols {
            let c = &mut col.codes[i as usize];
            if *c != NONE {
                col.post[*c as usize].remove(i);
                *c = NONE;
            }
        }
        Some(slot.name)
    }

    /// Recomputes which version of `name` is the latest.
    fn relatest(&mut self, name: &Arc<str>) {
        let range = (
            Bound::Included((name.clone(), 0)),
            Bound::Included((name.clone(), u64::MAX)),
        );
        let all: Vec<u32> = self.order.range(range).map(|(_, &i)| i).collect();
        if let Some((&last, rest)) = all.split_last() {
            for &i in rest {
                self.set_latest(i, false);
            }
            self.set_latest(last, true);
        }
        self.ds_name(&all);
    }

    /// Positions holding `word` (live or not: callers intersect), when the back end
    /// hands the index its records' words.
    pub fn word(&self, word: &str) -> RoaringBitmap {
        match self.words.dict.get(word) {
            Some(&c) => self.words.post[c as usize].clone(),
            None => RoaringBitmap::new(),
        }
    }

    /// Fills the empty position `i` with `r`.
    fn set(&mut self, i: u32, r: IndexRow) {
        if let Some(w) = r.words.as_deref() {
            self.words.add(w, i);
        }
        let name: Arc<str> = Arc::from(r.name);
        for (k, v) in decode_facets(&r.facets) {
            let j = self.col_mut(k);
            let col = &mut self.cols[j];
            let c = col.code(v);
            let old = std::mem::replace(&mut col.codes[i as usize], c);
            if old != NONE {
                col.post[old as usize].remove(i); // a repeated key: the last one wins
            }
            col.post[c as usize].insert(i);
        }
        self.slots[i as usize] = Some(Slot {
            name: name.clone(),
            version: r.version,
            size: r.size,
            times: pack_times(r.time_start, r.time_end),
        });
        self.alive.insert(i);
        if let Some(prev) = self.order.insert((name.clone(), r.version), i) {
            // Two record ids for one (name, version): storage forbids it; keep the newer.
            if prev != i {
                self.unset(prev);
                self.order.insert((name.clone(), r.version), i);
            }
        }
        self.relatest(&name);
    }

    /// Applies a batch of the change feed: upserted rows, then removed record ids.
    pub fn apply(&mut self, mut rows: Vec<IndexRow>, removed: &[i64]) {
        rows.sort_by_key(|r| r.rid);
        // Records replaced in place lose their old words first (once per batch: one
        // pass over the posting lists, not one per row).
        if !self.words.post.is_empty() {
            let replaced: RoaringBitmap = rows.iter().filter_map(|r| self.pos_of(r.rid)).collect();
            if !replaced.is_empty() {
                for p in &mut self.words.post {
                    *p -= &replaced;
                }
            }
        }
        let mut late = Vec::new();
        for r in rows {
            match self.rids.binary_search(&r.rid) {
                Ok(p) => {
                    self.gen = next_gen();
                    let i = p as u32;
                    if let Some(old) = self.unset(i) {
                        self.relatest(&old);
                    }
                    self.set(i, r);
                }
                Err(p) if p == self.rids.len() => {
                    let i = self.rids.len() as u32;
                    self.rids.push(r.rid);
                    self.slots.push(None);
                    for col in &mut self.cols {
                        col.codes.push(NONE);
                    }
                    self.set(i, r);
                }
                Err(_) => late.push(r),
            }
        }
        for &rid in removed {
            if let Some(i) = self.pos_of(rid) {
                if let Some(name) = self.unset(i) {
                    self.relatest(&name);
                }
            }
        }
        self.stale = std::sync::OnceLock::new();
        self.latest_datasets = std::sync::OnceLock::new();
        let holes = self.slots.len() as u64 - self.alive.len();
        if !late.is_empty() || holes > 4096 && holes > self.alive.len() {
            self.compact(late);
        }
    }

    /// Rebuilds the index from its live rows plus `extra`, in record-id order.
    fn compact(&mut self, extra: Vec<IndexRow>) {
        let extra_n = extra.len();
        let mut rows = extra;
        for (p, s) in self.slots.iter().enumerate() {
            let Some(s) = s else { continue };
            let mut facets = String::new();
            for col in &self.cols {
                let c = col.codes[p];
                if c != NONE {
                    if !facets.is_empty() {
                        facets.push('\x1e');
                    }
                    facets.push_str(&col.key);
                    facets.push('\x1f');
                    facets.push_str(&col.values[c as usize]);
                }
            }
            let (ts, te) = s.times();
            rows.push(IndexRow {
                rid: self.rids[p],
                name: s.name.to_string(),
                version: s.version,
                size: s.size,
                time_start: ts.map(str::to_string),
                time_end: te.map(str::to_string),
                facets,
                // Carried over below, position by position.
                words: None,
            });
        }
        // Rows given anew (`extra`) bring their own words and replace the old ones.
        let mut fresh: Vec<i64> = rows.iter().take(extra_n).map(|r| r.rid).collect();
        fresh.sort_unstable();
        rows.sort_by_key(|r| r.rid);
        rows.dedup_by_key(|r| r.rid);
        let mut b = Builder::new();
        for r in rows {
            b.push(r);
        }
        let (epoch, seq) = (self.epoch, self.seq);
        let old = std::mem::replace(self, b.finish());
        self.epoch = epoch;
        self.seq = seq;
        self.gen = next_gen();
        self.carry_words(old, &fresh);
    }

    /// Moves the words of `old`'s live positions to their positions here (record ids
    /// keep their order, so each list stays sorted), except for the record ids in
    /// `fresh` (sorted), whose rows came with words of their own.
    fn carry_words(&mut self, old: Index, fresh: &[i64]) {
        if old.words.post.is_empty() {
            return;
        }
        let to: Vec<u32> = (0..old.rids.len())
            .map(|p| {
                let rid = old.rids[p];
                if !old.alive.contains(p as u32) || fresh.binary_search(&rid).is_ok() {
                    return NONE;
                }
                self.pos_of(rid).unwrap_or(NONE)
            })
            .collect();
        let Words { dict, post } = old.words;
        for (w, c) in dict {
            let moved = RoaringBitmap::from_sorted_iter(
                post[c as usize]
                    .iter()
                    .map(|p| to[p as usize])
                    .filter(|&p| p != NONE),
            )
            .unwrap_or_default();
            if moved.is_empty() {
                continue;
            }
            let c = self.words.code(&w);
            self.words.post[c] |= moved;
        }
    }

    /// Record id of `name` at `version` (the latest when `None`).
    pub fn find(&self, name: &str, version: Option<u64>) -> Option<i64> {
        let n: Arc<str> = Arc::from(name);
        let i = match version {
            Some(v) => *self.order.get(&(n, v))?,
            None => {
                *self
                    .order
                    .range((n.clone(), 0)..=(n, u64::MAX))
                    .next_back()?
                    .1
            }
        };
        self.slots.get(i as usize)?.as_ref()?;
        self.rids.get(i as usize).copied()
    }

    /// Record ids of every version of `name` and of every name under `name/` (the
    /// byte range of [`crate::rename::renamed_range`]).
    pub fn ids_under(&self, name: &str) -> Vec<i64> {
        let (lo, hi) = crate::rename::renamed_range(name);
        let n: Arc<str> = Arc::from(name);
        let (lo, hi): (Arc<str>, Arc<str>) = (Arc::from(lo.as_str()), Arc::from(hi.as_str()));
        self.order
            .range((n.clone(), 0)..=(n, u64::MAX))
            .chain(self.order.range((lo, 0)..(hi, 0)))
            .filter_map(|(_, &i)| {
                self.slots.get(i as usize)?.as_ref()?;
                self.rids.get(i as usize).copied()
            })
            .collect()
    }

    pub fn versions(&self, name: &str) -> Vec<u64> {
        let n: Arc<str> = Arc::from(name);
        self.order
            .range((n.clone(), 0)..=(n, u64::MAX))
            .map(|((_, v), _)| *v)
            .collect()
    }

    /// Positions of the record ids in `rids` (any order; unknown ids are skipped).
    pub fn positions(&self, rids: &mut [i64]) -> RoaringBitmap {
        if !rids.is_sorted() {
            rids.sort_unstable();
        }
        let mut out = Vec::with_capacity(rids.len());
        let n = self.rids.len();
        // Few ids: binary searches; many: one merge over the id column.
        if rids.len().saturating_mul(24) < n {
            let mut lo = 0;
            for r in rids.iter() {
                let p = lo + self.rids[lo..].partition_point(|x| x < r);
                if p < n && self.rids[p] == *r {
                    out.push(p as u32);
                }
                lo = p;
            }
        } else {
            let mut p = 0;
            for r in rids.iter() {
                while p < n && self.rids[p] < *r {
                    p += 1;
                }
                if p < n && self.rids[p] == *r {
                    out.push(p as u32);
                }
            }
        }
        out.dedup();
        RoaringBitmap::from_sorted_iter(out).unwrap_or_default()
    }

    /// The records matching everything in `q` but its text; `text` is the set of
    /// positions matching the text, if any.
    pub fn select(&self, q: &Query, text: Option<&RoaringBitmap>) -> Selection {
        let narrowed = text.is_some()
            || q.dataset_latest
            || !q.filters.is_empty()
            || !q.exclude.is_empty()
            || q.name_prefix.is_some()
            || q.time_overlap.is_some();
        let whole = match (narrowed, q.latest_only) {
            (true, _) => Whole::No,
            (false, true) => Whole::Latest,
            (false, false) => Whole::Alive,
        };
        let mut m = if q.latest_only {
            self.latest.clone()
        } else {
            self.alive.clone()
        };
        if let Some(t) = text {
            m &= t;
        }
        for (k, vs) in &q.filters {
            let mut u = RoaringBitmap::new();
            if let Some(col) = self.col(k) {
                for v in vs {
                    if let Some(&c) = col.dict.get(v.as_str()) {
                        u |= &col.post[c as usize];
                    }
                }
            }
            m &= u;
        }
        for (k, vs) in &q.exclude {
            if let Some(col) = self.col(k) {
                for v in vs {
                    if let Some(&c) = col.dict.get(v.as_str()) {
                        m -= &col.post[c as usize];
                    }
                }
            }
        }
        if let Some(p) = &q.name_prefix {
            let start: Arc<str> = Arc::from(p.as_str());
            let under: RoaringBitmap = self
                .order
                .range((Bound::Included((start, 0)), Bound::Unbounded))
                .take_while(|((n, _), _)| n.starts_with(p.as_str()))
                .map(|(_, &i)| i)
                .collect();
            m &= under;
        }
        if q.dataset_latest {
            m -= self.stale.get_or_init(|| self.dataset_stale());
        }
        if let Some((from, to)) = &q.time_overlap {
            m = m
                .iter()
                .filter(|&i| {
                    let Some(Some(s)) = self.slots.get(i as usize) else {
                        return false;
                    };
                    overlaps(s, from.as_deref(), to.as_deref())
                })
                .collect();
        }
        Selection { m, whole }
    }

    /// Records of an older dataset version: the dataset of a record is its directory
    /// ([`crate::dataset`]: the name without the file name, and without a CMIP5 variable); its version is the [`DATASET_VERSION_FACET`]
    /// (`vYYYYMMDD`, compared as a string). Records without one are never stale.
    fn dataset_stale(&self) -> RoaringBitmap {
        let Some(col) = self.col(DATASET_VERSION_FACET) else {
            return RoaringBitmap::new();
        };
        fn dataset<'a>(ix: &Index, i: u32, s: &'a Slot) -> &'a str {
            let var = ix.facet_of(i, crate::dataset::DATASET_VARIABLE_FACET);
            crate::dataset::dataset_dir(&s.name, var)
        }
        let mut newest: HashMap<&str, &str> = HashMap::default();
        let with_version = || {
            self.alive.iter().filter_map(|i| {
                let c = col.codes[i as usize];
                let s = self.slots[i as usize].as_ref()?;
                (c != NONE).then(|| (i, dataset(self, i, s), &*col.values[c as usize]))
            })
        };
        for (_, s, v) in with_version() {
            let e = newest.entry(s).or_insert(v);
            if v > *e {
                *e = v;
            }
        }
        with_version()
            .filter(|(_, s, v)| newest.get(s).is_some_and(|n| v < n))
            .map(|(i, _, _)| i)
            .collect()
    }

    /// The next name components under `parent` (`""` or `"/"` for the top), with how
    /// many records of `m` lie under each; only those starting with `partial`
    /// (case-insensitive); most records first.
    pub fn children(
        &self,
        parent: &str,
        partial: &str,
        limit: usize,
        m: &RoaringBitmap,
    ) -> Vec<(String, u64)> {
        let base = format!("{}/", parent.trim_end_matches('/'));
        let partial = partial.to_lowercase();
        let start: Arc<str> = Arc::from(base.as_str());
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for ((name, _), &i) in self
            .order
            .range((Bound::Included((start, 0)), Bound::Unbounded))
            .take_while(|((n, _), _)| n.starts_with(&base))
        {
            let rest = &name[base.len()..];
            let child = rest.split('/').next().unwrap_or(rest);
            if child.is_empty() || !starts_with_ci(child, &partial) || !m.contains(i) {
                continue;
            }
            *counts.entry(child).or_default() += 1;
        }
        let mut out: Vec<(String, u64)> = counts
            .into_iter()
            .map(|(c, n)| (c.to_string(), n))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.truncate(limit);
        out
    }

    /// Per value of `col`, how many of `m` carry it.
    fn count_col(
        &self,
        col: &Col,
        m: &RoaringBitmap,
        whole: Whole,
        ids: &mut Option<Vec<u32>>,
    ) -> Vec<u64> {
        match whole {
            Whole::Latest => return col.latest_n.clone(),
            Whole::Alive => return col.post.iter().map(RoaringBitmap::len).collect(),
            Whole::No => {}
        }
        let mut counts = vec![0u64; col.values.len()];
        // Few values: one intersection per value beats a scan of every match.
        if (col.values.len() as u64) * 64 < m.len() / 64 {
            for (c, p) in col.post.iter().enumerate() {
                counts[c] = p.intersection_len(m);
            }
            return counts;
        }
        let ids = ids.get_or_insert_with(|| m.iter().collect());
        for &i in ids.iter() {
            let c = col.codes[i as usize];
            if c != NONE {
                counts[c as usize] += 1;
            }
        }
        counts
    }

    /// Facet counts over `m`: per facet, `(value, count)` sorted by value, non-zero only.
    pub fn counts(&self, s: &Selection, sel: &FacetSel) -> BTreeMap<String, Vec<(String, u64)>> {
        let m = &s.m;
        let keys: Vec<&str> = match sel {
            FacetSel::None => return BTreeMap::new(),
            FacetSel::All => self.cols.iter().map(|c| c.key.as_str()).collect(),
            FacetSel::List(l) => l.iter().map(String::as_str).collect(),
        };
        let mut out = BTreeMap::new();
        if m.is_empty() {
            return out;
        }
        let mut ids = None;
        let whole = s.whole;
        for k in keys {
            let Some(col) = self.col(k) else {
                continue;
            };
            let counts = self.count_col(col, m, whole, &mut ids);
            let mut list: Vec<(String, u64)> = counts
                .into_iter()
                .enumerate()
                .filter(|(_, n)| *n > 0)
                .map(|(c, n)| (col.values[c].to_string(), n))
                .collect();
            if list.is_empty() {
                continue;
            }
            list.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            out.insert(k.to_string(), list);
        }
        out
    }

    /// Values of `facet` starting with `prefix` (case-insensitive) with their counts in
    /// `m`, most frequent first.
    pub fn autocomplete(
        &self,
        facet: &str,
        prefix: &str,
        limit: usize,
        s: &Selection,
    ) -> Vec<(String, u64)> {
        let m = &s.m;
        let Some(col) = self.col(facet) else {
            return Vec::new();
        };
        let p = prefix.to_lowercase();
        let cands: Vec<u32> = (0..col.values.len() as u32)
            .filter(|&c| starts_with_ci(&col.values[c as usize], &p))
            .collect();
        let whole = s.whole;
        let mut out: Vec<(String, u64)> = if cands.len() <= 64 && whole == Whole::No {
            cands
                .iter()
                .map(|&c| {
                    (
                        col.values[c as usize].to_string(),
                        col.post[c as usize].intersection_len(m),
                    )
                })
                .collect()
        } else {
            let counts = self.count_col(col, m, whole, &mut None);
            cands
                .iter()
                .map(|&c| (col.values[c as usize].to_string(), counts[c as usize]))
                .collect()
        };
        out.retain(|(_, n)| *n > 0);
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.truncate(limit);
        out
    }

    /// Record ids of one page of `m` in `sort` order.
    /// True when walking the name order to the `want`-th match of `m` is expected
    /// to take at most twice |m| steps (matches spread through the order): cheaper
    /// than selecting the page among |m| names by comparing them.
    fn walk_fits(&self, m: &RoaringBitmap, want: usize) -> bool {
        let (n, all) = (m.len() as u128, self.alive.len() as u128);
        n > 0 && (want as u128).saturating_mul(all) <= 2 * n * n
    }

    pub fn page(&self, m: &RoaringBitmap, sort: Sort, offset: usize, limit: usize) -> Vec<i64> {
        let want = offset.saturating_add(limit);
        if limit == 0 || offset as u64 >= m.len() {
            return Vec::new();
        }
        let slot = |i: u32| self.slots.get(i as usize).and_then(Option::as_ref);
        let idx: Vec<u32> = match sort {
            Sort::Name | Sort::NameDesc if m.len().saturating_mul(16) >= self.alive.len() => {
                // Dense: walk the name order.
                let it = self.order.values().copied().filter(|i| m.contains(*i));
                if sort == Sort::Name {
                    it.skip(offset).take(limit).collect()
                } else {
                    self.order
                        .values()
                        .rev()
                        .copied()
                        .filter(|i| m.contains(*i))
                        .skip(offset)
                        .take(limit)
                        .collect()
                }
            }
            Sort::Name | Sort::NameDesc if self.walk_fits(m, want) => {
                match self.walk(m, sort == Sort::NameDesc, offset, limit) {
                    Some(v) => v,
                    None => self.select_page(m, sort, offset, want),
                }
            }
            _ => self.select_page(m, sort, offset, want),
        };
        idx.into_iter()
            .filter_map(|i| {
                slot(i)?;
                self.rids.get(i as usize).copied()
            })
            .collect()
    }

    /// The page by walking the name order, or `None` when the walk passes twice |m|
    /// entries first (the matches bunch late in the order): then selecting is cheaper.
    fn walk(&self, m: &RoaringBitmap, desc: bool, offset: usize, limit: usize) -> Option<Vec<u32>> {
        let budget = (m.len() as usize).saturating_mul(2).max(64);
        let it: Box<dyn Iterator<Item = u32>> = if desc {
            Box::new(self.order.values().rev().copied())
        } else {
            Box::new(self.order.values().copied())
        };
        let (mut out, mut seen) = (Vec::with_capacity(limit), 0usize);
        for (steps, i) in it.enumerate() {
            if steps >= budget {
                return None;
            }
            if m.contains(i) {
                if seen >= offset {
                    out.push(i);
                    if out.len() == limit {
                        break;
                    }
                }
                seen += 1;
            }
        }
        Some(out)
    }

    /// The page by selecting the first `want` of `m` in `sort` order, then sorting them.
    fn select_page(&self, m: &RoaringBitmap, sort: Sort, offset: usize, want: usize) -> Vec<u32> {
        let slot = |i: u32| self.slots.get(i as usize).and_then(Option::as_ref);
        let mut v: Vec<(u32, &Slot)> = m.iter().filter_map(|i| slot(i).map(|s| (i, s))).collect();
        let cmp = |a: &(u32, &Slot), b: &(u32, &Slot)| {
            let (a, b) = (a.1, b.1);
            match sort {
                Sort::Name => (&a.name, a.version).cmp(&(&b.name, b.version)),
                Sort::NameDesc => (&b.name, b.version).cmp(&(&a.name, a.version)),
                Sort::Newest => (Reverse(a.version), &a.name).cmp(&(Reverse(b.version), &b.name)),
                Sort::Size => (Reverse(a.size), &a.name, a.version).cmp(&(
                    Reverse(b.size),
                    &b.name,
                    b.version,
                )),
            }
        };
        if want < v.len() {
            v.select_nth_unstable_by(want, cmp);
            v.truncate(want);
        }
        v.sort_unstable_by(cmp);
        v.into_iter().skip(offset).map(|(i, _)| i).collect()
    }
}

/// What a query selected: the positions, and whether they are one of the unfiltered
/// sets (whose facet counts are kept at hand).
pub(crate) struct Selection {
    pub m: RoaringBitmap,
    whole: Whole,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Whole {
    Latest,
    Alive,
    No,
}

/// Case-insensitive prefix test without allocating for ASCII values.
fn starts_with_ci(v: &str, lower_prefix: &str) -> bool {
    if v.is_ascii() && lower_prefix.is_ascii() {
        v.len() >= lower_prefix.len()
            && v.as_bytes()[..lower_prefix.len()].eq_ignore_ascii_case(lower_prefix.as_bytes())
    } else {
        v.to_lowercase().starts_with(lower_prefix)
    }
}

/// Builds an index in one pass from rows in ascending record-id order (the full load at
/// open): posting lists are appended, the name order is sorted once, and the latest
/// versions and their counts are computed at the end.
pub(crate) struct Builder {
    idx: Index,
    order: Vec<((Arc<str>, u64), u32)>,
    /// Column of each facet position of the previous row (rows share their key order).
    keys: Vec<usize>,
    late: Vec<IndexRow>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            idx: Index::new(),
            order: Vec::new(),
            keys: Vec::new(),
            late: Vec::new(),
        }
    }

    pub fn push(&mut self, r: IndexRow) {
        let idx = &mut self.idx;
        if idx.rids.last().is_some_and(|&l| r.rid <= l) {
            self.late.push(r);
            return;
        }
        let i = idx.rids.len() as u32;
        idx.rids.push(r.rid);
        if let Some(w) = r.words.as_deref() {
            idx.words.add(w, i);
        }
        for (n, (k, v)) in decode_facets(&r.facets).enumerate() {
            let j = match self.keys.get(n) {
                Some(&j) if idx.cols[j].key == k => j,
                _ => {
                    let j = idx.col_mut(k);
                    if n < self.keys.len() {
                        self.keys[n] = j;
                    } else {
                        self.keys.push(j);
                    }
                    j
                }
            };
            let col = &mut idx.cols[j];
            let c = col.code(v);
            col.codes.resize(i as usize, NONE);
            if col.codes.len() == i as usize {
                col.codes.push(c);
                if col.post[c as usize].try_push(i).is_err() {
                    col.post[c as usize].insert(i);
                }
            }
        }
        let name: Arc<str> = Arc::from(r.name);
        self.order.push(((name.clone(), r.version), i));
        idx.slots.push(Some(Slot {
            name,
            version: r.version,
            size: r.size,
            times: pack_times(r.time_start, r.time_end),
        }));
    }

    pub fn finish(self) -> Index {
        let Builder {
            mut idx,
            mut order,
            late,
            ..
        } = self;
        let n = idx.rids.len();
        for col in &mut idx.cols {
            col.codes.resize(n, NONE);
        }
        idx.alive = RoaringBitmap::from_sorted_iter(0..n as u32).unwrap_or_default();
        order.sort_unstable();
        order.dedup_by(|b, a| {
            // Same (name, version) twice: keep the later record id (pushed later).
            if a.0 == b.0 {
                std::mem::swap(a, b);
                true
            } else {
                false
            }
        });
        let mut latest = Vec::new();
        for (k, w) in order.iter().enumerate() {
            if order.get(k + 1).is_none_or(|nx| nx.0 .0 != w.0 .0) {
                latest.push(w.1);
            }
        }
        latest.sort_unstable();
        for &i in &latest {
            for col in &mut idx.cols {
                let c = col.codes[i as usize];
                if c != NONE {
                    col.latest_n[c as usize] += 1;
                }
            }
        }
        idx.latest = RoaringBitmap::from_sorted_iter(latest).unwrap_or_default();
        // Positions that lost a (name, version) duplicate are holes.
        let kept: RoaringBitmap = if order.len() < n {
            order.iter().map(|x| x.1).collect()
        } else {
            idx.alive.clone()
        };
        for i in (0..n as u32).filter(|_| order.len() < n) {
            if !kept.contains(i) {
                idx.slots[i as usize] = None;
                idx.alive.remove(i);
                for col in &mut idx.cols {
                    let c = std::mem::replace(&mut col.codes[i as usize], NONE);
                    if c != NONE {
                        col.post[c as usize].remove(i);
                    }
                }
            }
        }
        idx.order = order.into_iter().collect();
        if !late.is_empty() {
            idx.compact(late);
        } else {
            idx.ds_build();
        }
        idx
    }
}

/// A record overlaps `[from, to]` when it starts no later than `to` and ends no earlier
/// than `from` (ISO-8601 strings compared as strings; a missing bound is open). Records
/// with neither time are left out of a time query.
fn overlaps(s: &Slot, from: Option<&str>, to: Option<&str>) -> bool {
    let (start, end) = s.times();
    if start.is_none() && end.is_none() {
        return false;
    }
    if let (Some(to), Some(st)) = (to, start) {
        if st > to {
            return false;
        }
    }
    if let (Some(from), Some(en)) = (from, end) {
        if en < from {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words handed with the rows answer free text through every kind of change: a
    /// record replaced in place loses its old words, a removed one leaves the live
    /// positions, and a rebuild (a record id arriving late, at load or later) carries
    /// every word to its record's new position.
    #[test]
    fn words_follow_their_records_through_changes() {
        let row = |rid: i64, words: &str| IndexRow {
            rid,
            name: format!("/w/{rid}"),
            version: 1,
            size: 1,
            time_start: None,
            time_end: None,
            facets: String::new(),
            words: Some(words.into()),
        };
        let live = |ix: &Index, w: &str| -> Vec<i64> {
            let m = ix.word(w) & &ix.alive;
            m.iter().map(|p| ix.rids[p as usize]).collect()
        };
        let mut b = Builder::new();
        // 25 arrives after 30: the load itself rebuilds.
        for (rid, w) in [
            (10, "air odd"),
            (20, "air even"),
            (30, "air odd"),
            (25, "air quarter"),
            (40, "air even"),
        ] {
            b.push(row(rid, w));
        }
        let mut ix = b.finish();
        assert_eq!(live(&ix, "air"), [10, 20, 25, 30, 40]);
        assert_eq!(live(&ix, "even"), [20, 40]);
        assert_eq!(live(&ix, "quarter"), [25]);
        assert!(ix.word("nothing").is_empty());
        // Replaced in place (20 loses "even"), removed (30: a hole keeps its id).
        ix.apply(vec![row(20, "air odd sea")], &[30]);
        assert_eq!(live(&ix, "even"), [40]);
        assert_eq!(live(&ix, "odd"), [10, 20]);
        assert_eq!(live(&ix, "sea"), [20]);
        assert!(ix.pos_of(30).is_some());
        // A record id below the highest arrives late: a rebuild, which drops the hole.
        ix.apply(vec![row(15, "sea late"), row(50, "air")], &[]);
        assert!(ix.pos_of(30).is_none(), "no rebuild");
        assert_eq!(live(&ix, "sea"), [15, 20]);
        assert_eq!(live(&ix, "air"), [10, 20, 25, 40, 50]);
        assert_eq!(live(&ix, "odd"), [10, 20]);
        assert_eq!(live(&ix, "late"), [15]);
        assert_eq!(live(&ix, "quarter"), [25]);
        // Appended after the rebuild.
        ix.apply(vec![row(60, "late")], &[]);
        assert_eq!(live(&ix, "late"), [15, 60]);
    }

    /// A page by name is the same whichever way it is found: by walking the name
    /// order (matches spread through it) or, when the walk's budget runs out
    /// (matches bunched at its end), by selecting among the matches.
    #[test]
    fn pages_by_name_walk_or_select_alike() {
        let mut b = Builder::new();
        for i in 0..1000u32 {
            b.push(IndexRow {
                rid: i as i64 + 1,
                name: format!("/a/{:04}", (i * 7919) % 1000),
                version: 1,
                size: 1,
                time_start: None,
                time_end: None,
                facets: String::new(),
                words: None,
            });
        }
        let ix = b.finish();
        let name_of = |rid: i64| format!("/a/{:04}", ((rid as u32 - 1) * 7919) % 1000);
        let by_name = |m: &RoaringBitmap, desc: bool| -> Vec<String> {
            let mut v: Vec<String> = m.iter().map(|p| name_of(ix.rids[p as usize])).collect();
            v.sort();
            if desc {
                v.reverse();
            }
            v
        };
        // Spread: every 10th name. Bunched: the last 100 names.
        let spread: RoaringBitmap = (0..1000u32)
            .filter(|&p| name_of(ix.rids[p as usize]).ends_with('0'))
            .collect();
        let late: RoaringBitmap = (0..1000u32)
            .filter(|&p| name_of(ix.rids[p as usize]).as_str() >= "/a/0900")
            .collect();
        for (m, walks) in [(&spread, true), (&late, false)] {
            assert!(ix.walk_fits(m, 10));
            assert_eq!(ix.walk(m, false, 0, 10).is_some(), walks);
            for (sort, desc) in [(Sort::Name, false), (Sort::NameDesc, true)] {
                for offset in [0, 5, 95] {
                    let got: Vec<String> = ix
                        .page(m, sort, offset, 10)
                        .into_iter()
                        .map(name_of)
                        .collect();
                    let want: Vec<String> =
                        by_name(m, desc).into_iter().skip(offset).take(10).collect();
                    assert_eq!(got, want, "offset {offset}, desc {desc}");
                }
            }
        }
    }

    #[test]
    fn times_pack_both_ways() {
        for (s, e) in [
            (None, None),
            (Some(""), None),
            (None, Some("")),
            (Some("1850-01-01"), Some("1900")),
            (Some("a"), None),
        ] {
            let p = pack_times(s.map(str::to_string), e.map(str::to_string));
            assert_eq!(unpack_times(p.as_deref()), (s, e));
        }
    }
}
