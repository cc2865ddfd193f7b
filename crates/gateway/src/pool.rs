//! The bounded pool that evaluates user-controlled work (catalog searches, CQL2
//! filters, item building): a fixed set of threads at a lower CPU priority than the
//! async workers, so that a flood of expensive requests queues here while cheap
//! ones (`/api/status`, the page, downloads' heads) keep their cores.
//!
//! How many jobs run at once is bounded by the caller (`Shared::catalog_slots`, as
//! many slots as threads here); a job holds its slot until it ends.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// How much nicer than the async workers the pool's threads are (19 at most).
pub const NICE: i32 = 10;

/// A fixed set of low-priority worker threads.
pub struct Pool {
    tx: Sender<Job>,
}

impl Pool {
    /// Starts `threads` workers.
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        // Unbounded here: the callers' slots bound what is queued.
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let _ = std::thread::Builder::new()
                .name(format!("gateway-eval-{i}"))
                .spawn(move || worker(rx));
        }
        Pool { tx }
    }

    /// Runs `f` on the pool; its value, or `Err` if it panicked or the pool is gone.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ =
                tx.send(r.map_err(|_| "the evaluation failed (a bug: see the log)".to_string()));
        });
        self.tx
            .send(job)
            .map_err(|_| "the evaluation pool has stopped".to_string())?;
        rx.await
            .map_err(|_| "the evaluation pool has stopped".to_string())?
    }
}

fn worker(rx: Arc<Mutex<Receiver<Job>>>) {
    // Linux keeps a nice value per thread: this lowers only this one. A
    // failure (a sandbox that forbids it) leaves the thread at the default.
    let base = rustix::process::getpriority_process(None).unwrap_or(0);
    if let Err(e) = rustix::process::setpriority_process(None, (base + NICE).min(19)) {
        tracing::debug!("gateway evaluation thread keeps its priority: {e}");
    }
    loop {
        let job = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_on_low_priority_threads_and_panics_are_errors() {
        let base = rustix::process::getpriority_process(None).unwrap_or(0);
        let p = Pool::new(2);
        let (name, nice) = p
            .run(|| {
                (
                    std::thread::current().name().map(str::to_string),
                    rustix::process::getpriority_process(None).unwrap_or(0),
                )
            })
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("gateway-eval-"));
        // Raising a thread's nice value is always allowed.
        assert_eq!(nice, (base + NICE).min(19));
        let r: Result<(), String> = p.run(|| panic!("boom")).await;
        assert!(r.is_err());
        // The pool still works after a panic.
        assert_eq!(p.run(|| 7).await.unwrap(), 7);
    }
}
