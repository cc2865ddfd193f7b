//! The in-memory facet index: dictionary-encoded facet columns, a roaring posting list
//! per facet value, a name-ordered map, and the set of latest versions. Filters, counts,
//! sorting and paging are answered here; the database only stores records and answers
//! free text with record ids.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::query::{FacetSel, Query, Sort};
use crate::record::decode_facets;

const NONE: u32 = u32::MAX;

/// One stored record as the index needs it (a row of the change feed).
pub(crate) struct IndexRow {
    pub rid: i64,
    pub name: String,
    pub version: u64,
    pub size: u64,
    pub time_start: Option<String>,
    pub time_end: Option<String>,
    pub facets: String,
}

struct Slot {
    rid: i64,
    name: Arc<str>,
    version: u64,
    size: u64,
    time_start: Option<Box<str>>,
    time_end: Option<Box<str>>,
}

#[derive(Default)]
struct Col {
    dict: HashMap<Box<str>, u32>,
    values: Vec<Box<str>>,
    /// Per slot: the value's code, or NONE.
    codes: Vec<u32>,
    post: Vec<RoaringBitmap>,
}

impl Col {
    fn code(&mut self, v: &str) -> u32 {
        if let Some(&c) = self.dict.get(v) {
            return c;
        }
        let c = self.values.len() as u32;
        self.values.push(v.into());
        self.dict.insert(v.into(), c);
        self.post.push(RoaringBitmap::new());
        c
    }
}

#[derive(Default)]
pub(crate) struct Index {
    /// (epoch, seq) of the storage state this index reflects; epoch -1 = never loaded.
    pub epoch: i64,
    pub seq: i64,
    by_rid: HashMap<i64, u32>,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    alive: RoaringBitmap,
    latest: RoaringBitmap,
    order: BTreeMap<(Arc<str>, u64), u32>,
    cols: BTreeMap<String, Col>,
}

impl Index {
    pub fn new() -> Index {
        Index {
            epoch: -1,
            ..Default::default()
        }
    }

    pub fn len(&self) -> u64 {
        self.alive.len()
    }

    fn unset(&mut self, i: u32) -> Option<Arc<str>> {
        let slot = self.slots.get_mut(i as usize)?.take()?;
        self.alive.remove(i);
        self.latest.remove(i);
        self.order.remove(&(slot.name.clone(), slot.version));
        for col in self.cols.values_mut() {
            if let Some(c) = col.codes.get_mut(i as usize) {
                if *c != NONE {
                    if let Some(p) = col.post.get_mut(*c as usize) {
                        p.remove(i);
                    }
                    *c = NONE;
                }
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
        let mut last = None;
        for (_, &i) in self.order.range(range) {
            self.latest.remove(i);
            last = Some(i);
        }
        if let Some(i) = last {
            self.latest.insert(i);
        }
    }

    pub fn upsert(&mut self, r: IndexRow) {
        let i = match self.by_rid.get(&r.rid) {
            Some(&i) => {
                if let Some(old) = self.unset(i) {
                    self.relatest(&old);
                }
                i
            }
            None => {
                let i = match self.free.pop() {
                    Some(i) => i,
                    None => {
                        self.slots.push(None);
                        for col in self.cols.values_mut() {
                            col.codes.push(NONE);
                        }
                        (self.slots.len() - 1) as u32
                    }
                };
                self.by_rid.insert(r.rid, i);
                i
            }
        };
        let name: Arc<str> = Arc::from(r.name.as_str());
        let nslots = self.slots.len();
        for (k, v) in decode_facets(&r.facets) {
            let col = self.cols.entry(k.to_string()).or_insert_with(|| Col {
                codes: vec![NONE; nslots],
                ..Default::default()
            });
            let c = col.code(v);
            col.codes[i as usize] = c;
            col.post[c as usize].insert(i);
        }
        self.slots[i as usize] = Some(Slot {
            rid: r.rid,
            name: name.clone(),
            version: r.version,
            size: r.size,
            time_start: r.time_start.map(Into::into),
            time_end: r.time_end.map(Into::into),
        });
        self.alive.insert(i);
        self.order.insert((name.clone(), r.version), i);
        self.relatest(&name);
    }

    pub fn remove(&mut self, rid: i64) {
        if let Some(i) = self.by_rid.remove(&rid) {
            if let Some(name) = self.unset(i) {
                self.relatest(&name);
            }
            self.free.push(i);
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
        Some(self.slots.get(i as usize)?.as_ref()?.rid)
    }

    pub fn versions(&self, name: &str) -> Vec<u64> {
        let n: Arc<str> = Arc::from(name);
        self.order
            .range((n.clone(), 0)..=(n, u64::MAX))
            .map(|((_, v), _)| *v)
            .collect()
    }

    /// The records matching everything in `q` but its text; `text` is the set of record
    /// ids the database matched for the text, if any.
    pub fn select(&self, q: &Query, text: Option<&[i64]>) -> RoaringBitmap {
        let mut m = if q.latest_only {
            self.latest.clone()
        } else {
            self.alive.clone()
        };
        for (k, vs) in &q.filters {
            let mut u = RoaringBitmap::new();
            if let Some(col) = self.cols.get(k) {
                for v in vs {
                    if let Some(&c) = col.dict.get(v.as_str()) {
                        u |= &col.post[c as usize];
                    }
                }
            }
            m &= u;
        }
        for (k, vs) in &q.exclude {
            if let Some(col) = self.cols.get(k) {
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
        if let Some(rids) = text {
            let t: RoaringBitmap = rids
                .iter()
                .filter_map(|r| self.by_rid.get(r).copied())
                .collect();
            m &= t;
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
        m
    }

    /// Facet counts over `m`: per facet, `(value, count)` sorted by value, non-zero only.
    pub fn counts(
        &self,
        m: &RoaringBitmap,
        sel: &FacetSel,
    ) -> BTreeMap<String, Vec<(String, u64)>> {
        let keys: Vec<&String> = match sel {
            FacetSel::None => return BTreeMap::new(),
            FacetSel::All => self.cols.keys().collect(),
            FacetSel::List(l) => l.iter().collect(),
        };
        let mut out = BTreeMap::new();
        if m.is_empty() {
            return out;
        }
        let ids: Vec<u32> = m.iter().collect();
        for k in keys {
            let Some(col) = self.cols.get(k) else {
                continue;
            };
            let counts = count_col(col, &ids, m);
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
            out.insert(k.clone(), list);
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
        m: &RoaringBitmap,
    ) -> Vec<(String, u64)> {
        let Some(col) = self.cols.get(facet) else {
            return Vec::new();
        };
        let p = prefix.to_lowercase();
        let cands: Vec<u32> = (0..col.values.len() as u32)
            .filter(|&c| col.values[c as usize].to_lowercase().starts_with(&p))
            .collect();
        let mut out: Vec<(String, u64)> = if cands.len() <= 64 {
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
            let ids: Vec<u32> = m.iter().collect();
            let counts = count_col(col, &ids, m);
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
            _ => {
                let mut v: Vec<(u32, &Slot)> =
                    m.iter().filter_map(|i| slot(i).map(|s| (i, s))).collect();
                let cmp = |a: &(u32, &Slot), b: &(u32, &Slot)| {
                    let (a, b) = (a.1, b.1);
                    match sort {
                        Sort::Name => (&a.name, a.version).cmp(&(&b.name, b.version)),
                        Sort::NameDesc => (&b.name, b.version).cmp(&(&a.name, a.version)),
                        Sort::Newest => {
                            (Reverse(a.version), &a.name).cmp(&(Reverse(b.version), &b.name))
                        }
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
        };
        idx.into_iter()
            .filter_map(|i| slot(i).map(|s| s.rid))
            .collect()
    }
}

fn count_col(col: &Col, ids: &[u32], m: &RoaringBitmap) -> Vec<u64> {
    let mut counts = vec![0u64; col.values.len()];
    // Few values: one intersection per value beats a scan of every match.
    if (col.values.len() as u64) * 64 < m.len() / 64 {
        for (c, p) in col.post.iter().enumerate() {
            counts[c] = p.intersection_len(m);
        }
        return counts;
    }
    for &i in ids {
        if let Some(&c) = col.codes.get(i as usize) {
            if c != NONE {
                counts[c as usize] += 1;
            }
        }
    }
    counts
}

/// A record overlaps `[from, to]` when it starts no later than `to` and ends no earlier
/// than `from` (ISO-8601 strings compared as strings; a missing bound is open). Records
/// with neither time are left out of a time query.
fn overlaps(s: &Slot, from: Option<&str>, to: Option<&str>) -> bool {
    if s.time_start.is_none() && s.time_end.is_none() {
        return false;
    }
    if let (Some(to), Some(st)) = (to, s.time_start.as_deref()) {
        if st > to {
            return false;
        }
    }
    if let (Some(from), Some(en)) = (from, s.time_end.as_deref()) {
        if en < from {
            return false;
        }
    }
    true
}
