//! `archcheck`: the workspace's architecture rules, checked in CI.
//!
//! Three rules, all stated in docs/architecture.md:
//!
//! 1. **Layers.** Every workspace crate has a layer in [`LAYERS`]; a crate's
//!    `[dependencies]` may name only workspace crates of a strictly lower
//!    layer. A new crate must be given a layer here before CI passes.
//! 2. **No module cycles.** Inside each crate, sibling modules must not use
//!    each other in a ring. A reference from module `a::x` to `b::y` (by a
//!    `crate::`, `super::` or `self::` path, in a `use` or in an expression,
//!    including inside macro calls) counts as an edge `a -> b` between the
//!    two siblings under their lowest common ancestor; references between a
//!    module and its own ancestors do not count (a parent is the facade of
//!    its children). Re-exports (`pub use`) are followed to the module that
//!    defines the name. `#[cfg(test)]` items are left out: test code may
//!    reach anywhere.
//! 3. **Only through.** Some crates reach some others only through a third
//!    ([`ONLY_THROUGH`]): the binary reaches the store, transfer and
//!    repository crates (and their manifest format) only through
//!    `granary-node`. Neither its `[dependencies]` (build and per-target
//!    ones too, renamed or not) nor its sources (outside `#[cfg(test)]`)
//!    name them; its integration tests (dev-dependencies) may.
//! 4. **One owner per engine.** Some third-party crates belong to one
//!    workspace crate ([`OWNED`]): HTTP servers to the gateway, SQL clients to
//!    the catalog, FUSE to the mount, terminal progress to the binary; the
//!    packet, manifest and management codecs have no runtime or I/O crate.
//!    Only `[dependencies]` count (tests and benchmarks may use anything).
//! 5. **Decision records are append-only.** Every `docs/decisions/NNNN-*.md`
//!    has its SHA-256 in `docs/decisions/records.sha256` (`sha256sum` format);
//!    a record whose bytes changed, or that is not listed, is a violation. An
//!    amendment is a new record naming the old one; a new record's line is
//!    appended with `sha256sum docs/decisions/NNNN-*.md >> docs/decisions/records.sha256`.
//!
//! Exit status: 0 when all hold, 1 with one line per violation otherwise,
//! 2 when a file cannot be read or parsed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Workspace crates by layer, lowest first. A crate may depend only on
/// crates of a strictly lower layer.
const LAYERS: &[(&str, u32)] = &[
    // Leaves: no workspace dependency.
    ("granary-packet", 0),
    ("granary-catalog", 0),
    ("granary-testbed", 0),
    // Packet-level services, and the science layer (the packet crate's calendar).
    ("granary-science", 1),
    ("granary-security", 1),
    ("granary-mgmt", 1),
    ("granary-face", 1),
    ("granary-store", 1),
    ("granary-manifest", 2),
    ("granary-forwarder", 2),
    ("granary-app", 2),
    // Moving bytes.
    ("granary-transfer", 3),
    ("granary-repo", 4),
    ("granary-mount", 4),
    ("granary-search", 5),
    ("granary-gateway", 6),
    // Assembly and measurement, under the binary.
    ("granary-node", 7),
    ("granary-measure", 7),
    ("granary", 8),
    // Harnesses on top of everything.
    ("granary-bench", 9),
    ("granary-faults", 9),
    ("archcheck", 9),
];

/// (crate, workspace crates it must not name, the crate it reaches them
/// through): neither in `[dependencies]` nor as a path in its sources.
const ONLY_THROUGH: &[(&str, &[&str], &str)] = &[(
    "granary",
    &[
        "granary-store",
        "granary-transfer",
        "granary-repo",
        "granary-manifest",
    ],
    "granary-node",
)];

/// (third-party crate, the workspace crates that may have it in
/// `[dependencies]`, the invariant it keeps): rule 4.
const OWNED: &[(&str, &[&str], &str)] = &[
    (
        "axum",
        &["granary-gateway"],
        "nothing below the gateway knows HTTP",
    ),
    (
        "hyper",
        &["granary-gateway"],
        "nothing below the gateway knows HTTP",
    ),
    (
        "hyper-util",
        &["granary-gateway"],
        "nothing below the gateway knows HTTP",
    ),
    (
        "rusqlite",
        &["granary-catalog"],
        "only granary-catalog speaks SQL",
    ),
    (
        "postgres",
        &["granary-catalog"],
        "only granary-catalog speaks SQL",
    ),
    (
        "tokio-postgres",
        &["granary-catalog"],
        "only granary-catalog speaks SQL",
    ),
    (
        "fuser",
        &["granary-mount"],
        "only the mount talks to the kernel's FUSE",
    ),
    ("indicatif", &["granary"], "only the binary prints progress"),
];

/// (workspace crate, third-party crates it must not have in
/// `[dependencies]`, why): the rest of rule 4.
const WITHOUT: &[(&str, &[&str], &str)] = &[
    (
        "granary-packet",
        &["tokio", "mio"],
        "the packet codec does no I/O",
    ),
    (
        "granary-manifest",
        &["tokio", "mio"],
        "manifests are computed, not fetched",
    ),
    (
        "granary-mgmt",
        &["tokio", "mio"],
        "the management codec does no I/O",
    ),
    (
        "granary-security",
        &["tokio", "mio"],
        "security does no network I/O",
    ),
    (
        "granary-science",
        &["tokio", "mio"],
        "the science layer does no network I/O",
    ),
    (
        "granary-node",
        &["clap"],
        "the node library knows no command line",
    ),
];

fn main() -> ExitCode {
    let root = match std::env::args().nth(1) {
        Some(p) => PathBuf::from(p),
        None => match workspace_root() {
            Some(r) => r,
            None => {
                eprintln!("archcheck: no workspace Cargo.toml here or above; pass its folder");
                return ExitCode::from(2);
            }
        },
    };
    match run(&root) {
        Ok(violations) if violations.is_empty() => {
            println!("archcheck: layers, module graph, only-through, one-owner and append-only decision rules clean");
            ExitCode::SUCCESS
        }
        Ok(violations) => {
            for v in &violations {
                eprintln!("{v}");
            }
            eprintln!(
                "archcheck: {} violation(s); see docs/architecture.md (layers, no module cycles, only through, one owner, append-only decisions)",
                violations.len()
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("archcheck: {e}");
            ExitCode::from(2)
        }
    }
}

/// The nearest folder at or above the current one whose Cargo.toml has a
/// `[workspace]` table (where `cargo run -p archcheck` is started).
fn workspace_root() -> Option<PathBuf> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let manifest = dir.join("Cargo.toml");
        if read_toml(&manifest).is_ok_and(|t| t.get("workspace").is_some()) {
            return Some(dir);
        }
        if !dir.pop() {
            return None;
        }
    }
}

fn run(root: &Path) -> Result<Vec<String>, String> {
    let members = workspace_members(root)?;
    let mut violations = Vec::new();
    let layers: HashMap<&str, u32> = LAYERS.iter().copied().collect();
    for dir in &members {
        let manifest = read_toml(&dir.join("Cargo.toml"))?;
        let name = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .ok_or_else(|| format!("{}: no package name", dir.display()))?
            .to_string();
        violations.extend(check_layers(&name, &manifest, &layers));
        violations.extend(check_only_through(&name, &manifest));
        violations.extend(check_owned(&name, &manifest));
        for src_root in crate_roots(dir, &manifest) {
            let graph = ModuleGraph::load(&src_root)?;
            violations.extend(graph.cycles(&name));
            violations.extend(graph.only_through(&name)?);
        }
    }
    violations.extend(check_decisions(root)?);
    Ok(violations)
}

/// Rule 5: every decision record listed with its SHA-256, and unchanged.
fn check_decisions(root: &Path) -> Result<Vec<String>, String> {
    use sha2::{Digest, Sha256};
    let dir = root.join("docs/decisions");
    let list_path = dir.join("records.sha256");
    let list =
        std::fs::read_to_string(&list_path).map_err(|e| format!("{}: {e}", list_path.display()))?;
    let mut listed = HashMap::new();
    for (n, line) in list.lines().enumerate() {
        let Some((hash, path)) = line.split_once("  ") else {
            return Err(format!(
                "{}:{}: not `<sha256>  <path>`",
                list_path.display(),
                n + 1
            ));
        };
        listed.insert(path.to_string(), hash.to_string());
    }
    let mut out = Vec::new();
    let mut records: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.ends_with(".md") && n.as_bytes().first().is_some_and(u8::is_ascii_digit)
            })
        })
        .collect();
    records.sort();
    for p in records {
        let rel = format!(
            "docs/decisions/{}",
            p.file_name().and_then(|n| n.to_str()).unwrap_or_default()
        );
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let hash = hex::encode(Sha256::digest(&bytes));
        match listed.get(&rel) {
            None => out.push(format!(
                "decisions: {rel} is not in docs/decisions/records.sha256; once the record is final, `sha256sum {rel} >> docs/decisions/records.sha256`"
            )),
            Some(h) if *h != hash => out.push(format!(
                "decisions: {rel} was edited; records are append-only (docs/decisions/README.md): restore it and write a new record that names it"
            )),
            Some(_) => {}
        }
    }
    Ok(out)
}

fn read_toml(path: &Path) -> Result<toml::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.parse::<toml::Value>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn workspace_members(root: &Path) -> Result<Vec<PathBuf>, String> {
    let ws = read_toml(&root.join("Cargo.toml"))?;
    let members = ws
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .ok_or("root Cargo.toml has no [workspace] members")?;
    Ok(members
        .iter()
        .filter_map(|m| m.as_str())
        .map(|m| root.join(m))
        .collect())
}

fn check_layers(name: &str, manifest: &toml::Value, layers: &HashMap<&str, u32>) -> Vec<String> {
    let Some(&own) = layers.get(name) else {
        return vec![format!(
            "layers: crate {name} has no layer; add it to LAYERS in tools/archcheck/src/main.rs and to the diagram in docs/architecture.md"
        )];
    };
    let mut out = Vec::new();
    let deps = manifest.get("dependencies").and_then(|d| d.as_table());
    for dep in deps.into_iter().flat_map(|t| t.keys()) {
        if !(dep.starts_with("granary") || dep == "archcheck") {
            continue;
        }
        match layers.get(dep.as_str()) {
            None => out.push(format!(
                "layers: {name} depends on {dep}, which has no layer in tools/archcheck/src/main.rs"
            )),
            Some(&theirs) if theirs >= own => out.push(format!(
                "layers: {name} (layer {own}) depends on {dep} (layer {theirs}): lower layers never import higher ones"
            )),
            Some(_) => {}
        }
    }
    out
}

/// The packages a manifest's build sees: `[dependencies]` and
/// `[build-dependencies]`, also per target (`[target.'cfg(…)'.dependencies]`),
/// each by its package name (`package = …` for a renamed one).
fn built_with(manifest: &toml::Value) -> Vec<String> {
    let tables = ["dependencies", "build-dependencies"];
    let targets = manifest.get("target").and_then(|t| t.as_table());
    let mut out = Vec::new();
    let sections = tables.iter().filter_map(|t| manifest.get(*t)).chain(
        targets
            .into_iter()
            .flat_map(|t| t.values())
            .flat_map(|t| tables.iter().filter_map(move |k| t.get(*k))),
    );
    for deps in sections.filter_map(|d| d.as_table()) {
        for (key, spec) in deps {
            let package = spec.get("package").and_then(|p| p.as_str());
            out.push(package.unwrap_or(key).to_string());
        }
    }
    out
}

/// Rule 3 on a manifest: a dependency ([`built_with`]) on a crate
/// [`ONLY_THROUGH`] forbids.
fn check_only_through(name: &str, manifest: &toml::Value) -> Vec<String> {
    let Some((_, banned, via)) = ONLY_THROUGH.iter().find(|(c, _, _)| *c == name) else {
        return Vec::new();
    };
    built_with(manifest)
        .into_iter()
        .filter(|d| banned.contains(&d.as_str()))
        .map(|d| {
            format!(
                "only through: {name} depends on {d}; it reaches {} only through {via} (a dev-dependency for its tests is fine)",
                banned.join(", ")
            )
        })
        .collect()
}

/// Rule 4 on a manifest: a third-party crate [`OWNED`] by other crates.
fn check_owned(name: &str, manifest: &toml::Value) -> Vec<String> {
    let deps = manifest.get("dependencies").and_then(|d| d.as_table());
    deps.into_iter()
        .flat_map(|t| t.keys())
        .filter_map(|d| OWNED.iter().find(|(dep, _, _)| dep == d))
        .filter(|(_, owners, _)| !owners.contains(&name))
        .map(|(dep, owners, why)| {
            format!(
                "one owner: {name} depends on {dep}, which only {} may have ({why})",
                owners.join(", ")
            )
        })
        .chain(
            WITHOUT
                .iter()
                .filter(|(c, _, _)| *c == name)
                .flat_map(|(_, banned, why)| banned.iter().map(move |b| (b, why)))
                .filter(|(b, _)| deps.is_some_and(|t| t.contains_key(**b)))
                .map(|(b, why)| format!("one owner: {name} depends on {b} ({why})")),
        )
        .collect()
}

/// The source roots of a package: its library and binaries.
fn crate_roots(dir: &Path, manifest: &toml::Value) -> Vec<PathBuf> {
    let mut roots = BTreeSet::new();
    for default in ["src/lib.rs", "src/main.rs"] {
        let p = dir.join(default);
        if p.is_file() {
            roots.insert(p);
        }
    }
    for section in ["lib", "bin"] {
        let entries: Vec<&toml::Value> = match manifest.get(section) {
            Some(toml::Value::Array(a)) => a.iter().collect(),
            Some(v @ toml::Value::Table(_)) => vec![v],
            _ => vec![],
        };
        for e in entries {
            if let Some(p) = e.get("path").and_then(|p| p.as_str()) {
                roots.insert(dir.join(p));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir.join("src/bin")) {
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "rs") {
                roots.insert(e.path());
            }
        }
    }
    roots.into_iter().collect()
}

type ModPath = Vec<String>;

/// One module: where it is, its child modules and its re-exports.
#[derive(Default)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    /// `pub use` re-exports: exported name -> the path it names (absolute
    /// module path of the `use`'s base plus segments), `None` key for globs.
    reexports: Vec<(Option<String>, Ref)>,
    /// Every path this module names outside test code.
    refs: Vec<Ref>,
}

/// A path written in a module, made absolute from the crate root where it
/// starts with `crate`, `super` or `self`.
#[derive(Clone)]
struct Ref {
    segments: Vec<String>,
    line: usize,
}

struct ModuleGraph {
    root: PathBuf,
    modules: BTreeMap<ModPath, Module>,
}

impl ModuleGraph {
    fn load(root_file: &Path) -> Result<Self, String> {
        let mut g = ModuleGraph {
            root: root_file.to_path_buf(),
            modules: BTreeMap::new(),
        };
        let dir = root_file.parent().unwrap_or(Path::new(".")).to_path_buf();
        g.load_file(vec![], root_file, &dir)?;
        Ok(g)
    }

    /// Parses `file` as module `path`; `child_dir` is where its `mod x;`
    /// children live.
    fn load_file(&mut self, path: ModPath, file: &Path, child_dir: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let ast = syn::parse_file(&text)
            .map_err(|e| format!("{}:{}: {e}", file.display(), e.span().start().line))?;
        self.load_items(path, file, child_dir, &ast.items)
    }

    fn load_items(
        &mut self,
        path: ModPath,
        file: &Path,
        child_dir: &Path,
        items: &[syn::Item],
    ) -> Result<(), String> {
        let mut module = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let mut nested = Vec::new();
        // Uniform paths: `use child::x` in a module names its own child.
        let local: BTreeSet<String> = items
            .iter()
            .filter_map(|i| match i {
                syn::Item::Mod(m) if !is_test_only(&m.attrs) => Some(m.ident.to_string()),
                _ => None,
            })
            .collect();
        for item in items {
            if is_test_only(item_attrs(item)) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    module.children.insert(name.clone());
                    nested.push(m);
                }
                syn::Item::Use(u) => {
                    let mut flat = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut flat);
                    let line = u.use_token.span.start().line;
                    for (mut segs, alias) in flat {
                        if segs.first().is_some_and(|f| local.contains(f)) {
                            segs.insert(0, "self".to_string());
                        }
                        let Some(abs) = absolute(&path, &segs) else {
                            continue;
                        };
                        let r = Ref {
                            segments: abs,
                            line,
                        };
                        if matches!(
                            u.vis,
                            syn::Visibility::Public(_) | syn::Visibility::Restricted(_)
                        ) {
                            module.reexports.push((alias, r.clone()));
                        }
                        module.refs.push(r);
                    }
                }
                other => {
                    let mut v = PathCollector {
                        base: &path,
                        refs: &mut module.refs,
                    };
                    v.visit_item(other);
                }
            }
        }
        self.modules.insert(path.clone(), module);
        for m in nested {
            let name = m.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            let explicit = path_attr(&m.attrs);
            match &m.content {
                Some((_, items)) => {
                    let dir = child_dir.join(&name);
                    self.load_items(child, file, &dir, items)?;
                }
                None => {
                    let (child_file, dir) = match explicit {
                        Some(p) => {
                            let f = child_dir.join(p);
                            let d = f.parent().unwrap_or(child_dir).to_path_buf();
                            (f, d)
                        }
                        None => {
                            let flat = child_dir.join(format!("{name}.rs"));
                            if flat.is_file() {
                                (flat, child_dir.join(&name))
                            } else {
                                let d = child_dir.join(&name);
                                (d.join("mod.rs"), d)
                            }
                        }
                    };
                    self.load_file(child, &child_file, &dir)?;
                }
            }
        }
        Ok(())
    }

    /// The module a path names: descends through child modules, then
    /// follows a re-export of the next name if there is one.
    fn resolve(&self, segments: &[String], depth: u32) -> ModPath {
        let mut at: ModPath = vec![];
        for (i, seg) in segments.iter().enumerate() {
            let Some(m) = self.modules.get(&at) else {
                break;
            };
            if m.children.contains(seg) {
                at.push(seg.clone());
                continue;
            }
            if depth < 8 {
                for (alias, target) in &m.reexports {
                    let named = match alias {
                        Some(a) => a == seg,
                        None => false,
                    };
                    if named {
                        let mut rest = target.segments.clone();
                        rest.extend(segments[i + 1..].iter().cloned());
                        return self.resolve(&rest, depth + 1);
                    }
                }
            }
            break;
        }
        at
    }

    /// Rule 3 on the sources: a path (in a `use`, in code or in a macro
    /// call) starting with a crate [`ONLY_THROUGH`] forbids `krate`, one
    /// line each with its file:line.
    fn only_through(&self, krate: &str) -> Result<Vec<String>, String> {
        let Some((_, banned, via)) = ONLY_THROUGH.iter().find(|(c, _, _)| *c == krate) else {
            return Ok(Vec::new());
        };
        let idents: Vec<String> = banned.iter().map(|b| b.replace('-', "_")).collect();
        let files: BTreeSet<&PathBuf> = self.modules.values().map(|m| &m.file).collect();
        let mut out = Vec::new();
        for file in files {
            let text =
                std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
            let ast = syn::parse_file(&text)
                .map_err(|e| format!("{}:{}: {e}", file.display(), e.span().start().line))?;
            let mut v = CrateUses {
                crates: &idents,
                found: Vec::new(),
            };
            v.visit_file(&ast);
            for (c, line) in v.found {
                out.push(format!(
                    "only through: {krate} names {c} at {}:{line}; reach it through {via}",
                    file.display()
                ));
            }
        }
        Ok(out)
    }

    /// Cycles among sibling modules, one line each.
    fn cycles(&self, krate: &str) -> Vec<String> {
        // parent -> (from child -> to child -> first witness)
        let mut levels: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> =
            BTreeMap::new();
        for (from, m) in &self.modules {
            for r in &m.refs {
                let to = self.resolve(&r.segments, 0);
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common == from.len() || common == to.len() {
                    continue; // same module, or an ancestor/descendant
                }
                let parent = from[..common].to_vec();
                let witness = format!("{}:{}", m.file.display(), r.line);
                levels
                    .entry(parent)
                    .or_default()
                    .entry(from[common].clone())
                    .or_default()
                    .entry(to[common].clone())
                    .or_insert(witness);
            }
        }
        let mut out = Vec::new();
        for (parent, edges) in &levels {
            for scc in strongly_connected(edges) {
                if scc.len() < 2 {
                    continue;
                }
                let prefix = if parent.is_empty() {
                    "crate".to_string()
                } else {
                    format!("crate::{}", parent.join("::"))
                };
                let mut witnesses = Vec::new();
                for a in &scc {
                    for b in &scc {
                        if let Some(w) = edges.get(a).and_then(|e| e.get(b)) {
                            witnesses.push(format!("{a} -> {b} at {w}"));
                        }
                    }
                }
                out.push(format!(
                    "cycle in {krate} ({}): modules {{{}}} under {prefix} use each other: {}",
                    self.root.display(),
                    scc.join(", "),
                    witnesses.join("; ")
                ));
            }
        }
        out
    }
}

/// Tarjan's strongly connected components over a small graph.
fn strongly_connected(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&String> = edges.keys().collect();
    for e in edges.values() {
        nodes.extend(e.keys());
    }
    let nodes: Vec<&String> = nodes.into_iter().collect();
    let index_of: HashMap<&String, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            edges
                .get(*n)
                .map(|e| e.keys().map(|k| index_of[k]).collect())
                .unwrap_or_default()
        })
        .collect();
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn strong(v: usize, adj: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &adj[v] {
            match s.index[w] {
                None => {
                    strong(w, adj, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let n = nodes.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            strong(v, &adj, &mut s);
        }
    }
    s.out
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|i| nodes[i].clone()).collect();
            names.sort();
            names
        })
        .collect()
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]` exactly: code compiled only for the crate's own tests.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Flattens a use tree into (segments, exported name) pairs; the name is
/// `None` for a glob.
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut segs = prefix.clone();
            if name != "self" {
                segs.push(name.clone());
            }
            let alias = if name == "self" {
                prefix.last().cloned()
            } else {
                Some(name)
            };
            out.push((segs, alias));
        }
        syn::UseTree::Rename(r) => {
            let mut segs = prefix.clone();
            if r.ident != "self" {
                segs.push(r.ident.to_string());
            }
            out.push((segs, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Makes a written path absolute from the crate root, or `None` when it
/// does not start inside the crate (`crate`, `super`, `self`).
fn absolute(module: &[String], segs: &[String]) -> Option<Vec<String>> {
    let first = segs.first()?;
    match first.as_str() {
        "crate" => Some(segs[1..].to_vec()),
        "self" => {
            let mut p = module.to_vec();
            p.extend(segs[1..].iter().cloned());
            Some(p)
        }
        "super" => {
            let mut p = module.to_vec();
            let mut i = 0;
            while segs.get(i).is_some_and(|s| s == "super") {
                p.pop()?;
                i += 1;
            }
            p.extend(segs[i..].iter().cloned());
            Some(p)
        }
        _ => None,
    }
}

/// Collects the crate-relative paths an item names, in its code and in the
/// token streams of the macros it calls. Test-only nested items are skipped.
struct PathCollector<'a> {
    base: &'a [String],
    refs: &'a mut Vec<Ref>,
}

impl PathCollector<'_> {
    fn push(&mut self, segs: Vec<String>, line: usize) {
        if let Some(abs) = absolute(self.base, &segs) {
            self.refs.push(Ref {
                segments: abs,
                line,
            });
        }
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            if let TokenTree::Group(g) = &tts[i] {
                self.scan_tokens(g.stream());
                i += 1;
                continue;
            }
            let start = i;
            let mut segs = Vec::new();
            let mut line = 0;
            while let Some(TokenTree::Ident(id)) = tts.get(i) {
                if segs.is_empty() {
                    line = id.span().start().line;
                }
                segs.push(id.to_string());
                let colons = matches!(
                    (tts.get(i + 1), tts.get(i + 2)),
                    (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                        if a.as_char() == ':' && b.as_char() == ':'
                );
                if !colons {
                    i += 1;
                    break;
                }
                i += 3;
            }
            if segs.len() > 1 && matches!(segs[0].as_str(), "crate" | "super" | "self") {
                self.push(segs, line);
            }
            if i == start {
                i += 1;
            }
        }
    }
}

impl<'ast> Visit<'ast> for PathCollector<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map(|s| s.ident.span().start().line)
            .unwrap_or(0);
        self.push(segs, line);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test_only(item_attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A `use` nested in a function body.
        let mut flat = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut flat);
        let line = u.use_token.span.start().line;
        for (segs, _) in flat {
            self.push(segs, line);
        }
    }
}

/// Finds paths whose first segment is one of `crates`, outside test code.
struct CrateUses<'a> {
    crates: &'a [String],
    found: Vec<(String, usize)>,
}

impl CrateUses<'_> {
    fn check(&mut self, first: &str, line: usize) {
        if self.crates.iter().any(|c| c == first) {
            self.found.push((first.to_string(), line));
        }
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, tt) in tts.iter().enumerate() {
            match tt {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) => {
                    let colons = matches!(
                        (tts.get(i + 1), tts.get(i + 2)),
                        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                            if a.as_char() == ':' && b.as_char() == ':'
                    );
                    if colons {
                        self.check(&id.to_string(), id.span().start().line);
                    }
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for CrateUses<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if let Some(f) = p.segments.first() {
            self.check(&f.ident.to_string(), f.ident.span().start().line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }

    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test_only(item_attrs(i)) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut flat = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut flat);
        let line = u.use_token.span.start().line;
        for (segs, _) in flat {
            if let Some(f) = segs.first() {
                self.check(f, line);
            }
        }
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        self.check(&e.ident.to_string(), e.extern_token.span.start().line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> (tempfile::TempDir, ModuleGraph) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let g = ModuleGraph::load(&dir.path().join("lib.rs")).unwrap();
        (dir, g)
    }

    #[test]
    fn a_sibling_ring_is_a_cycle_and_names_its_witnesses() {
        let (_d, g) = graph(&[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::g; pub fn f() { g() }"),
            ("b.rs", "pub fn g() { super::a::h() }\npub fn k() {}"),
        ]);
        let c = g.cycles("x");
        assert_eq!(c.len(), 1, "{c:?}");
        assert!(c[0].contains("{a, b}"), "{}", c[0]);
        assert!(
            c[0].contains("a -> b at") && c[0].contains("b -> a at"),
            "{}",
            c[0]
        );
        assert!(c[0].contains("b.rs:1"), "{}", c[0]);
    }

    #[test]
    fn one_way_uses_parents_and_tests_are_not_cycles() {
        let (_d, g) = graph(&[
            ("lib.rs", "mod a; mod b; pub use a::f; pub struct E;"),
            ("a.rs", "use crate::b::g; use crate::E; pub fn f() { g() }"),
            (
                "b.rs",
                "use super::E; pub fn g() {}\n#[cfg(test)] mod tests { use crate::a::f; }",
            ),
        ]);
        assert_eq!(g.cycles("x"), Vec::<String>::new());
    }

    #[test]
    fn reexports_and_macros_are_followed() {
        // b reaches a through the root's re-export, inside a macro call.
        let (_d, g) = graph(&[
            ("lib.rs", "mod a; mod b; pub use a::f;"),
            ("a.rs", "pub fn f() { crate::b::g() }"),
            ("b.rs", "pub fn g() { println!(\"{}\", crate::f()) }"),
        ]);
        assert_eq!(g.cycles("x").len(), 1);
    }

    #[test]
    fn nested_siblings_are_checked_at_their_level() {
        let (_d, g) = graph(&[
            ("lib.rs", "mod net;"),
            ("net/mod.rs", "mod x; mod y;"),
            ("net/x.rs", "use super::y::Y; pub struct X;"),
            ("net/y.rs", "pub struct Y(crate::net::x::X);"),
        ]);
        let c = g.cycles("x");
        assert_eq!(c.len(), 1);
        assert!(c[0].contains("under crate::net"), "{}", c[0]);
    }

    #[test]
    fn an_upward_dependency_is_refused() {
        let layers: HashMap<&str, u32> = LAYERS.iter().copied().collect();
        let up: toml::Value = "[dependencies]\ngranary-forwarder = { path = \"x\" }"
            .parse()
            .unwrap();
        assert_eq!(check_layers("granary-packet", &up, &layers).len(), 1);
        assert!(check_layers("granary", &up, &layers).is_empty());
        assert_eq!(check_layers("granary-new", &up, &layers).len(), 1);
    }

    #[test]
    fn the_binary_reaches_store_transfer_and_repo_only_through_the_node() {
        let direct: toml::Value =
            "[dependencies]\ngranary-store = { path = \"x\" }\ngranary-node = { path = \"y\" }\n[dev-dependencies]\ngranary-repo = { path = \"z\" }"
                .parse()
                .unwrap();
        let v = check_only_through("granary", &direct);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("granary-store") && v[0].contains("granary-node"),
            "{}",
            v[0]
        );
        assert!(check_only_through("granary-node", &direct).is_empty());
        // Build, per-target and renamed dependencies count too; the manifest
        // format is the repository's.
        let hidden: toml::Value = "[build-dependencies]\ngranary-transfer = \"1\"\n[target.'cfg(unix)'.dependencies]\nstore = { package = \"granary-store\", path = \"x\" }\n[target.'cfg(unix)'.dev-dependencies]\ngranary-repo = \"1\"\n[dependencies]\nm = { package = \"granary-manifest\", path = \"m\" }"
            .parse()
            .unwrap();
        let v = check_only_through("granary", &hidden);
        assert_eq!(v.len(), 3, "{v:?}");
        for c in ["granary-transfer", "granary-store", "granary-manifest"] {
            assert!(
                v.iter().any(|l| l.contains(&format!("depends on {c};"))),
                "{c}: {v:?}"
            );
        }
        let (_d, g) = graph(&[
            ("lib.rs", "mod a; use granary_node::repo::store;"),
            (
                "a.rs",
                "use granary_repo::Repo;\npub fn f() { let _ = granary_transfer::Config::default(); println!(\"{}\", granary_store::X); }\n#[cfg(test)] mod t { use granary_store::Y; }",
            ),
        ]);
        let v = g.only_through("granary").unwrap();
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(v.iter().all(|l| l.contains("a.rs:")), "{v:?}");
        assert!(
            v.iter()
                .any(|l| l.contains("granary_repo") && l.contains("a.rs:1")),
            "{v:?}"
        );
        assert!(
            v.iter()
                .any(|l| l.contains("granary_store") && l.contains("a.rs:2")),
            "{v:?}"
        );
        assert!(g.only_through("granary-node").unwrap().is_empty());
    }

    #[test]
    fn engines_have_one_owner() {
        let m: toml::Value = toml::from_str(
            "[dependencies]\naxum = \"0.8\"\nrusqlite = \"0.3\"\ntokio = \"1\"\nserde = \"1\"\n",
        )
        .unwrap();
        let v = check_owned("granary-forwarder", &m);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v
            .iter()
            .any(|l| l.contains("axum") && l.contains("granary-gateway")));
        assert!(v
            .iter()
            .any(|l| l.contains("rusqlite") && l.contains("SQL")));
        assert!(check_owned(
            "granary-gateway",
            &toml::from_str("[dependencies]\naxum = \"0.8\"\n").unwrap()
        )
        .is_empty());
        let v = check_owned("granary-packet", &m);
        assert!(
            v.iter()
                .any(|l| l.contains("tokio") && l.contains("no I/O")),
            "{v:?}"
        );
    }

    #[test]
    fn decision_records_are_append_only() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("docs/decisions");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("README.md"), "index, not a record").unwrap();
        std::fs::write(dir.join("0001-a.md"), "# A\n").unwrap();
        let sum = "b4a6c9ba1b4bcbc4bf3b7bd1a3a7c7a1bb1d4f9d1bd5c1b0d8d0c1cdc4e0e2a4";
        let good = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"# A\n"));
        std::fs::write(
            dir.join("records.sha256"),
            format!("{good}  docs/decisions/0001-a.md\n"),
        )
        .unwrap();
        assert!(check_decisions(d.path()).unwrap().is_empty());
        // A new record not yet listed.
        std::fs::write(dir.join("0002-b.md"), "# B\n").unwrap();
        let v = check_decisions(d.path()).unwrap();
        assert!(
            v.len() == 1 && v[0].contains("0002-b.md is not in"),
            "{v:?}"
        );
        // An edited record.
        std::fs::write(
            dir.join("records.sha256"),
            format!("{sum}  docs/decisions/0001-a.md\n{good}  docs/decisions/0002-b.md\n"),
        )
        .unwrap();
        let v = check_decisions(d.path()).unwrap();
        assert!(
            v.iter().any(|l| l.contains("0001-a.md was edited")),
            "{v:?}"
        );
    }
}
