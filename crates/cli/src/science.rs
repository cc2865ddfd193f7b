//! The science commands: `search`, `publish-dir`, `example-data`,
//! `catalog …`, and the query side of `get --query`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use granary_app::Client;
use granary_catalog::{Page, Query, Record};
use granary_packet::Name;
use granary_science::drs::{Outcome, Status, Translator, Trust};
use granary_search::{protocol, record, Indexer, Settings};
use serde_json::{json, Value};

static CATALOG_SPEC: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Records the global `--catalog` (once, at start).
pub fn set_catalog_spec(spec: Option<String>) {
    let _ = CATALOG_SPEC.set(spec);
}

/// The global `--catalog`: a `postgres://` URL or a directory; `None` for
/// the embedded default `<data-dir>/catalog`.
pub fn catalog_spec() -> Option<&'static str> {
    CATALOG_SPEC.get().and_then(|s| s.as_deref())
}

/// Catalog flags shared by the commands that fill a catalog.
#[derive(clap::Args, Clone, Default)]
pub struct CatalogArgs {
    /// DRS rules file (TOML) for projects other than CMIP6/CMIP5, tried first
    /// (repeatable). Files in <data-dir>/catalog/rules/ are always used.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Which side wins when a file's global attributes disagree with its
    /// name (the mismatch is reported either way).
    #[arg(long, value_enum, default_value_t = TrustArg::Name)]
    pub trust: TrustArg,
}

/// `--trust`.
#[derive(clap::ValueEnum, Clone, Copy, Default)]
pub enum TrustArg {
    /// The file name and directory path win.
    #[default]
    Name,
    /// The netCDF global attributes win.
    Attributes,
}

/// The settings for this data directory: `--catalog` (or the embedded
/// default), rules from the flags and from `<data-dir>/catalog/rules/`.
pub fn settings(data_dir: &Path, catalog: Option<&str>, a: &CatalogArgs) -> Settings {
    let mut rules = a.rules.clone();
    let dir = granary_search::default_catalog_dir(data_dir).join("rules");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut found: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        found.sort();
        rules.extend(found);
    }
    Settings {
        catalog: catalog.map(str::to_string),
        rules,
        trust: match a.trust {
            TrustArg::Name => Trust::Name,
            TrustArg::Attributes => Trust::Attributes,
        },
        node: crate::node::node_prefix(data_dir)
            .ok()
            .map(|n| n.to_string()),
    }
}

fn indexer(data_dir: &Path, catalog: Option<&str>, a: &CatalogArgs) -> anyhow::Result<Indexer> {
    Indexer::open(data_dir, &settings(data_dir, catalog, a)).map_err(|e| anyhow::anyhow!(e))
}

// ---------------------------------------------------------------- search

/// `granary search` flags.
#[derive(clap::Args)]
pub struct SearchArgs {
    /// Facet constraints `key=value` (`key=a,b` for either, `key!=value` to
    /// exclude) and free-text words, e.g. `source_id=CanESM5 variable_id=tas
    /// historical`.
    pub terms: Vec<String>,
    /// Print facet value counts for the matching set (all facets).
    #[arg(long)]
    pub facets: bool,
    /// Print the answer as JSON.
    #[arg(long)]
    pub json: bool,
    /// Records per page (at most 10000).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Records to skip.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Every version, not only the latest of each file.
    #[arg(long)]
    pub all_versions: bool,
    /// Only records whose time coverage overlaps FROM/TO (ISO dates, either
    /// side may be empty: `1900-01-01/`).
    #[arg(long, value_name = "FROM/TO")]
    pub time: Option<String>,
    /// Ask a remote node's catalog (its catalog prefix, e.g.
    /// /granary/host-1a2b/catalog) through the local node, instead of the
    /// local catalog.
    #[arg(long, value_name = "PREFIX")]
    pub node: Option<String>,
}

/// The query the search flags describe.
pub fn query_of(terms: &[String], a: Option<&SearchArgs>) -> anyhow::Result<Query> {
    let words: Vec<&str> = terms.iter().map(String::as_str).collect();
    let mut q = Query::parse_args(&words).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(a) = a {
        q.limit = a.limit;
        q.offset = a.offset;
        q.latest_only = !a.all_versions;
        if a.facets {
            q.facets = granary_catalog::FacetSel::All;
        }
        if let Some(t) = &a.time {
            let (from, to) = t
                .split_once('/')
                .ok_or_else(|| anyhow::anyhow!("--time takes FROM/TO"))?;
            let f = |s: &str| (!s.is_empty()).then(|| s.to_string());
            q.time_overlap = Some((f(from), f(to)));
        }
    }
    Ok(q)
}

/// Runs `q` on the local node's catalog (through the daemon when one runs,
/// else directly on the data directory's catalog) or on a remote catalog.
pub fn run_query(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    node: Option<&str>,
    q: &Query,
) -> anyhow::Result<Page> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let remote = match node {
        Some(p) => Some(Name::from_uri(p).map_err(|e| anyhow::anyhow!("--node {p}: {e}"))?),
        None => None,
    };
    let client = rt.block_on(Client::connect(socket));
    let prefix = match (&remote, client.is_ok()) {
        (Some(p), _) => p.clone(),
        (None, true) => Name::from_uri(protocol::LOCAL_PREFIX)?,
        (None, false) => {
            // No node running: the embedded catalog of this data directory.
            let ix = indexer(data_dir, catalog, &CatalogArgs::default())?;
            let mut page = ix.catalog.query(q).map_err(|e| anyhow::anyhow!("{e}"))?;
            granary_search::service::slim(&mut page);
            return Ok(page);
        }
    };
    let mut c = client?;
    let v = rt
        .block_on(granary_search::client::ask(
            &mut c,
            &prefix,
            protocol::VERB_SEARCH,
            &json!(q),
            4000,
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    serde_json::from_value(v).map_err(|e| anyhow::anyhow!("bad answer from {prefix}: {e}"))
}

/// `granary search`.
pub fn search(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    a: &SearchArgs,
) -> anyhow::Result<()> {
    let q = query_of(&a.terms, Some(a))?;
    let page = run_query(data_dir, socket, catalog, a.node.as_deref(), &q)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(());
    }
    print_page(&page, q.offset);
    Ok(())
}

fn print_page(page: &Page, offset: usize) {
    let shown = page.hits.len();
    println!(
        "{} match{}{}",
        page.total,
        if page.total == 1 { "" } else { "es" },
        if shown > 0 {
            format!(", showing {}–{}", offset + 1, offset + shown)
        } else {
            String::new()
        }
    );
    let w = page
        .hits
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(4)
        .min(110);
    for r in &page.hits {
        let time = match (&r.time_start, &r.time_end) {
            (Some(a), Some(b)) => format!("{} – {}", &a[..a.len().min(10)], &b[..b.len().min(10)]),
            _ => String::new(),
        };
        println!(
            "{:<w$}  v={:<16}  {:>10}  {}",
            r.name,
            r.version,
            human(r.size),
            time,
            w = w
        );
    }
    for (facet, values) in &page.facet_counts {
        let list: Vec<String> = values.iter().map(|(v, n)| format!("{v} ({n})")).collect();
        println!("{facet}: {}", list.join(", "));
    }
}

fn human(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut i = 0;
    while x >= 1024.0 && i < U.len() - 1 {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", U[i])
    }
}

// ---------------------------------------------------------- get --query

/// Every record matching `q` (all pages), latest versions unless asked.
pub fn all_matches(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    q: &Query,
) -> anyhow::Result<Vec<Record>> {
    let mut q = q.clone();
    q.limit = 10_000;
    q.offset = 0;
    q.facets = granary_catalog::FacetSel::None;
    let mut out = Vec::new();
    loop {
        let page = run_query(data_dir, socket, catalog, None, &q)?;
        let n = page.hits.len();
        out.extend(page.hits);
        if n == 0 || out.len() as u64 >= page.total {
            break;
        }
        q.offset += n;
    }
    Ok(out)
}

/// A path component safe to create under an output directory.
fn safe_component(c: &str) -> String {
    let s: String = c
        .chars()
        .map(|ch| {
            if ch == '/' || ch == '\0' || ch == '\\' {
                '_'
            } else {
                ch
            }
        })
        .collect();
    if s.is_empty() || s == "." || s == ".." {
        format!("_{s}_")
    } else {
        s
    }
}

/// Where a record goes under the output directory: its DRS path (the
/// directory layout of the archive) unless `flat`, else the file name.
pub fn output_path(tr: &Translator, r: &Record, flat: bool) -> PathBuf {
    let name = Name::from_uri(&r.name).unwrap_or_default();
    let comps = record::components(&name);
    let file = safe_component(comps.last().map(String::as_str).unwrap_or("object"));
    if flat {
        return PathBuf::from(file);
    }
    let drs = r
        .facets
        .get("version")
        .and_then(|v| tr.reverse(&comps, v).ok())
        .map(|p| p.path());
    let rel = drs.unwrap_or_else(|| comps.join("/"));
    rel.split('/')
        .filter(|c| !c.is_empty())
        .map(safe_component)
        .collect()
}

/// `granary get --query`: the names, versions and output paths to fetch.
pub fn plan_query_get(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    query: &str,
    flat: bool,
) -> anyhow::Result<Vec<(String, PathBuf, u64)>> {
    let terms: Vec<String> = query.split_whitespace().map(str::to_string).collect();
    let q = query_of(&terms, None)?;
    let hits = all_matches(data_dir, socket, catalog, &q)?;
    let tr = granary_search::translator(&settings(data_dir, catalog, &CatalogArgs::default()))
        .map_err(|e| anyhow::anyhow!(e))?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for r in hits {
        let p = output_path(&tr, &r, flat);
        if !seen.insert(p.clone()) {
            anyhow::bail!(
                "two matching files would both be written to {} (use the DRS layout, not --flat)",
                p.display()
            );
        }
        let versioned = format!("{}/v={}", r.name, r.version);
        out.push((versioned, p, r.size));
    }
    Ok(out)
}

// ------------------------------------------------------------ publish-dir

/// `granary publish-dir` flags.
#[derive(clap::Args)]
pub struct PublishDirArgs {
    /// Directory to publish: a DRS tree (CMIP6/…, CMIP5/…), or any tree with
    /// --rules.
    pub dir: PathBuf,
    /// Print the translation report; publish nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where to write the JSON report (default: <DIR>/../publish-report.json
    /// is not touched; the report goes to <data-dir>/catalog/reports/).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Also publish files that cannot be translated, under PREFIX/<path>
    /// (they are catalogued by file name only). Default: they are reported
    /// and skipped.
    #[arg(long, value_name = "PREFIX")]
    pub others_under: Option<String>,
    /// Files read, translated and ingested at once (each batch of 256 is
    /// then published with one group commit).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: u64,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

fn walk(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| anyhow::anyhow!("{}: {e}", d.display()))?;
        for e in rd {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The tag recording the source file a version was published from (size and
/// modification time), so that a second run skips it.
const SOURCE_TAG: &str = "source";

fn source_stamp(p: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p)?;
    Ok(format!("{}:{}.{:09}", m.len(), m.mtime(), m.mtime_nsec()))
}

/// Files published per group commit.
const COMMIT_BATCH: usize = 256;

/// A file staged for publication, with what its catalog record needs.
struct Staged {
    entry: granary_store::Entry,
    report: Value,
    outcome: Outcome,
    nc: Option<granary_science::netcdf::NcMeta>,
    problems: Vec<String>,
}

/// What a worker made of one file.
struct Prepared {
    /// Its report entry (final unless `staged`).
    report: Value,
    /// Translation outcome.
    status: &'static str,
    /// Fix codes applied.
    fixes: Vec<String>,
    /// `unchanged` or `failed`, when so.
    count: Option<&'static str>,
    /// Staged, to be committed.
    staged: Option<Staged>,
    /// Published unchanged already, but missing from the catalog (a run
    /// killed between its commit and its catalog write): its record.
    recatalog: Option<Record>,
}

/// One file of `publish-dir`: metadata, translation, and (unless a dry run,
/// or published unchanged already) staged in the repository.
fn prepare(
    f: &Path,
    root: &Path,
    ix: &Indexer,
    others: Option<&Name>,
    publish: Option<(&granary_repo::Repo, &granary_security::Signer)>,
    chunking: Option<granary_store::Chunking>,
) -> Prepared {
    let rel = f
        .strip_prefix(root)
        .unwrap_or(f)
        .to_string_lossy()
        .into_owned();
    let (nc, problems) = match record::netcdf_of(f) {
        Ok(nc) => (nc, Vec::new()),
        Err(why) => (None, vec![format!("netCDF metadata not read: {why}")]),
    };
    let attrs = nc.as_ref().map(|n| n.global_strings());
    let outcome: Outcome = ix.translator.translate(&rel, attrs.as_ref());
    let fixes = outcome
        .fixes
        .iter()
        .map(|fx| format!("{:?}", fx.code))
        .collect();
    let target: Option<Name> = if outcome.is_accepted() {
        outcome.uri.as_deref().and_then(|u| Name::from_uri(u).ok())
    } else {
        others.and_then(|p| {
            rel.split('/').try_fold(p.clone(), |n, c| {
                Some(n.append(&granary_packet::Component::generic(c.as_bytes())))
            })
        })
    };
    let status = match outcome.status {
        Status::Translated => "translated",
        Status::Fixed => "fixed",
        Status::Rejected => "rejected",
    };
    let mut report = json!({"path": rel, "outcome": outcome});
    if !problems.is_empty() {
        report["problems"] = json!(problems);
    }
    let mut p = Prepared {
        report,
        status,
        fixes,
        count: None,
        staged: None,
        recatalog: None,
    };
    let (Some((repo, signer)), Some(name)) = (publish, target) else {
        if let Some(n) = outcome.uri.as_deref() {
            p.report["name"] = json!(n);
        }
        return p;
    };
    p.report["name"] = json!(name.to_string());
    let stamp = match source_stamp(f) {
        Ok(s) => s,
        Err(e) => {
            p.count = Some("failed");
            p.report["error"] = json!(e.to_string());
            return p;
        }
    };
    // Resumable: the latest version published from this very file is kept,
    // and catalogued if the catalog lacks it (or cannot say now).
    let latest = repo.store.get(&name, None).ok();
    if let Some(e) = latest
        .as_ref()
        .filter(|e| e.meta.tags.get(SOURCE_TAG) == Some(&stamp))
    {
        p.count = Some("unchanged");
        p.report["published"] = json!("unchanged");
        if !ix
            .catalog
            .has(&e.meta.name, e.meta.version)
            .unwrap_or(false)
        {
            p.report["catalogued"] = json!("again");
            p.recatalog = Some(record::record_with(
                e,
                &outcome,
                nc.as_ref(),
                problems,
                ix.node(),
            ));
        }
        return p;
    }
    let mut tags = vec![(SOURCE_TAG.to_string(), stamp)];
    if let Some(v) = &outcome.drs_version {
        tags.push((record::DRS_VERSION_TAG.to_string(), v.clone()));
    }
    let how = granary_repo::publish::Publish {
        version: None,
        signer,
        policy: "manifest",
        keep: None,
        segment_size: None,
        chunking,
        index: true,
        file_sha256: true,
        tags,
        expect_hashes: None,
    };
    match granary_repo::publish::stage_file(repo, &name, f, &how) {
        Ok(entry) => {
            let report = std::mem::take(&mut p.report);
            p.staged = Some(Staged {
                entry,
                report,
                outcome,
                nc,
                problems,
            });
        }
        Err(e) => {
            p.count = Some("failed");
            p.report["error"] = json!(e);
        }
    }
    p
}

/// `granary publish-dir`.
pub fn publish_dir(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    a: &PublishDirArgs,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let root =
        std::fs::canonicalize(&a.dir).map_err(|e| anyhow::anyhow!("{}: {e}", a.dir.display()))?;
    let files = walk(&root)?;
    let ix = indexer(data_dir, catalog, &a.catalog)?;
    let bar = indicatif::ProgressBar::new(files.len() as u64);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(s) = indicatif::ProgressStyle::with_template(
        "{pos}/{len} files {per_sec} {wide_bar} {eta} {msg}",
    ) {
        bar.set_style(s);
    }
    let others = match &a.others_under {
        Some(p) => Some(Name::from_uri(p).map_err(|e| anyhow::anyhow!("--others-under: {e}"))?),
        None => None,
    };
    let mut chunking = None;
    let (repo, signer) = if a.dry_run {
        (None, None)
    } else {
        let kc = granary_security::KeyChain::open(data_dir.join("keychain"))?;
        let id = crate::key::publisher_identity(data_dir)?;
        let (signer, created) =
            granary_repo::publish::publisher_signer_as(&kc, None, "manifest", &id)
                .map_err(|e| anyhow::anyhow!(e))?;
        if let Some(k) = created {
            eprintln!("created default publisher key {k}");
        }
        let store = granary_store::Store::open(data_dir.join("repo"))?;
        // Read once, not once per file.
        chunking = Some(store.default_chunking()?);
        (Some(granary_repo::Repo::new(store, None)), Some(signer))
    };
    // Changes an earlier run (or another command) left queued go first.
    if let Some(r) = &repo {
        if !ix.queue.is_empty() {
            ix.drain(&r.store);
        }
    }
    let mut entries: Vec<Option<Value>> = vec![None; files.len()];
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut fix_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut bytes = 0u64;
    // Files are read, translated and staged (ingested, manifest signed,
    // nothing durable or visible yet) by `--jobs` workers; this thread
    // publishes what they staged in batches with one group commit each
    // (two syncfs per batch instead of several fsyncs per file: each file
    // still appears complete or not at all), then catalogs the batch.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let jobs = a.jobs.max(1);
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Prepared)>(COMMIT_BATCH);
    let result = std::thread::scope(|sc| -> anyhow::Result<()> {
        for k in 0..jobs {
            let tx = tx.clone();
            let (next, root, files, ix, others, repo, signer, chunking) =
                (&next, &root, &files, &ix, &others, &repo, &signer, chunking);
            std::thread::Builder::new()
                .name(format!("publish-dir-{k}"))
                .spawn_scoped(sc, move || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let publish = repo.as_ref().zip(signer.as_ref());
                    let p = prepare(f, root, ix, others.as_ref(), publish, chunking);
                    if tx.send((i, p)).is_err() {
                        break;
                    }
                })?;
        }
        drop(tx);
        let mut pending: Vec<(usize, Staged)> = Vec::new();
        let mut records: Vec<Record> = Vec::new();
        let mut warned = false;
        let mut commit = |pending: &mut Vec<(usize, Staged)>,
                          entries: &mut Vec<Option<Value>>,
                          counts: &mut BTreeMap<&'static str, u64>,
                          bytes: &mut u64,
                          records: &mut Vec<Record>|
         -> anyhow::Result<()> {
            let Some(repo) = &repo else { return Ok(()) };
            if pending.is_empty() && records.is_empty() {
                return Ok(());
            }
            let warned = &mut warned;
            let batch = std::mem::take(pending);
            let staged: Vec<granary_store::Entry> =
                batch.iter().map(|(_, s)| s.entry.clone()).collect();
            // The batch's records go to the catalog queue before the files are
            // published: a run killed after the commit leaves them there, and
            // the next command that opens the catalog applies those whose
            // files exist. Removed from the queue once catalogued.
            let journal = {
                let records = batch
                    .iter()
                    .map(|(_, s)| {
                        record::record_with(
                            &s.entry,
                            &s.outcome,
                            s.nc.as_ref(),
                            s.problems.clone(),
                            ix.node(),
                        )
                    })
                    .chain(records.iter().cloned())
                    .collect();
                ix.queue
                    .push(&granary_search::queue::Op::Upsert { records })
                    .map_err(|e| {
                        anyhow::anyhow!("catalog queue {}: {e}", ix.queue.dir().display())
                    })?
            };
            let done = granary_repo::publish::commit(repo, staged, true);
            for ((i, s), r) in batch.into_iter().zip(done) {
                let mut entry = s.report;
                match r {
                    Ok(e) => {
                        *counts.entry("published").or_default() += 1;
                        *bytes += e.meta.size;
                        entry["published"] = json!(format!("{}/v={}", e.meta.name, e.meta.version));
                        records.push(record::record_with(
                            &e,
                            &s.outcome,
                            s.nc.as_ref(),
                            s.problems,
                            ix.node(),
                        ));
                    }
                    Err(e) => {
                        *counts.entry("failed").or_default() += 1;
                        entry["error"] = json!(e);
                    }
                }
                entries[i] = Some(entry);
            }
            // Catalogued once durable; queued (the journal stays) while the
            // catalog is unavailable.
            match ix.catalog.upsert_many(records) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&journal);
                }
                Err(e) if granary_search::queue::retryable(&e) => {
                    // Queued: exactly what was published (the journal also
                    // names what failed to commit).
                    let queued = granary_search::queue::Op::Upsert {
                        records: records.clone(),
                    };
                    ix.queue.push(&queued).map_err(|e| {
                        anyhow::anyhow!("catalog queue {}: {e}", ix.queue.dir().display())
                    })?;
                    let _ = std::fs::remove_file(&journal);
                    *counts.entry("queued").or_default() += records.len() as u64;
                    if !*warned {
                        eprintln!(
                            "catalog: {e}; records queued in {} and catalogued when the catalog is back",
                            ix.queue.dir().display()
                        );
                        *warned = true;
                    }
                }
                Err(e) => return Err(e.into()),
            }
            records.clear();
            Ok(())
        };
        for (i, p) in rx {
            bar.inc(1);
            *counts.entry(p.status).or_default() += 1;
            for fx in p.fixes {
                *fix_counts.entry(fx).or_default() += 1;
            }
            if let Some(c) = p.count {
                *counts.entry(c).or_default() += 1;
            }
            if let Some(r) = p.recatalog {
                *counts.entry("catalogued again").or_default() += 1;
                records.push(r);
            }
            match p.staged {
                Some(s) => pending.push((i, s)),
                None => entries[i] = Some(p.report),
            }
            if pending.len() + records.len() >= COMMIT_BATCH {
                commit(
                    &mut pending,
                    &mut entries,
                    &mut counts,
                    &mut bytes,
                    &mut records,
                )?;
            }
        }
        commit(
            &mut pending,
            &mut entries,
            &mut counts,
            &mut bytes,
            &mut records,
        )
    });
    result?;
    let entries: Vec<Value> = entries.into_iter().flatten().collect();
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let report = json!({
        "dir": root,
        "dry_run": a.dry_run,
        "files": files.len(),
        "counts": counts,
        "fixes": fix_counts,
        "seconds": secs,
        "bytes_published": bytes,
        "entries": entries,
    });
    let report_path = match &a.report {
        Some(p) => p.clone(),
        None => {
            let d = granary_search::default_catalog_dir(data_dir).join("reports");
            std::fs::create_dir_all(&d)?;
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0);
            d.join(format!("publish-dir-{ms}.json"))
        }
    };
    granary_store::write_atomic(
        &report_path,
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    // What each file became, then the totals.
    for e in &entries {
        let o = &e["outcome"];
        let status = o["status"].as_str().unwrap_or("?");
        let detail = match status {
            "rejected" => o["reason"].as_str().unwrap_or_default().to_string(),
            "fixed" => o["fixes"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .map(|x| x["detail"].as_str().unwrap_or_default().to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default(),
            _ => String::new(),
        };
        if status != "translated" || a.dry_run {
            println!(
                "{status:<10} {}{}{}",
                e["path"].as_str().unwrap_or_default(),
                e["name"]
                    .as_str()
                    .map(|n| format!(" -> {n}"))
                    .unwrap_or_default(),
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" ({detail})")
                }
            );
        }
        if let Some(err) = e["error"].as_str() {
            println!(
                "failed     {}: {err}",
                e["path"].as_str().unwrap_or_default()
            );
        }
    }
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    eprintln!(
        "{} files in {:.1} s ({:.0} files/s): {}; report {}",
        files.len(),
        secs,
        files.len() as f64 / secs.max(1e-9),
        summary.join(", "),
        report_path.display()
    );
    if !a.dry_run {
        crate::repo::tell_daemon(socket, None);
    }
    if counts.get("failed").copied().unwrap_or(0) > 0 {
        anyhow::bail!("some files failed to publish (see the report)");
    }
    Ok(())
}

// ------------------------------------------------------------ catalog cmd

/// `granary catalog …`.
#[derive(clap::Subcommand)]
pub enum CatalogCmd {
    /// Empty the catalog and catalog every stored file version again (the
    /// files and their metadata are the truth).
    Rebuild {
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Compare the files with the catalog: stored versions the catalog
    /// lacks, records whose version is not stored, changes still queued
    /// (applied first when the catalog takes them). Exits non-zero when they
    /// differ, unless --repair put it right. The files are the truth.
    Check {
        /// Catalog what is missing and remove what has no file.
        #[arg(long)]
        repair: bool,
        /// Print the findings as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Show one file's record (metadata, variables, time coverage, versions).
    Show {
        /// The file's name (latest version unless --version).
        name: String,
        /// A version.
        #[arg(long)]
        version: Option<u64>,
    },
    /// Translate DRS paths or file names to NDN names and print the outcome
    /// (nothing is published).
    Translate {
        /// Paths or file names.
        #[arg(required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
}

/// Runs a `catalog` subcommand.
pub fn catalog_cmd(data_dir: &Path, catalog: Option<&str>, cmd: CatalogCmd) -> anyhow::Result<()> {
    match cmd {
        CatalogCmd::Rebuild { catalog: a } => {
            let ix = indexer(data_dir, catalog, &a)?;
            let store = granary_store::Store::open(data_dir.join("repo"))?;
            let bar = indicatif::ProgressBar::new(0);
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            let t = std::time::Instant::now();
            let n = ix
                .rebuild(&store, |done, total| {
                    bar.set_length(total);
                    bar.set_position(done);
                })
                .map_err(|e| anyhow::anyhow!(e))?;
            bar.finish_and_clear();
            eprintln!(
                "catalogued {n} file version(s) in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            Ok(())
        }
        CatalogCmd::Check {
            repair,
            json,
            catalog: a,
        } => {
            let ix = indexer(data_dir, catalog, &a)?;
            let store = granary_store::Store::open(data_dir.join("repo"))?;
            let t = std::time::Instant::now();
            let c = ix
                .check(&store, repair)
                .map_err(|e| anyhow::anyhow!("catalog check: {e}"))?;
            let secs = t.elapsed().as_secs_f64();
            if json {
                let mut v = json!(c);
                v["clean"] = json!(c.clean());
                v["seconds"] = json!(secs);
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "{} stored version(s), {} catalogued; {} missing from the catalog, {} in the catalog without a file{}",
                    c.files,
                    c.catalogued,
                    c.missing.len(),
                    c.extra.len(),
                    if c.queue_applied + c.queue_left > 0 {
                        format!(
                            "; {} queued change(s) applied, {} still queued",
                            c.queue_applied, c.queue_left
                        )
                    } else {
                        String::new()
                    }
                );
                const SHOWN: usize = 20;
                for (what, list) in [("missing", &c.missing), ("no file", &c.extra)] {
                    for (n, v) in list.iter().take(SHOWN) {
                        println!("{what:<8} {n}/v={v}");
                    }
                    if list.len() > SHOWN {
                        println!("{what:<8} … and {} more", list.len() - SHOWN);
                    }
                }
                if c.repaired {
                    println!(
                        "repaired: {} catalogued, {} removed ({secs:.1} s)",
                        c.missing.len(),
                        c.extra.len()
                    );
                }
            }
            if c.queue_left > 0 {
                anyhow::bail!(
                    "{} change(s) still queued: the catalog did not take them",
                    c.queue_left
                );
            }
            if !c.repaired && !c.clean() {
                anyhow::bail!("the catalog differs from the files (`--repair` fixes it)");
            }
            Ok(())
        }
        CatalogCmd::Show { name, version } => {
            let ix = indexer(data_dir, catalog, &CatalogArgs::default())?;
            let r = ix
                .catalog
                .get(&name, version)?
                .ok_or_else(|| anyhow::anyhow!("{name}: not in the catalog"))?;
            let mut v = json!(r);
            v["versions"] = json!(ix.catalog.versions(&name)?);
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(())
        }
        CatalogCmd::Translate { paths, catalog: a } => {
            let tr = granary_search::translator(&settings(data_dir, catalog, &a))
                .map_err(|e| anyhow::anyhow!(e))?;
            let out: Vec<Value> = paths.iter().map(|p| json!(tr.translate(p, None))).collect();
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
    }
}

/// `granary example-data DIR`.
pub fn example_data(dir: &Path) -> anyhow::Result<()> {
    let files = granary_science::example::write_tree(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    let total: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    eprintln!(
        "wrote {} netCDF files ({}) under {}; publish them with: granary publish-dir {}",
        files.len(),
        human(total),
        dir.display(),
        dir.display()
    );
    Ok(())
}
