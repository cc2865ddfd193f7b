//! DRS name translation (CMIP6, CMIP5, user rules files).
//!
//! A file path (or only its file name) written in a data reference syntax becomes an NDN
//! name under a configurable root, with its facets (ESGF facet names), and back. Every input
//! gets exactly one [`Outcome`]: `translated`, `fixed` (with the named fixes applied) or
//! `rejected` (with a precise reason). The DRS version (`v20190429`) is not part of the
//! name; it is kept in the outcome (`drs_version`) and as the facet `version`.
//!
//! Modules: `outcome` (what translation produces, and its errors), `vocab` (vendored
//! vocabularies, parsed once), `common` (path checks, time ranges, what the parsers
//! share), `cmip6`, `cmip5` (built-in syntaxes and their fixes), `rules` (user TOML
//! rules).

mod cmip5;
mod cmip6;
mod common;
mod outcome;
mod rules;
mod vocab;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

pub use outcome::{DrsPath, Error, Fix, FixCode, Mismatch, Outcome, Status};
pub use rules::Rules;

use outcome::Parsed;

/// Which side wins when the file's attributes disagree with its path. The mismatch is
/// reported either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    #[default]
    Name,
    Attributes,
}

/// Translator configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Name prefix for CMIP6, default `/cmip6`.
    pub cmip6_root: String,
    /// Name prefix for CMIP5, default `/cmip5`.
    pub cmip5_root: String,
    pub trust: Trust,
    /// User rules (other projects); tried before the built-in CMIP6/CMIP5 syntaxes.
    pub rules: Vec<Rules>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cmip6_root: "/cmip6".into(),
            cmip5_root: "/cmip5".into(),
            trust: Trust::Name,
            rules: Vec::new(),
        }
    }
}

/// Percent-escape name components as an NDN canonical URI (`/a/b%20c`): unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) stay, every other byte is `%XX`; a component of only
/// periods gets three more.
pub fn uri(components: &[String]) -> String {
    if components.is_empty() {
        return "/".into();
    }
    let mut out = String::new();
    for c in components {
        out.push('/');
        if c.bytes().all(|b| b == b'.') {
            out.push_str("...");
        }
        for b in c.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

fn root_components(root: &str) -> Result<Vec<String>, Error> {
    let rest = root
        .strip_prefix('/')
        .ok_or_else(|| Error::BadRoot(root.to_string()))?;
    let comps: Vec<String> = rest.split('/').map(str::to_string).collect();
    if comps.iter().any(|c| c.is_empty()) {
        return Err(Error::BadRoot(root.to_string()));
    }
    Ok(comps)
}

/// Translates DRS paths to names and back. Cheap to share (`&self` everywhere).
#[derive(Debug)]
pub struct Translator {
    cfg: Config,
    cmip6_root: Vec<String>,
    cmip5_root: Vec<String>,
    /// `[cmip5.default_institute]` of the rules files: model -> (institute, source); the
    /// first file naming a model wins.
    cmip5_institutes: cmip5::InstituteOverrides,
}

impl Translator {
    pub fn new(cfg: Config) -> Result<Self, Error> {
        // Parse the vocabularies now, so a broken build fails here and not per input.
        vocab::cmip6()?;
        vocab::cmip5()?;
        let cmip6_root = root_components(&cfg.cmip6_root)?;
        let cmip5_root = root_components(&cfg.cmip5_root)?;
        let mut cmip5_institutes = cmip5::InstituteOverrides::new();
        for r in &cfg.rules {
            if r.has_syntax() {
                root_components(&r.root)?;
            }
            for (model, inst) in r.cmip5_default_institute() {
                cmip5_institutes
                    .entry(model.clone())
                    .or_insert_with(|| (inst.clone(), r.source().to_string()));
            }
        }
        Ok(Translator {
            cfg,
            cmip6_root,
            cmip5_root,
            cmip5_institutes,
        })
    }

    /// Read and check a TOML rules file.
    pub fn load_rules(path: &Path) -> Result<Rules, Error> {
        Rules::load(path)
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Translate a DRS path (or a bare file name), optionally cross-checked against the
    /// file's global attributes.
    pub fn translate(&self, path: &str, attrs: Option<&BTreeMap<String, String>>) -> Outcome {
        let (dirs, file) = match common::split_input(path) {
            Ok(x) => x,
            Err(reason) => return Outcome::rejected(path, reason),
        };
        for r in &self.cfg.rules {
            match r.apply(&dirs, file) {
                None => continue,
                Some(Err(reason)) => return Outcome::rejected(path, reason),
                Some(Ok(p)) => {
                    let root = root_components(&r.root).unwrap_or_default();
                    let mismatches = r.cross_check(&p, attrs);
                    return self.finish(path, p, root, mismatches);
                }
            }
        }
        let parsed = common::detect_project(&dirs, file).and_then(|project| {
            let parsed = match project {
                common::Project::Cmip6 => cmip6::parse(&dirs, file, attrs),
                common::Project::Cmip5 => cmip5::parse(&dirs, file, attrs, &self.cmip5_institutes),
            };
            parsed.map(|p| (project, p))
        });
        let (project, mut p) = match parsed {
            Ok(x) => x,
            Err(reason) => return self.named_from_attributes(path, &dirs, file, attrs, reason),
        };
        let root = match project {
            common::Project::Cmip6 => &self.cmip6_root,
            common::Project::Cmip5 => &self.cmip5_root,
        };
        let checked = match (project, attrs) {
            (_, None) => Vec::new(),
            (common::Project::Cmip6, Some(a)) => cmip6::cross_check(&p, a),
            (common::Project::Cmip5, Some(a)) => cmip5::cross_check(&p, a),
        };
        let mismatches: Vec<Mismatch> = checked.iter().map(|(m, _)| m.clone()).collect();
        // The realm and the frequency are no part of the name: an attribute that
        // disagrees with the MIP table is reported, and trusting attributes does not
        // rename the file for it.
        let renaming: Vec<&(Mismatch, String)> = checked
            .iter()
            .filter(|(m, _)| m.facet != "realm" && m.facet != "frequency")
            .collect();
        if self.cfg.trust == Trust::Attributes && !renaming.is_empty() {
            let mut facets = p.facets.clone();
            for (m, replacement) in renaming.iter().copied() {
                facets.insert(m.facet.clone(), replacement.clone());
            }
            let (tr, v) = (p.time_range.as_deref(), p.version.as_deref());
            let rebuilt = match project {
                common::Project::Cmip6 => cmip6::from_facets(&facets, tr, v),
                common::Project::Cmip5 => {
                    cmip5::from_facets(&facets, tr, v, &self.cmip5_institutes)
                }
            };
            match rebuilt {
                Ok(mut q) => {
                    q.fixes = std::mem::take(&mut p.fixes);
                    let list: Vec<String> = renaming
                        .iter()
                        .map(|(m, _)| format!("{}={}", m.facet, m.attribute_value))
                        .collect();
                    q.fix(FixCode::AttributesTrusted, list.join(", "));
                    p = q;
                }
                Err(e) => {
                    return Outcome::rejected(
                        path,
                        format!(
                            "trust = attributes, but the attributes do not make a valid name: {e}"
                        ),
                    )
                }
            }
        }
        self.finish(path, p, root.clone(), mismatches)
    }

    /// A name that does not translate: rejected with `reason`, unless attributes are
    /// trusted and they name a valid CMIP6 file (then translated from them, the fix
    /// naming what the name got wrong).
    fn named_from_attributes(
        &self,
        path: &str,
        dirs: &[&str],
        file: &str,
        attrs: Option<&BTreeMap<String, String>>,
        reason: String,
    ) -> Outcome {
        let rebuilt = match (self.cfg.trust, attrs) {
            (Trust::Attributes, Some(a)) => cmip6::from_attributes(dirs, file, a),
            _ => None,
        };
        match rebuilt {
            None => Outcome::rejected(path, reason),
            Some(Err(e)) => Outcome::rejected(
                path,
                format!("{reason}; trust = attributes, but the attributes do not make a valid name: {e}"),
            ),
            Some(Ok(mut p)) => {
                let fixes = std::mem::take(&mut p.fixes);
                p.fix(
                    FixCode::AttributesTrusted,
                    format!("the name does not translate ({reason}); named from the attributes"),
                );
                p.fixes.extend(fixes);
                let checked = attrs.map(|a| cmip6::cross_check(&p, a)).unwrap_or_default();
                let mismatches = checked.into_iter().map(|(m, _)| m).collect();
                self.finish(path, p, self.cmip6_root.clone(), mismatches)
            }
        }
    }

    fn finish(
        &self,
        input: &str,
        p: Parsed,
        mut name: Vec<String>,
        mismatches: Vec<Mismatch>,
    ) -> Outcome {
        name.extend(p.name_facets.iter().cloned());
        name.push(p.file.clone());
        let mut facets = p.facets;
        if let Some(v) = &p.version {
            facets.insert("version".into(), v.clone());
        }
        Outcome {
            input: input.to_string(),
            status: if p.fixes.is_empty() {
                Status::Translated
            } else {
                Status::Fixed
            },
            fixes: p.fixes,
            reason: None,
            project: Some(p.project),
            uri: Some(uri(&name)),
            name,
            facets,
            drs_version: p.version,
            time_range: p.time_range,
            mismatches,
        }
    }

    /// Name components (as in [`Outcome::name`]) and the DRS version -> DRS directory and
    /// file name.
    pub fn reverse(&self, components: &[String], drs_version: &str) -> Result<DrsPath, Error> {
        for r in self.cfg.rules.iter().filter(|r| r.has_syntax()) {
            let root = root_components(&r.root)?;
            if components.starts_with(&root) {
                return r.reverse(&components[root.len()..], drs_version);
            }
        }
        if components.starts_with(&self.cmip6_root) {
            return cmip6::reverse(&components[self.cmip6_root.len()..], drs_version);
        }
        if components.starts_with(&self.cmip5_root) {
            return cmip5::reverse(&components[self.cmip5_root.len()..], drs_version);
        }
        Err(Error::Reverse(format!(
            "name {} is under none of the configured roots",
            uri(components)
        )))
    }
}
