//! Replication work shared by the nodes of a federation, on the catalog's
//! PostgreSQL: one row per copy wanted (`name`, `version`, the `target` node
//! that is to hold it). Any node may offer work (an idempotent insert); the
//! target claims its own rows with `SELECT … FOR UPDATE SKIP LOCKED` under
//! a lease, so that two processes of one node (or a restarted one) never
//! run one copy twice at once, and a claimer that dies leaves the row to be
//! claimed again when its lease ends. A row goes when the copy is made; a
//! failure puts it back with a later retry time; a row that keeps failing is
//! *abandoned* ([`WorkQueue::abandon`]): never claimed again, it tells the
//! planners to offer the copy to another target, and is forgotten after a
//! while ([`WorkQueue::forget_abandoned`]) so that the target may be tried
//! again one day. The database's `now()` is the clock: nodes' clocks need
//! not agree.

use std::time::Duration;

use postgres::{Client, NoTls};

use crate::error::{Error, Result};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS replication_work (
  id BIGSERIAL PRIMARY KEY, name TEXT COLLATE \"C\" NOT NULL, version BIGINT NOT NULL,
  target TEXT COLLATE \"C\" NOT NULL, source TEXT, offered_by TEXT NOT NULL,
  offered TIMESTAMPTZ NOT NULL DEFAULT now(), attempts INT NOT NULL DEFAULT 0,
  claimed_by TEXT, not_before TIMESTAMPTZ NOT NULL DEFAULT now(), last_error TEXT,
  UNIQUE (name, version, target));
CREATE INDEX IF NOT EXISTS replication_work_target ON replication_work (target, not_before);
ALTER TABLE replication_work ADD COLUMN IF NOT EXISTS abandoned TIMESTAMPTZ;
";

/// One copy wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// Row id (for [`WorkQueue::done`] / [`WorkQueue::failed`]).
    pub id: i64,
    /// The name (without version).
    pub name: String,
    /// The version.
    pub version: u64,
    /// The node that is to hold the copy.
    pub target: String,
    /// A node that holds it (a forwarding hint for the fetch), if known.
    pub source: Option<String>,
    /// Times it was claimed before.
    pub attempts: i32,
}

/// The shared replication work queue (PostgreSQL only: a local SQLite
/// catalog has no other node to share work with).
pub struct WorkQueue {
    client: Client,
}

fn version_sql(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| Error::Invalid(format!("version {v} is too large")))
}

impl WorkQueue {
    /// Connects to the catalog at `url` (a `postgres://` URL, multi-host
    /// allowed) and makes the table if needed. Must not run on a tokio
    /// runtime thread (the sync client has its own).
    pub fn connect(url: &str) -> Result<WorkQueue> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::Invalid(
                "replication work is shared through a PostgreSQL catalog (postgres://…)".into(),
            ));
        }
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| Error::Invalid(format!("catalog URL: {e}")))?;
        config.connect_timeout(Duration::from_secs(5));
        let mut client = config.connect(NoTls)?;
        // No DDL (and its table locks) when the table is there already.
        let rels = ["replication_work", "replication_work_target"];
        if !crate::pg::schema_present(&mut client, &rels, Some(("replication_work", "abandoned")))?
        {
            let mut tx = client.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock(7262737)", &[])?;
            tx.batch_execute(SCHEMA)?;
            tx.commit()?;
        }
        Ok(WorkQueue { client })
    }

    /// Offers a copy of `name` `version` to `target` (`source`: a node that
    /// holds it). True when it was new; an offer already there is left as
    /// it is (several nodes planning at once offer each copy once).
    pub fn offer(
        &mut self,
        name: &str,
        version: u64,
        target: &str,
        source: Option<&str>,
        by: &str,
    ) -> Result<bool> {
        let n = self.client.execute(
            "INSERT INTO replication_work (name, version, target, source, offered_by)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name, version, target) DO NOTHING",
            &[&name, &version_sql(version)?, &target, &source, &by],
        )?;
        Ok(n == 1)
    }

    /// Claims the oldest due copy whose target is `node`, for `lease`: no
    /// other claimer gets it until the lease ends (or it is done or failed).
    /// Rows locked by a concurrent claimer are skipped, not waited for.
    pub fn claim(&mut self, node: &str, lease: Duration) -> Result<Option<Work>> {
        let secs = lease.as_secs_f64();
        let row = self.client.query_opt(
            "UPDATE replication_work w
             SET claimed_by = $1, attempts = w.attempts + 1,
                 not_before = now() + make_interval(secs => $2)
             FROM (SELECT id FROM replication_work
                   WHERE target = $1 AND not_before <= now() AND abandoned IS NULL
                   ORDER BY not_before, id
                   FOR UPDATE SKIP LOCKED LIMIT 1) due
             WHERE w.id = due.id
             RETURNING w.id, w.name, w.version, w.target, w.source, w.attempts - 1",
            &[&node, &secs],
        )?;
        Ok(row.map(|r| Work {
            id: r.get(0),
            name: r.get(1),
            version: r.get::<_, i64>(2) as u64,
            target: r.get(3),
            source: r.get(4),
            attempts: r.get(5),
        }))
    }

    /// The copy is made: the row goes.
    pub fn done(&mut self, id: i64) -> Result<()> {
        self.client
            .execute("DELETE FROM replication_work WHERE id = $1", &[&id])?;
        Ok(())
    }

    /// The copy failed: claimable again after `retry`, with the reason kept.
    pub fn failed(&mut self, id: i64, why: &str, retry: Duration) -> Result<()> {
        self.client.execute(
            "UPDATE replication_work SET claimed_by = NULL, last_error = $2,
                 not_before = now() + make_interval(secs => $3) WHERE id = $1",
            &[&id, &why, &retry.as_secs_f64()],
        )?;
        Ok(())
    }

    /// The copy failed too often at its target: the row is kept, never
    /// claimed again, as a sign to the planners that this target is not to
    /// be offered this version (until [`WorkQueue::forget_abandoned`]).
    pub fn abandon(&mut self, id: i64, why: &str) -> Result<()> {
        self.client.execute(
            "UPDATE replication_work SET claimed_by = NULL, last_error = $2, abandoned = now()
             WHERE id = $1",
            &[&id, &why],
        )?;
        Ok(())
    }

    /// Abandons the offers that no claimer took within `unclaimed` of being
    /// offered (a target that is up but does not claim), and forgets the
    /// rows abandoned more than `forget` ago. Returns (abandoned, forgotten).
    pub fn forget_abandoned(
        &mut self,
        unclaimed: Duration,
        forget: Duration,
    ) -> Result<(u64, u64)> {
        let a = self.client.execute(
            "UPDATE replication_work SET abandoned = now(),
                 last_error = coalesce(last_error, 'not claimed by its target')
             WHERE abandoned IS NULL AND attempts = 0
               AND offered < now() - make_interval(secs => $1)",
            &[&unclaimed.as_secs_f64()],
        )?;
        let f = self.client.execute(
            "DELETE FROM replication_work WHERE abandoned < now() - make_interval(secs => $1)",
            &[&forget.as_secs_f64()],
        )?;
        Ok((a, f))
    }

    /// Copies abandoned and not yet forgotten: (name, version, target, last
    /// error).
    pub fn abandoned(&mut self) -> Result<Vec<(String, u64, String, String)>> {
        Ok(self
            .client
            .query(
                "SELECT name, version, target, coalesce(last_error, '') FROM replication_work
                 WHERE abandoned IS NOT NULL ORDER BY name, version, target",
                &[],
            )?
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64, r.get(2), r.get(3)))
            .collect())
    }

    /// Drops the offers to `target` (a node found down: its copies are
    /// offered to others instead). Returns how many went.
    pub fn withdraw(&mut self, target: &str) -> Result<u64> {
        Ok(self
            .client
            .execute("DELETE FROM replication_work WHERE target = $1", &[&target])?)
    }

    /// Copies offered and not yet made nor abandoned: (name, version, target).
    pub fn pending(&mut self) -> Result<Vec<(String, u64, String)>> {
        Ok(self
            .client
            .query(
                "SELECT name, version, target FROM replication_work WHERE abandoned IS NULL
                 ORDER BY name, version, target",
                &[],
            )?
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64, r.get(2)))
            .collect())
    }
}
