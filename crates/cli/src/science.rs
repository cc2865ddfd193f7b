//! The science commands: `search`, `publish-dir`, `example-data`,
//! `catalog …`.

use crate::out::{say, tell};
use std::path::{Path, PathBuf};

use granary_catalog::Query;
use granary_node::query;
use granary_packet::Name;
use granary_search::Indexer;
use serde_json::{json, Value};

use granary_node::publish_dir::{self, walk};

use crate::args::CatalogArgs;

fn indexer(data_dir: &Path, catalog: Option<&str>, a: &CatalogArgs) -> anyhow::Result<Indexer> {
    Indexer::open(data_dir, &a.settings(data_dir, catalog)).map_err(|e| anyhow::anyhow!(e))
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
    /// Datasets instead of files: the files grouped by dataset (directory and DRS
    /// version, the ESGF dataset id), each with its file count, size, time coverage
    /// and whether its time axis is contiguous (gaps and overlaps listed). The
    /// terms select datasets holding a matching file; --facets counts datasets.
    #[arg(long)]
    pub datasets: bool,
    /// With --datasets: only the newest version of each dataset (`true`) or only
    /// older ones (`false`); default every version.
    #[arg(long, value_name = "true|false", requires = "datasets")]
    pub latest: Option<bool>,
    /// With --datasets: list each dataset's files.
    #[arg(long, requires = "datasets")]
    pub files: bool,
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

/// `granary search`.
pub fn search(
    data_dir: &Path,
    socket: &Path,
    catalog: Option<&str>,
    a: &SearchArgs,
) -> anyhow::Result<()> {
    let q = query_of(&a.terms, Some(a))?;
    if a.datasets {
        let dq = granary_catalog::DatasetQuery {
            query: q,
            latest: a.latest,
            ids: Vec::new(),
            files: a.files,
        };
        let page = granary_node::query::run_dataset_query(
            data_dir,
            socket,
            catalog,
            a.node.as_deref(),
            &dq,
        )?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&page)?);
        } else {
            print!("{}", query::datasets_text(&page, dq.query.offset));
        }
        return Ok(());
    }
    let page = granary_node::query::run_query(data_dir, socket, catalog, a.node.as_deref(), &q)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(());
    }
    print!("{}", query::page_text(&page, q.offset));
    Ok(())
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
    /// Do not read the byte ranges of each netCDF-4 chunk (kept with the
    /// record for /api/zarr, the virtual Zarr of a dataset): publishes a little
    /// faster; those files' datasets then have no virtual Zarr until they are
    /// published again.
    #[arg(long)]
    pub no_chunk_index: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
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
    let (repo, signer, chunking) = if a.dry_run {
        (None, None, None)
    } else {
        let (repo, signer, chunking, created) = publish_dir::open_publishing(data_dir, &ix)?;
        if let Some(k) = created {
            tell!("created default publisher key {k}");
        }
        (Some(repo), Some(signer), Some(chunking))
    };
    let publish = repo.as_ref().zip(signer.as_ref());
    let tally = publish_dir::run(
        &files,
        &root,
        &ix,
        others.as_ref(),
        publish,
        chunking,
        !a.no_chunk_index,
        a.jobs,
        &|| bar.inc(1),
    )?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let (report, mismatched) = publish_dir::report(&root, a.dry_run, files.len(), &tally, secs);
    let report_path = publish_dir::write_report(data_dir, a.report.as_deref(), &report)?;
    for line in publish_dir::entry_lines(&tally.entries, a.dry_run) {
        say!("{line}");
    }
    tell!(
        "{} files in {:.1} s ({:.0} files/s): {}; report {}",
        files.len(),
        secs,
        files.len() as f64 / secs.max(1e-9),
        publish_dir::summary(&tally, mismatched),
        report_path.display()
    );
    if !a.dry_run {
        granary_node::control::tell_daemon(socket, None);
    }
    if tally.counts.get("failed").copied().unwrap_or(0) > 0 {
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
            let store = granary_node::repo::store(data_dir)?;
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
            let store = granary_node::repo::store(data_dir)?;
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
                crate::out::mark_json_answered();
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
            let tr = granary_search::translator(&a.settings(data_dir, catalog))
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
        query::human(total),
        dir.display(),
        dir.display()
    );
    Ok(())
}
