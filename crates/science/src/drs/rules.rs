//! User rules files (TOML): other projects' syntaxes (CORDEX, obs4MIPs, …) without code.
//! See the crate README ("drs") for the format.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;
use serde::Deserialize;

use super::common::token;
use super::outcome::{DrsPath, Error, Mismatch, Parsed};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    project: String,
    root: String,
    dir_regex: Option<String>,
    file_regex: Option<String>,
    name: Vec<String>,
    version_facet: Option<String>,
    time_range_facet: Option<String>,
    #[serde(default)]
    defaults: BTreeMap<String, String>,
    #[serde(default)]
    rename: BTreeMap<String, String>,
    #[serde(default)]
    allowed: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
    reverse: Option<ReverseFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReverseFile {
    dir: String,
}

/// A checked rules file.
#[derive(Debug, Clone)]
pub struct Rules {
    pub project: String,
    pub root: String,
    dir_regex: Option<Regex>,
    file_regex: Option<Regex>,
    name: Vec<String>,
    version_facet: Option<String>,
    time_range_facet: Option<String>,
    defaults: BTreeMap<String, String>,
    rename: BTreeMap<String, String>,
    allowed: BTreeMap<String, BTreeSet<String>>,
    attributes: BTreeMap<String, String>,
    reverse_dir: Option<String>,
}

/// `{facet}` placeholders of a template.
fn placeholders(t: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        let j = after
            .find('}')
            .ok_or_else(|| format!("unclosed '{{' in template '{t}'"))?;
        out.push(after[..j].to_string());
        rest = &after[j + 1..];
    }
    if rest.contains('}') {
        return Err(format!("stray '}}' in template '{t}'"));
    }
    Ok(out)
}

impl Rules {
    /// Read and check a rules file.
    pub fn load(path: &Path) -> Result<Rules, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::RulesIo {
            path: path.display().to_string(),
            source,
        })?;
        Rules::parse(&text).map_err(|msg| Error::Rules {
            path: path.display().to_string(),
            msg,
        })
    }

    /// Check rules given as TOML text.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let f: RulesFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let compile = |what: &str, r: &Option<String>| -> Result<Option<Regex>, String> {
            r.as_deref()
                .map(|s| Regex::new(s).map_err(|e| format!("{what}: {e}")))
                .transpose()
        };
        let dir_regex = compile("dir_regex", &f.dir_regex)?;
        let file_regex = compile("file_regex", &f.file_regex)?;
        if dir_regex.is_none() && file_regex.is_none() {
            return Err("needs dir_regex or file_regex (or both)".into());
        }
        if !f.root.starts_with('/') || f.root[1..].split('/').any(str::is_empty) {
            return Err(format!(
                "root '{}' is not '/' followed by non-empty components",
                f.root
            ));
        }
        if f.name.is_empty() {
            return Err("name lists no facets".into());
        }
        let renamed = |c: &str| f.rename.get(c).cloned().unwrap_or_else(|| c.to_string());
        let mut known: BTreeSet<String> = f.defaults.keys().cloned().collect();
        for r in [&dir_regex, &file_regex].into_iter().flatten() {
            known.extend(r.capture_names().flatten().map(renamed));
        }
        for n in &f.name {
            if !known.contains(n) {
                return Err(format!(
                    "name facet '{n}' is neither captured by a regex nor given a default"
                ));
            }
            if Some(n) == f.version_facet.as_ref() {
                return Err(format!("the version facet '{n}' must not be in the name"));
            }
        }
        for k in f.allowed.keys().chain(f.attributes.keys()) {
            if !known.contains(k) {
                return Err(format!(
                    "facet '{k}' (in allowed or attributes) is never set"
                ));
            }
        }
        for k in f.version_facet.iter().chain(f.time_range_facet.iter()) {
            if !known.contains(k) {
                return Err(format!(
                    "facet '{k}' (version_facet or time_range_facet) is never captured"
                ));
            }
        }
        if let Some(r) = &f.reverse {
            for ph in placeholders(&r.dir)? {
                if ph != "version" && !f.name.contains(&ph) && !f.defaults.contains_key(&ph) {
                    return Err(format!(
                        "reverse.dir uses '{{{ph}}}', which is neither in the name nor a default"
                    ));
                }
            }
        }
        Ok(Rules {
            project: f.project,
            root: f.root,
            dir_regex,
            file_regex,
            name: f.name,
            version_facet: f.version_facet,
            time_range_facet: f.time_range_facet,
            defaults: f.defaults,
            rename: f.rename,
            allowed: f
                .allowed
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect(),
            attributes: f.attributes,
            reverse_dir: f.reverse.map(|r| r.dir),
        })
    }

    fn capture(
        &self,
        re: &Regex,
        text: &str,
        facets: &mut BTreeMap<String, String>,
        what: &str,
    ) -> Option<Result<(), String>> {
        let c = re.captures(text)?;
        for n in re.capture_names().flatten() {
            let Some(m) = c.name(n) else { continue };
            let facet = self.rename.get(n).cloned().unwrap_or_else(|| n.to_string());
            if let Some(old) = facets.get(&facet) {
                if old != m.as_str() {
                    return Some(Err(format!(
                        "{} rules: the directory says {facet} '{old}' but the {what} says '{}'",
                        self.project,
                        m.as_str()
                    )));
                }
            }
            facets.insert(facet, m.as_str().to_string());
        }
        Some(Ok(()))
    }

    /// None: these rules do not apply to the input.
    pub(crate) fn apply(&self, dirs: &[&str], file: &str) -> Option<Result<Parsed, String>> {
        let mut facets = BTreeMap::new();
        if let Some(re) = &self.dir_regex {
            if !dirs.is_empty() || self.file_regex.is_none() {
                let dir = dirs.join("/");
                match self.capture(re, &dir, &mut facets, "directory") {
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Some(Err(e)),
                    None if self.file_regex.as_ref().is_some_and(|f| f.is_match(file)) => {
                        return Some(Err(format!(
                            "file name '{file}' fits the {} rules but its directory does not match their dir_regex",
                            self.project
                        )))
                    }
                    None => return None,
                }
            }
        }
        if let Some(re) = &self.file_regex {
            match self.capture(re, file, &mut facets, "file name") {
                Some(Ok(())) => {}
                Some(Err(e)) => return Some(Err(e)),
                None => return None,
            }
        }
        Some(self.finish(facets, file))
    }

    fn finish(&self, mut facets: BTreeMap<String, String>, file: &str) -> Result<Parsed, String> {
        for (k, v) in &self.defaults {
            facets.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, allowed) in &self.allowed {
            if let Some(v) = facets.get(k) {
                if !allowed.contains(v) {
                    return Err(format!(
                        "{k} '{}' is not in the {} rules' allowed values",
                        v.escape_default(),
                        self.project
                    ));
                }
            }
        }
        let mut name_facets = Vec::new();
        for n in &self.name {
            let v = facets.get(n).ok_or_else(|| {
                format!(
                    "{} rules: facet '{n}' for the name is missing",
                    self.project
                )
            })?;
            token(n, v)?;
            name_facets.push(v.clone());
        }
        let version = match &self.version_facet {
            Some(k) => facets.remove(k),
            None => None,
        };
        let time_range = self
            .time_range_facet
            .as_ref()
            .and_then(|k| facets.get(k).cloned());
        facets
            .entry("project".into())
            .or_insert_with(|| self.project.clone());
        Ok(Parsed {
            project: self.project.clone(),
            facets,
            file: file.to_string(),
            version,
            time_range,
            fixes: Vec::new(),
            name_facets,
        })
    }

    pub(crate) fn cross_check(
        &self,
        p: &Parsed,
        attrs: Option<&BTreeMap<String, String>>,
    ) -> Vec<Mismatch> {
        let Some(a) = attrs else { return Vec::new() };
        let mut out = Vec::new();
        for (facet, attribute) in &self.attributes {
            if let (Some(av), Some(nv)) = (a.get(attribute), p.facets.get(facet)) {
                if av != nv {
                    out.push(Mismatch {
                        facet: facet.clone(),
                        attribute: attribute.clone(),
                        name_value: nv.clone(),
                        attribute_value: av.clone(),
                    });
                }
            }
        }
        out
    }

    pub(crate) fn reverse(&self, c: &[String], version: &str) -> Result<DrsPath, Error> {
        let t = self.reverse_dir.as_ref().ok_or_else(|| {
            Error::Reverse(format!(
                "the {} rules have no reverse.dir template",
                self.project
            ))
        })?;
        if c.len() != self.name.len() + 1 {
            return Err(Error::Reverse(format!(
                "a {} name has {} components after the root, this one has {}",
                self.project,
                self.name.len() + 1,
                c.len()
            )));
        }
        let mut vals: BTreeMap<&str, &str> = self
            .defaults
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for (k, v) in self.name.iter().zip(c) {
            token(k, v).map_err(Error::Reverse)?;
            vals.insert(k, v);
        }
        vals.insert("version", version);
        let mut dir = t.clone();
        for ph in placeholders(t).map_err(Error::Reverse)? {
            let v = vals
                .get(ph.as_str())
                .ok_or_else(|| Error::Reverse(format!("no value for '{{{ph}}}'")))?;
            dir = dir.replacen(&format!("{{{ph}}}"), v, 1);
        }
        if !dir.ends_with('/') {
            dir.push('/');
        }
        Ok(DrsPath {
            dir,
            file: c[self.name.len()].clone(),
        })
    }
}
