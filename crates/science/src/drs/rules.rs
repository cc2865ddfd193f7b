//! User rules files (TOML): other projects' syntaxes (CORDEX, obs4MIPs, …) without code.
//! See the crate README ("drs") for the format.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;
use serde::Deserialize;

use super::common::token;
use super::outcome::{DrsPath, Error, Mismatch, Parsed};
use super::vocab;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    project: Option<String>,
    root: Option<String>,
    dir_regex: Option<String>,
    file_regex: Option<String>,
    name: Option<Vec<String>>,
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
    cmip5: Option<Cmip5File>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReverseFile {
    dir: String,
}

/// `[cmip5]`: overrides of the built-in CMIP5 syntax's documented choices.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cmip5File {
    /// model -> institute a bare file name of that model is filed under.
    #[serde(default)]
    default_institute: BTreeMap<String, String>,
}

/// A checked rules file: a syntax for another project, overrides of the built-in CMIP5
/// syntax's defaults (`[cmip5]`), or both. A file with only `[cmip5]` has an empty
/// `project` and `root` and names nothing itself.
#[derive(Debug, Clone)]
pub struct Rules {
    pub project: String,
    pub root: String,
    /// Where the rules came from (the file's path), for the fixes that cite them.
    source: String,
    /// `[cmip5.default_institute]`: model -> institute (checked against the vocabulary).
    cmip5_default_institute: BTreeMap<String, String>,
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

/// `[cmip5.default_institute]`: each model must be a CMIP5 model (any punctuation; kept
/// in its directory spelling) and the institute one of that model's institutes.
fn check_default_institutes(
    m: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let v = vocab::cmip5().map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for (model, inst) in m {
        let Some(canon) = v.canonical_model(model) else {
            return Err(format!(
                "[cmip5.default_institute]: model '{}' is not in the CMIP5 vocabulary",
                model.escape_default()
            ));
        };
        let insts = v.model_institutes.get(canon).cloned().unwrap_or_default();
        if !insts.contains(inst) {
            return Err(format!(
                "[cmip5.default_institute]: '{}' is not an institute of model '{canon}' ({})",
                inst.escape_default(),
                insts.join(", ")
            ));
        }
        out.insert(canon.to_string(), inst.clone());
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
        let mut r = Rules::parse(&text).map_err(|msg| Error::Rules {
            path: path.display().to_string(),
            msg,
        })?;
        r.source = format!("rules file {}", path.display());
        Ok(r)
    }

    /// Check rules given as TOML text.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let f: RulesFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let cmip5_default_institute = match &f.cmip5 {
            Some(c) => check_default_institutes(&c.default_institute)?,
            None => BTreeMap::new(),
        };
        let syntax = f.project.is_some()
            || f.root.is_some()
            || f.name.is_some()
            || f.dir_regex.is_some()
            || f.file_regex.is_some();
        if !syntax {
            if f.cmip5.is_none() {
                return Err("defines neither a syntax (project, root, name, dir_regex/file_regex) nor [cmip5] overrides".into());
            }
            let others = [
                ("version_facet", f.version_facet.is_some()),
                ("time_range_facet", f.time_range_facet.is_some()),
                ("defaults", !f.defaults.is_empty()),
                ("rename", !f.rename.is_empty()),
                ("allowed", !f.allowed.is_empty()),
                ("attributes", !f.attributes.is_empty()),
                ("reverse", f.reverse.is_some()),
            ];
            if let Some((k, _)) = others.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "'{k}' belongs to a syntax, but the file has no project, root, name or regex"
                ));
            }
            return Ok(Rules {
                project: String::new(),
                root: String::new(),
                source: "rules".into(),
                cmip5_default_institute,
                dir_regex: None,
                file_regex: None,
                name: Vec::new(),
                version_facet: None,
                time_range_facet: None,
                defaults: BTreeMap::new(),
                rename: BTreeMap::new(),
                allowed: BTreeMap::new(),
                attributes: BTreeMap::new(),
                reverse_dir: None,
            });
        }
        let project = f.project.ok_or("a syntax needs 'project'")?;
        let root = f.root.ok_or("a syntax needs 'root'")?;
        let name = f.name.unwrap_or_default();
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
        if !root.starts_with('/') || root[1..].split('/').any(str::is_empty) {
            return Err(format!(
                "root '{root}' is not '/' followed by non-empty components"
            ));
        }
        if name.is_empty() {
            return Err("name lists no facets".into());
        }
        let renamed = |c: &str| f.rename.get(c).cloned().unwrap_or_else(|| c.to_string());
        let mut known: BTreeSet<String> = f.defaults.keys().cloned().collect();
        for r in [&dir_regex, &file_regex].into_iter().flatten() {
            known.extend(r.capture_names().flatten().map(renamed));
        }
        for n in &name {
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
                if ph != "version" && !name.contains(&ph) && !f.defaults.contains_key(&ph) {
                    return Err(format!(
                        "reverse.dir uses '{{{ph}}}', which is neither in the name nor a default"
                    ));
                }
            }
        }
        Ok(Rules {
            project,
            root,
            source: "rules".into(),
            cmip5_default_institute,
            dir_regex,
            file_regex,
            name,
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

    /// Whether the file defines a syntax of its own (else it only overrides CMIP5 defaults).
    pub fn has_syntax(&self) -> bool {
        self.dir_regex.is_some() || self.file_regex.is_some()
    }

    /// `[cmip5.default_institute]`: model -> institute.
    pub fn cmip5_default_institute(&self) -> &BTreeMap<String, String> {
        &self.cmip5_default_institute
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// None: these rules do not apply to the input.
    pub(crate) fn apply(&self, dirs: &[&str], file: &str) -> Option<Result<Parsed, String>> {
        if !self.has_syntax() {
            return None;
        }
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
