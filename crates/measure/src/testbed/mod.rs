//! The experiments behind `granary testbed run EXPERIMENT.toml --out DIR`: files on
//! the netns testbed (crates/testbed), each run writing a report with its
//! set-up, results table, CSV, plots (SVG and PNG) and the seed paper's
//! figures beside Granary's.
//!
//! An experiment file names its nodes, links (rate, delay, loss), LANs,
//! what each node publishes, the consumers and their schedule, a parameter
//! sweep and the baselines; `kind` selects the procedure that measures it
//! (`pipeline`, `caching`, `carepo`, `vip`, in `kinds/`, one module each; the module itself is
//! `experiment.rs`). A `[tiny]` table
//! overrides any of it for `--tiny` runs (the tests use them).
//!
//! Every namespace and process is removed on exit: by the testbed's drop on
//! a normal or failed run, and by a signal thread on SIGINT/SIGTERM.

pub mod experiment;
mod kinds;
mod net;

use std::path::{Path, PathBuf};

pub use experiment::{load, parse_bytes, Experiment};

/// Set by the signal thread: the run is being torn down.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Removes what a run left on SIGINT/SIGTERM, then exits.
fn cleanup_on_signal(work: PathBuf) {
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {},
                _ = term.recv() => {},
            }
        });
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!("testbed: interrupted; removing namespaces and processes");
        granary_testbed::cleanup_process();
        let _ = std::fs::remove_dir_all(&work);
        std::process::exit(130);
    });
}

/// `granary testbed run FILE --out OUT [--tiny]`: builds the experiment's
/// network, runs its procedure and writes the report into `out`.
pub fn run(file: &Path, out: &Path, tiny: bool) -> anyhow::Result<()> {
    let e = load(file, tiny)?;
    granary_testbed::check_requirements()?;
    std::fs::create_dir_all(out)
        .map_err(|err| anyhow::anyhow!("cannot create {}: {err}", out.display()))?;
    let work = std::env::temp_dir().join(format!("granary-testbed-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    cleanup_on_signal(work.clone());
    let t0 = std::time::Instant::now();
    let r = kinds::run(&e, out, &work, tiny);
    // Failures caused by the teardown: let the signal thread finish
    // and exit with 130.
    while INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(&work);
    r?;
    eprintln!(
        "testbed: {} done in {:.0} s; report: {}",
        e.name,
        t0.elapsed().as_secs_f64(),
        out.join("report.md").display()
    );
    Ok(())
}
