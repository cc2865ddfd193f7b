//! What the history allows: for every version a put made, the contents it
//! may hold, whether it must, may or must not be visible, and the names it
//! may be under; for every `publish-dir` run, its files.

use std::collections::{BTreeMap, BTreeSet};

/// Whether a version must be visible at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Acknowledged, and not removed or renamed without acknowledgement.
    Must,
    /// Its put, or a removal, had an unknown outcome.
    May,
    /// Its removal was acknowledged, or its put definitely failed.
    Gone,
}

#[derive(Debug)]
pub(crate) struct Version {
    /// SHA-256 of each writer's content.
    candidates: Vec<[u8; 32]>,
    /// The acknowledged writer's content.
    acked: Option<[u8; 32]>,
    presence: Presence,
    /// Names it may be under (one when certain).
    names: BTreeSet<String>,
    /// Its put is still running.
    in_flight: bool,
    flipped: bool,
}

#[derive(Debug)]
struct DirRun {
    files: BTreeMap<String, [u8; 32]>,
    acked: bool,
    ran: bool,
}

pub(crate) struct Model {
    versions: BTreeMap<u64, Version>,
    /// Names mutations may use (a name touched by a rename of unknown
    /// outcome is retired: its versions may be under either name).
    names: Vec<String>,
    retired: BTreeSet<String>,
    dirs: BTreeMap<u64, DirRun>,
    flipped_files: BTreeSet<(String, u64)>,
}

impl Model {
    pub(crate) fn new(names: usize) -> Model {
        Model {
            versions: BTreeMap::new(),
            names: (0..names).map(|i| format!("/faults/o{i}")).collect(),
            retired: BTreeSet::new(),
            dirs: BTreeMap::new(),
            flipped_files: BTreeSet::new(),
        }
    }

    /// A name for a mutation (`fresh_ok`: a name with no version will do).
    pub(crate) fn pick_name(&self, rng: &mut fastrand::Rng, fresh_ok: bool) -> Option<String> {
        let usable: Vec<&String> = self
            .names
            .iter()
            .filter(|n| !self.retired.contains(*n))
            .filter(|n| fresh_ok || self.has_versions(n))
            .collect();
        if usable.is_empty() {
            return None;
        }
        Some(usable[rng.usize(0..usable.len())].clone())
    }

    pub(crate) fn has_versions(&self, name: &str) -> bool {
        self.versions
            .values()
            .any(|v| v.presence != Presence::Gone && v.names.contains(name))
    }

    /// A version certainly under `name` (not in flight), for a removal.
    pub(crate) fn version_at(&self, name: &str, rng: &mut fastrand::Rng) -> Option<u64> {
        let vs: Vec<u64> = self
            .versions
            .iter()
            .filter(|(_, v)| {
                !v.in_flight
                    && v.presence != Presence::Gone
                    && v.names.len() == 1
                    && v.names.contains(name)
            })
            .map(|(k, _)| *k)
            .collect();
        (!vs.is_empty()).then(|| vs[rng.usize(0..vs.len())])
    }

    /// Something to fetch: a version (name, Some(v), allowed contents), or a
    /// published-directory file by name alone (name, None, its content).
    pub(crate) fn pick_version(
        &self,
        rng: &mut fastrand::Rng,
    ) -> Option<(String, Option<u64>, Vec<[u8; 32]>)> {
        if rng.f64() < 0.15 {
            let files: Vec<(&String, &[u8; 32])> = self
                .dirs
                .values()
                .filter(|d| d.ran)
                .flat_map(|d| d.files.iter())
                .collect();
            if !files.is_empty() {
                let (n, h) = files[rng.usize(0..files.len())];
                return Some((n.clone(), None, vec![*h]));
            }
        }
        let vs: Vec<(&u64, &Version)> = self
            .versions
            .iter()
            .filter(|(_, v)| v.presence != Presence::Gone)
            .collect();
        if vs.is_empty() {
            return None;
        }
        let (k, v) = vs[rng.usize(0..vs.len())];
        let names: Vec<&String> = v.names.iter().collect();
        let n = names[rng.usize(0..names.len())];
        Some((n.clone(), Some(*k), allowed(v)))
    }

    pub(crate) fn begin_put(&mut self, version: u64, name: &str, candidates: Vec<[u8; 32]>) {
        self.versions.insert(
            version,
            Version {
                candidates,
                acked: None,
                presence: Presence::May,
                names: [name.to_string()].into(),
                in_flight: true,
                flipped: false,
            },
        );
    }

    pub(crate) fn end_put(&mut self, version: u64, acked: Option<[u8; 32]>) {
        if let Some(v) = self.versions.get_mut(&version) {
            v.in_flight = false;
            v.acked = acked;
            // A failed put may still have published (the daemon went on
            // after its client died, or died after the commit): May.
            v.presence = if acked.is_some() {
                Presence::Must
            } else {
                Presence::May
            };
        }
    }

    pub(crate) fn moved(&mut self, from: &str, to: &str, acked: bool) {
        self.names.push(to.to_string());
        if !acked {
            self.retired.insert(from.to_string());
            self.retired.insert(to.to_string());
        }
        for v in self.versions.values_mut() {
            if !v.names.contains(from) {
                continue;
            }
            // Certain only for an acknowledged rename of a version known
            // to be there; otherwise under one of the two names (a put
            // whose client died may still land under the old one).
            let certain =
                acked && !v.in_flight && v.presence == Presence::Must && v.names.len() == 1;
            v.names.insert(to.to_string());
            if certain {
                v.names.remove(from);
            }
        }
    }

    pub(crate) fn removed(&mut self, version: u64, acked: bool) {
        if let Some(v) = self.versions.get_mut(&version) {
            v.presence = if acked { Presence::Gone } else { Presence::May };
        }
    }

    pub(crate) fn unfinished_dir(&self) -> Option<u64> {
        self.dirs
            .iter()
            .find(|(_, d)| d.ran && !d.acked)
            .map(|(k, _)| *k)
    }

    pub(crate) fn begin_dir(&mut self, k: u64, files: BTreeMap<String, [u8; 32]>) {
        self.dirs.insert(
            k,
            DirRun {
                files,
                acked: false,
                ran: false,
            },
        );
    }

    pub(crate) fn end_dir(&mut self, k: u64, acked: bool) {
        if let Some(d) = self.dirs.get_mut(&k) {
            d.ran = true;
            d.acked |= acked;
        }
    }

    pub(crate) fn flipped(&mut self, name: &str, version: u64) {
        match self.versions.get_mut(&version) {
            Some(v) => v.flipped = true,
            None => {
                self.flipped_files.insert((name.to_string(), version));
            }
        }
    }

    fn dir_file(&self, name: &str) -> Option<(&DirRun, [u8; 32])> {
        self.dirs
            .values()
            .find_map(|d| d.files.get(name).map(|h| (d, *h)))
    }

    /// The contents `name`/v=`version` may have, and whether a byte of it
    /// was flipped.
    pub(crate) fn expected(&self, name: &str, version: u64) -> (Vec<[u8; 32]>, bool) {
        if let Some(v) = self.versions.get(&version) {
            return (allowed(v), v.flipped);
        }
        match self.dir_file(name) {
            Some((_, h)) => (
                vec![h],
                self.flipped_files.contains(&(name.to_string(), version)),
            ),
            None => (Vec::new(), false),
        }
    }

    /// The listing after recovery against the history.
    pub(crate) fn check_listing(&self, listed: &[(String, u64)]) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen: BTreeMap<u64, &str> = BTreeMap::new();
        let mut dir_seen: BTreeSet<&str> = BTreeSet::new();
        for (n, ver) in listed {
            if self.dir_file(n).is_some() {
                dir_seen.insert(n);
                continue;
            }
            let Some(v) = self.versions.get(ver) else {
                out.push(format!(
                    "{n}/v={ver} is visible but no put made such a version"
                ));
                continue;
            };
            if let Some(other) = seen.insert(*ver, n) {
                out.push(format!(
                    "v={ver} is visible under two names: {other} and {n}"
                ));
            }
            if !v.names.contains(n) {
                out.push(format!(
                    "{n}/v={ver} is under a name it was never given (expected one of {:?})",
                    v.names
                ));
            }
            if v.presence == Presence::Gone {
                out.push(format!(
                    "{n}/v={ver} is visible though its removal was acknowledged"
                ));
            }
        }
        for (k, v) in &self.versions {
            if v.presence == Presence::Must && !seen.contains_key(k) {
                out.push(format!("v={k} (acknowledged, under {:?}) is lost", v.names));
            }
        }
        for (k, d) in &self.dirs {
            if !d.acked {
                continue;
            }
            for n in d.files.keys() {
                if !dir_seen.contains(n.as_str()) {
                    out.push(format!(
                        "{n} is missing although publish-dir run pd{k} was acknowledged"
                    ));
                }
            }
        }
        out
    }
}

/// The contents a fetch of `v` may return: the acknowledged writer's, or
/// any writer's when none was acknowledged.
fn allowed(v: &Version) -> Vec<[u8; 32]> {
    match v.acked {
        Some(h) => vec![h],
        None => v.candidates.clone(),
    }
}
