//! The datasets of the index: which dataset each record belongs to, kept up to date
//! name by name (see [`crate::dataset`] for what a dataset is). A record is a member
//! when it is the highest repository version of its name among those with its DRS
//! version: a name published again under a new DRS version (the DRS version is not in
//! the name) leaves its older copy in the older dataset version.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::{Index, Selection, Whole, NONE};
use crate::dataset::{
    check_contiguity, dataset_dir, id_keys, instance_id, master_id, Dataset, DatasetFile,
    DatasetQuery, DATASET_VARIABLE_FACET, FREQUENCY_FACETS,
};
use crate::facet_index::DATASET_VERSION_FACET;

/// Key of a dataset: (directory, DRS version or `""`). Ordered as instance ids are
/// listed.
type Key = (Arc<str>, Box<str>);

pub(crate) struct Ds {
    key: Key,
    /// Member positions (latest versions of their names).
    members: BTreeSet<u32>,
    size: u64,
}

#[derive(Default)]
pub(crate) struct Datasets {
    by_key: BTreeMap<Key, u32>,
    sets: Vec<Option<Ds>>,
    free: Vec<u32>,
    /// Per position: its dataset, or NONE.
    of_pos: Vec<u32>,
}

impl Datasets {
    pub fn len(&self) -> usize {
        self.by_key.len()
    }
}

impl Index {
    pub(super) fn facet_of(&self, i: u32, key: &str) -> Option<&str> {
        let col = self.col(key)?;
        let c = *col.codes.get(i as usize)?;
        (c != NONE).then(|| &*col.values[c as usize])
    }

    /// The dataset key of position `i`.
    fn ds_key(&self, i: u32) -> Option<Key> {
        let s = self.slots.get(i as usize)?.as_ref()?;
        let dir = dataset_dir(&s.name, self.facet_of(i, DATASET_VARIABLE_FACET));
        let version = self.facet_of(i, DATASET_VERSION_FACET).unwrap_or("");
        Some((Arc::from(dir), version.into()))
    }

    /// Sets the membership of the versions of one name (`all`: its positions in
    /// ascending version order): the last of each DRS version is a member.
    pub(super) fn ds_name(&mut self, all: &[u32]) {
        if all.len() == 1 {
            self.ds_add(all[0]);
            return;
        }
        let drs = |ix: &Index, p: u32| -> Option<Box<str>> {
            ix.facet_of(p, DATASET_VERSION_FACET).map(Into::into)
        };
        let mut top: BTreeMap<Option<Box<str>>, u32> = BTreeMap::new();
        for &p in all {
            top.insert(drs(self, p), p);
        }
        for &p in all {
            if top.get(&drs(self, p)) == Some(&p) {
                self.ds_add(p);
            } else {
                self.ds_remove(p);
            }
        }
    }

    /// Position `i` joins its dataset.
    fn ds_add(&mut self, i: u32) {
        let Some(key) = self.ds_key(i) else { return };
        let size = self.slots[i as usize].as_ref().map_or(0, |s| s.size);
        let d = &mut self.ds;
        if d.of_pos.len() <= i as usize {
            d.of_pos.resize(i as usize + 1, NONE);
        }
        if d.of_pos[i as usize] != NONE {
            return;
        }
        let id = match d.by_key.get(&key) {
            Some(&id) => id,
            None => {
                let ds = Ds {
                    key: key.clone(),
                    members: BTreeSet::new(),
                    size: 0,
                };
                let id = match d.free.pop() {
                    Some(id) => {
                        d.sets[id as usize] = Some(ds);
                        id
                    }
                    None => {
                        d.sets.push(Some(ds));
                        (d.sets.len() - 1) as u32
                    }
                };
                d.by_key.insert(key, id);
                id
            }
        };
        if let Some(ds) = d.sets[id as usize].as_mut() {
            ds.members.insert(i);
            ds.size += size;
        }
        d.of_pos[i as usize] = id;
    }

    /// Position `i` leaves its dataset (a newer copy in its DRS version, or it goes).
    pub(super) fn ds_remove(&mut self, i: u32) {
        let size = self
            .slots
            .get(i as usize)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.size);
        let d = &mut self.ds;
        let Some(&id) = d.of_pos.get(i as usize) else {
            return;
        };
        if id == NONE {
            return;
        }
        d.of_pos[i as usize] = NONE;
        let Some(ds) = d.sets[id as usize].as_mut() else {
            return;
        };
        ds.members.remove(&i);
        ds.size = ds.size.saturating_sub(size);
        if ds.members.is_empty() {
            let key = ds.key.clone();
            d.sets[id as usize] = None;
            d.by_key.remove(&key);
            d.free.push(id);
        }
    }

    /// Every name's members join their datasets (after a bulk build).
    pub(super) fn ds_build(&mut self) {
        self.ds = Datasets::default();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut last: Option<&Arc<str>> = None;
        for ((name, _), &i) in &self.order {
            if last != Some(name) {
                groups.push(Vec::new());
                last = Some(name);
            }
            if let Some(g) = groups.last_mut() {
                g.push(i);
            }
        }
        for g in groups {
            self.ds_name(&g);
        }
    }

    /// Number of datasets.
    pub fn dataset_count(&self) -> usize {
        self.ds.len()
    }

    /// True when no other version of the dataset's directory is newer.
    fn ds_latest(&self, key: &Key) -> bool {
        self.ds
            .by_key
            .range((Bound::Excluded(key.clone()), Bound::Unbounded))
            .next()
            .is_none_or(|((dir, _), _)| *dir != key.0)
    }

    /// The datasets no newer DRS version of whose directory is held: one pass over the
    /// keys in order (a key is latest when the next one is another directory), kept
    /// until the index changes. Answering `latest` for many datasets at once by a
    /// search per dataset costs a string comparison per tree level each.
    fn latest_datasets(&self) -> &RoaringBitmap {
        self.latest_datasets.get_or_init(|| {
            let mut ids = Vec::with_capacity(self.ds.by_key.len());
            let mut it = self.ds.by_key.iter().peekable();
            while let Some(((dir, _), &id)) = it.next() {
                if it.peek().is_none_or(|((next, _), _)| next != dir) {
                    ids.push(id);
                }
            }
            ids.sort_unstable();
            RoaringBitmap::from_sorted_iter(ids).unwrap_or_default()
        })
    }

    /// The datasets holding a file of `m` (narrowed by `dq`'s ids and `latest`),
    /// and each one's first file when `dq` asks for facet counts.
    pub fn dataset_hits(
        &self,
        m: &RoaringBitmap,
        dq: &DatasetQuery,
    ) -> (RoaringBitmap, RoaringBitmap) {
        let d = &self.ds;
        // Positions → datasets. A dataset's files sit mostly next to each other
        // (they are published together), so runs of one id are skipped before
        // the ids are sorted and made a bitmap in one pass: at 10 M matches
        // this is a few times faster than inserting each.
        let mut ids: Vec<u32> = Vec::with_capacity((m.len() / 4).min(1 << 24) as usize);
        let mut last = NONE;
        for i in m.iter() {
            if let Some(&id) = d.of_pos.get(i as usize) {
                if id != NONE && id != last {
                    ids.push(id);
                    last = id;
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        let mut hit = RoaringBitmap::from_sorted_iter(ids).unwrap_or_default();
        if !dq.ids.is_empty() {
            let mut wanted = RoaringBitmap::new();
            for id in &dq.ids {
                for (dir, version) in id_keys(id) {
                    let dir: Arc<str> = Arc::from(dir.as_str());
                    match version {
                        Some(v) => {
                            if let Some(&x) = d.by_key.get(&(dir, v.into())) {
                                wanted.insert(x);
                            }
                        }
                        None => {
                            let lo: Key = (dir.clone(), "".into());
                            for ((k, _), &x) in d.by_key.range(lo..) {
                                if *k != dir {
                                    break;
                                }
                                wanted.insert(x);
                            }
                        }
                    }
                }
            }
            hit &= wanted;
        }
        match dq.latest {
            None => {}
            Some(true) => hit &= self.latest_datasets(),
            Some(false) => hit -= self.latest_datasets(),
        }
        // Each dataset's first file, for facet counts: only when counts are asked.
        let mut reps = RoaringBitmap::new();
        if dq.query.facets != crate::query::FacetSel::None {
            let mut firsts: Vec<u32> = hit
                .iter()
                .filter_map(|id| d.sets.get(id as usize)?.as_ref()?.members.first().copied())
                .collect();
            firsts.sort_unstable();
            reps = RoaringBitmap::from_sorted_iter(firsts).unwrap_or_default();
        }
        (hit, reps)
    }

    /// The datasets of `hit` from `offset` (at most `limit`), in instance-id order.
    pub fn dataset_page(&self, hit: &RoaringBitmap, offset: usize, limit: usize) -> Vec<u32> {
        let d = &self.ds;
        if hit.len().saturating_mul(16) >= d.by_key.len() as u64 {
            d.by_key
                .values()
                .copied()
                .filter(|id| hit.contains(*id))
                .skip(offset)
                .take(limit)
                .collect()
        } else {
            let mut v: Vec<(&Key, u32)> = hit
                .iter()
                .filter_map(|id| Some((&d.sets.get(id as usize)?.as_ref()?.key, id)))
                .collect();
            // Only the page's end needs ordering: the rest is cut off unsorted.
            let want = offset.saturating_add(limit);
            if want < v.len() {
                v.select_nth_unstable(want);
                v.truncate(want);
            }
            v.sort_unstable();
            v.into_iter()
                .skip(offset)
                .take(limit)
                .map(|x| x.1)
                .collect()
        }
    }

    /// Facet counts over datasets, each counted with its first file's values.
    pub fn dataset_counts(
        &self,
        reps: RoaringBitmap,
        sel: &crate::query::FacetSel,
    ) -> BTreeMap<String, Vec<(String, u64)>> {
        self.counts(
            &Selection {
                m: reps,
                whole: Whole::No,
            },
            sel,
        )
    }

    /// The dataset record of `id`; its files' record ids (name order) when `files`.
    pub fn dataset(&self, id: u32, files: bool) -> Option<Dataset> {
        let ds = self.ds.sets.get(id as usize)?.as_ref()?;
        let first = *ds.members.first()?;
        let mut facets = BTreeMap::new();
        for col in &self.cols {
            let c = col.codes[first as usize];
            if c == NONE {
                continue;
            }
            if ds.members.iter().all(|&p| col.codes[p as usize] == c) {
                facets.insert(col.key.clone(), col.values[c as usize].to_string());
            }
        }
        let project = self.facet_of(first, "project").unwrap_or("").to_string();
        let master = master_id(&ds.key.0, &project);
        let mut members: Vec<DatasetFile> = ds
            .members
            .iter()
            .filter_map(|&p| {
                let s = self.slots.get(p as usize)?.as_ref()?;
                let (a, b) = s.times();
                Some(DatasetFile {
                    name: s.name.to_string(),
                    version: s.version,
                    size: s.size,
                    time_start: a.map(str::to_string),
                    time_end: b.map(str::to_string),
                })
            })
            .collect();
        members.sort_by(|a, b| a.name.cmp(&b.name));
        let frequency = FREQUENCY_FACETS
            .iter()
            .find_map(|k| facets.get(*k))
            .cloned();
        let mut out = Dataset {
            instance_id: instance_id(&master, &ds.key.1),
            master_id: master,
            version: ds.key.1.to_string(),
            name: ds.key.0.to_string(),
            project,
            facets,
            number_of_files: ds.members.len() as u64,
            size: ds.size,
            frequency,
            latest: self.ds_latest(&ds.key),
            ..Default::default()
        };
        check_contiguity(&mut out, &members);
        if files {
            out.files = members;
        }
        Some(out)
    }
}
