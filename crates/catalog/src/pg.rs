//! Shared storage: PostgreSQL (the `postgres` sync client), free text in a `tsvector`
//! GIN index. A write stamps its rows (`records.seq`, `removed.seq`) with its own
//! transaction id (`pg_current_xact_id()`, 64 bits, never reused), so writers of many
//! nodes do not queue on a shared row. A reader's head is the oldest transaction still
//! running when it looks (`pg_snapshot_xmin`): every transaction below it has ended,
//! and every one that commits later has an id at or above it, so reading the rows
//! stamped at or above the previous head, in one snapshot, skips no change (a row seen
//! twice is applied twice, which is harmless). `catalog_meta` keeps only the epoch
//! (`clear` bumps it).
//!
//! The connection is re-made by itself: a call that finds it broken (the server was
//! restarted) reconnects and runs again, a bounded number of times (every write is
//! idempotent: an upsert, a delete, a rename that finds nothing left to move). While
//! the server cannot be reached, calls fail at once with [`Error::Unavailable`] and a
//! new connection is tried no more often than the back-off allows (0.1 s doubling to
//! 2 s), so a search answers within seconds once the server is back.

use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use crate::error::{Error, Result};
use crate::feed::{Changes, IndexRow, Sink};
use crate::location::{Loc, Location, NodeStatus, Replicas, Role};
use crate::record::{decode_record, Columns, Prepared, Record};
use crate::rename::{moved_name, renamed_range, temp_name};
use postgres::fallible_iterator::FallibleIterator;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS catalog_meta (k INT PRIMARY KEY CHECK (k = 1), epoch BIGINT NOT NULL, seq BIGINT NOT NULL);
INSERT INTO catalog_meta VALUES (1, 0, 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS records (
  id BIGSERIAL PRIMARY KEY, name TEXT COLLATE \"C\" NOT NULL, version BIGINT NOT NULL,
  seq BIGINT NOT NULL, project TEXT NOT NULL, size BIGINT NOT NULL, time_start TEXT,
  time_end TEXT, facets TEXT NOT NULL, tsv tsvector NOT NULL, data TEXT NOT NULL,
  UNIQUE (name, version));
CREATE INDEX IF NOT EXISTS records_seq ON records (seq);
CREATE INDEX IF NOT EXISTS records_tsv ON records USING gin (tsv);
CREATE TABLE IF NOT EXISTS removed (id BIGINT NOT NULL, seq BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS removed_seq ON removed (seq);
CREATE TABLE IF NOT EXISTS locations (name TEXT COLLATE \"C\" NOT NULL, version BIGINT NOT NULL,
  node TEXT COLLATE \"C\" NOT NULL, manifest_digest TEXT, seen TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (name, version, node));
CREATE INDEX IF NOT EXISTS locations_node ON locations (node);
CREATE TABLE IF NOT EXISTS nodes (prefix TEXT COLLATE \"C\" PRIMARY KEY, last_seen TIMESTAMPTZ NOT NULL,
  started TIMESTAMPTZ NOT NULL, load BIGINT);
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                 AND table_name = 'nodes' AND column_name = 'load') THEN
    ALTER TABLE nodes ADD COLUMN load BIGINT;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                 AND table_name = 'nodes' AND column_name = 'role') THEN
    ALTER TABLE nodes ADD COLUMN role TEXT;
  END IF;
END $$;
";

/// SQL for a timestamp (or interval) `col` as milliseconds (since the Unix epoch).
fn ms(col: &str) -> String {
    format!("(extract(epoch FROM {col}) * 1000)::int8")
}

/// Rows per multi-row INSERT in `upsert_many`.
const BATCH: usize = 2000;

pub(crate) struct Pg {
    config: postgres::Config,
    client: Option<Client>,
    /// No new connection is tried before this instant (back-off after a failure).
    retry_at: Option<Instant>,
    backoff: Duration,
    /// Why the last connection attempt (or the last connection) failed.
    last_error: String,
    /// The heads this handle gave out: (token, oldest running transaction id) of
    /// the snapshots they stand for, newest last (see [`Pg::head`]).
    heads: std::collections::VecDeque<(i64, i64)>,
}

/// How many recent heads a handle remembers (an older `since` loads everything).
const HEADS: usize = 64;

/// First wait after a failed connection attempt; doubled after each failure.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Runs of one call on connections that broke under it, at most.
const ATTEMPTS: usize = 3;
/// A server that does not answer a connection attempt in this long is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// True when `e` says the connection is gone or the server cannot serve now
/// (shutting down, starting up, unreachable), not that the statement was wrong.
fn is_connection(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    if e.is_closed() {
        return true;
    }
    if let Some(c) = e.code() {
        return c.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(c);
    }
    // No SQLSTATE: an I/O error (refused, reset, timed out) or a protocol error on
    // a connection that is going away.
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if s.is::<std::io::Error>() {
            return true;
        }
        src = s.source();
    }
    e.as_db_error().is_none()
}

/// Drops a client off this thread: the sync client owns a runtime whose shutdown
/// panics when it runs inside another runtime (the daemon drops its catalog on a
/// tokio thread when it stops).
fn drop_client(c: Client) {
    if let Ok(h) = std::thread::Builder::new()
        .name("catalog-close".into())
        .spawn(move || drop(c))
    {
        let _ = h.join();
    }
}

/// The relations [`SCHEMA`] makes (tables and indexes), for [`schema_present`].
const RELATIONS: &[&str] = &[
    "catalog_meta",
    "records",
    "records_seq",
    "records_tsv",
    "removed",
    "removed_seq",
    "locations",
    "locations_node",
    "nodes",
];

/// True when every relation of `relations` exists (and, when `column` is
/// given as (table, column), that column): the schema is there and no DDL
/// need run. Only catalog reads, no table lock.
pub(crate) fn schema_present(
    client: &mut Client,
    relations: &[&str],
    column: Option<(&str, &str)>,
) -> std::result::Result<bool, postgres::Error> {
    let names: Vec<String> = relations.iter().map(|r| r.to_string()).collect();
    let (table, col) = column.unwrap_or(("", ""));
    let row = client.query_one(
        "SELECT (SELECT count(*) FROM unnest($1::text[]) AS r(n) WHERE to_regclass(r.n) IS NULL) = 0
           AND ($2 = '' OR EXISTS (SELECT 1 FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = $2 AND column_name = $3))",
        &[&names, &table, &col],
    )?;
    row.try_get(0)
}

fn open_client(config: &postgres::Config) -> std::result::Result<Client, postgres::Error> {
    let mut client = config.connect(NoTls)?;
    // Every client runs this at open: when the schema is there, it must take no
    // lock. `CREATE INDEX IF NOT EXISTS` takes a SHARE lock on its table even when
    // the index exists, so a node's writes and another client's open deadlocked
    // (PostgreSQL aborted one of them: "deadlock detected").
    if schema_present(&mut client, RELATIONS, Some(("nodes", "role")))? {
        return Ok(client);
    }
    let mut tx = client.transaction()?;
    // Two nodes creating the schema at once would race on the catalogs.
    tx.execute("SELECT pg_advisory_xact_lock(7262736)", &[])?;
    tx.batch_execute(SCHEMA)?;
    tx.commit()?;
    Ok(client)
}

/// `application_name` of a node's catalog connection (in `pg_stat_activity`).
pub const MAIN_APPLICATION: &str = "granary-catalog";

impl Drop for Pg {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            drop_client(c);
        }
    }
}

impl Pg {
    /// Connects; must not be called on a tokio runtime thread (the sync client runs its
    /// own): from async code, use `spawn_blocking`. A server that cannot be reached is
    /// not an error here: the handle starts disconnected and connects when it can
    /// (calls meanwhile fail with [`Error::Unavailable`]); a bad URL, a refused login
    /// or a failing schema is.
    pub fn connect(url: &str) -> Result<Pg> {
        Self::connect_as(url, MAIN_APPLICATION)
    }

    fn connect_as(url: &str, application: &str) -> Result<Pg> {
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| Error::Invalid(format!("catalog URL: {e}")))?;
        // The URL's own name, if it gives one, is kept.
        if config.get_application_name().is_none() {
            config.application_name(application);
        }
        config.connect_timeout(CONNECT_TIMEOUT);
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        let mut pg = Pg {
            config,
            client: None,
            retry_at: None,
            backoff: MIN_BACKOFF,
            last_error: String::new(),
            heads: Default::default(),
        };
        match open_client(&pg.config) {
            Ok(c) => pg.client = Some(c),
            Err(e) if is_connection(&e) => pg.failed(&e),
            Err(e) => return Err(e.into()),
        }
        Ok(pg)
    }

    fn failed(&mut self, e: &postgres::Error) {
        self.last_error = format!("PostgreSQL: {}", crate::error::pg_message(e));
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn unavailable(&self) -> Error {
        Error::Unavailable(self.last_error.clone())
    }

    /// The connection: the open one, or a new one unless the back-off says wait.
    fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            if let Some(c) = self.client.take() {
                drop_client(c);
            }
        }
        if self.client.is_none() {
            if self.retry_at.is_some_and(|t| Instant::now() < t) {
                return Err(self.unavailable());
            }
            match open_client(&self.config) {
                Ok(c) => {
                    self.client = Some(c);
                    self.retry_at = None;
                    self.backoff = MIN_BACKOFF;
                }
                Err(e) if is_connection(&e) => {
                    self.failed(&e);
                    return Err(self.unavailable());
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.client
            .as_mut()
            .ok_or_else(|| Error::Unavailable("no connection".into()))
    }

    /// Runs `f` on the connection; when the connection broke under it, reconnects
    /// and runs it again (at most [`ATTEMPTS`] times in all).
    fn run<T>(&mut self, mut f: impl FnMut(&mut Client) -> Result<T>) -> Result<T> {
        let mut tries = 0;
        loop {
            let c = self.client()?;
            match f(c) {
                Err(Error::Postgres(e)) if is_connection(&e) || c.is_closed() => {
                    if let Some(c) = self.client.take() {
                        drop_client(c);
                    }
                    self.last_error = format!("PostgreSQL: {}", crate::error::pg_message(&e));
                    tries += 1;
                    if tries >= ATTEMPTS {
                        self.retry_at = Some(Instant::now() + self.backoff);
                        return Err(self.unavailable());
                    }
                }
                r => return r,
            }
        }
    }
}

/// The writing transaction's stamp: its own id (no shared row is touched).
fn bump(tx: &mut postgres::Transaction) -> Result<i64> {
    Ok(tx
        .query_one("SELECT pg_current_xact_id()::text::int8", &[])?
        .get(0))
}

/// The epoch, the snapshot (`xmin:xmax:running ids`) and its xmin: the oldest
/// transaction still running (every change stamped below it is committed or gone).
const HEAD: &str = "SELECT epoch, pg_current_snapshot()::text,
       pg_snapshot_xmin(pg_current_snapshot())::text::int8 FROM catalog_meta WHERE k = 1";

/// A snapshot's token: equal snapshots (no transaction began or ended in between)
/// give equal tokens; never 0 (the index's "nothing seen yet"). 64-bit FNV-1a.
fn token(snapshot: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in snapshot.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    ((h >> 1) as i64).max(1)
}

fn unsigned(v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| Error::Corrupt(format!("negative version or size {v}")))
}

impl Pg {
    /// (epoch, token of the current snapshot): the token changes whenever a
    /// transaction began or ended since, so an unchanged head means no change.
    pub fn head(&mut self) -> Result<(i64, i64)> {
        let (epoch, snap, xmin): (i64, String, i64) = self.run(|c| {
            let r = c.query_one(HEAD, &[])?;
            Ok((r.get(0), r.get(1), r.get(2)))
        })?;
        Ok((epoch, self.remember(&snap, xmin)))
    }

    fn remember(&mut self, snap: &str, xmin: i64) -> i64 {
        let t = token(snap);
        if self.heads.back().map(|h| h.0) != Some(t) {
            self.heads.push_back((t, xmin));
            if self.heads.len() > HEADS {
                self.heads.pop_front();
            }
        }
        t
    }

    /// Changes after the head `since` (a token from this handle; 0: everything). A
    /// token this handle no longer knows reads as a new epoch (`None`: load all).
    pub fn changes(&mut self, since: i64, epoch: Option<i64>, sink: Sink) -> Result<Changes> {
        let from = if since == 0 {
            0
        } else {
            match self.heads.iter().rev().find(|h| h.0 == since) {
                Some(h) => h.1,
                None => return Ok(None),
            }
        };
        let mut seen_snap = (String::new(), 0i64);
        // Rows already given to the sink are not given again: a connection lost
        // after the first one fails the call (the caller's next sync starts over).
        let mut pushed = false;
        let r = self.run(|c| {
            if pushed {
                return Err(Error::Unavailable(
                    "PostgreSQL: connection lost while reading the catalog".into(),
                ));
            }
            let mut tx = c
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let r = tx.query_one(HEAD, &[])?;
            let head: (i64, i64) = (r.get(0), token(r.get(1)));
            seen_snap = (r.get(1), r.get(2));
            if epoch.is_some_and(|e| e != head.0) {
                return Ok(None);
            }
            {
                let mut rows = tx.query_raw(
                    "SELECT id, name, version, size, time_start, time_end, facets,
                            array_to_string(tsvector_to_array(tsv), ' ')
                       FROM records WHERE seq >= $1 ORDER BY id",
                    [&from as &(dyn postgres::types::ToSql + Sync)],
                )?;
                while let Some(r) = rows.next()? {
                    pushed = true;
                    sink(IndexRow {
                        rid: r.get(0),
                        name: r.get(1),
                        version: unsigned(r.get(2))?,
                        size: unsigned(r.get(3))?,
                        time_start: r.get(4),
                        time_end: r.get(5),
                        facets: r.get(6),
                        words: Some(r.get(7)),
                    });
                }
            }
            let removed = if since == 0 {
                Vec::new() // a full load reads only what exists
            } else {
                tx.query("SELECT id FROM removed WHERE seq >= $1", &[&from])?
                    .iter()
                    .map(|r| r.get(0))
                    .collect()
            };
            tx.commit()?;
            Ok(Some((head, removed)))
        });
        if let Ok(Some(_)) = &r {
            self.remember(&seen_snap.0, seen_snap.1);
        }
        r
    }

    pub fn upsert_many(&mut self, rs: &[Prepared]) -> Result<()> {
        // One statement may not touch a row twice: the last write of a (name, version) wins.
        let mut last = std::collections::HashMap::new();
        for (i, p) in rs.iter().enumerate() {
            last.insert((p.cols.name.as_str(), p.cols.version), i);
        }
        let mut keep: Vec<usize> = last.into_values().collect();
        keep.sort_unstable();
        self.run(|c| {
            let mut tx = c.transaction()?;
            let seq = bump(&mut tx)?;
            let st = tx.prepare(
                "INSERT INTO records (name, version, seq, project, size, time_start, time_end, facets, tsv, data)
                 SELECT n, v, $1, p, s, ts, te, f, to_tsvector('simple', b), d
                 FROM unnest($2::text[], $3::int8[], $4::text[], $5::int8[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
                   AS u(n, v, p, s, ts, te, f, b, d)
                 ON CONFLICT (name, version) DO UPDATE SET seq = EXCLUDED.seq, project = EXCLUDED.project,
                   size = EXCLUDED.size, time_start = EXCLUDED.time_start, time_end = EXCLUDED.time_end,
                   facets = EXCLUDED.facets, tsv = EXCLUDED.tsv, data = EXCLUDED.data",
            )?;
            for chunk in keep.chunks(BATCH) {
                let ps: Vec<&Prepared> = chunk.iter().map(|&i| &rs[i]).collect();
                let n: Vec<&str> = ps.iter().map(|p| p.cols.name.as_str()).collect();
                let v: Vec<i64> = ps.iter().map(|p| p.cols.version).collect();
                let pr: Vec<&str> = ps.iter().map(|p| p.cols.project.as_str()).collect();
                let s: Vec<i64> = ps.iter().map(|p| p.cols.size).collect();
                let ts: Vec<Option<&str>> =
                    ps.iter().map(|p| p.cols.time_start.as_deref()).collect();
                let te: Vec<Option<&str>> = ps.iter().map(|p| p.cols.time_end.as_deref()).collect();
                let f: Vec<&str> = ps.iter().map(|p| p.cols.facets.as_str()).collect();
                let b: Vec<&str> = ps.iter().map(|p| p.body.as_str()).collect();
                let d: Vec<&str> = ps.iter().map(|p| p.cols.data.as_str()).collect();
                tx.execute(&st, &[&seq, &n, &v, &pr, &s, &ts, &te, &f, &b, &d])?;
            }
            let locs: Vec<Loc> = keep
                .iter()
                .filter_map(|&i| {
                    let p = &rs[i];
                    p.loc.as_ref().map(|(node, digest)| Loc {
                        name: p.cols.name.clone(),
                        version: p.cols.version,
                        node: node.clone(),
                        digest: digest.clone(),
                    })
                })
                .collect();
            insert_locations(&mut tx, &locs)?;
            tx.commit()?;
            Ok(())
        })
    }

    pub fn remove(&mut self, name: &str, version: Option<i64>) -> Result<usize> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            let seq = bump(&mut tx)?;
            let ids: Vec<i64> = tx
                .query(
                    "DELETE FROM records WHERE name = $1 AND ($2::int8 IS NULL OR version = $2) RETURNING id",
                    &[&name, &version],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if ids.is_empty() {
                return Ok(0); // rolled back: nothing changed
            }
            tx.execute(
                "INSERT INTO removed (id, seq) SELECT unnest($1::int8[]), $2",
                &[&ids, &seq],
            )?;
            tx.execute(
                "DELETE FROM locations WHERE name = $1 AND ($2::int8 IS NULL OR version = $2)",
                &[&name, &version],
            )?;
            tx.commit()?;
            Ok(ids.len())
        })
    }

    pub fn rename(&mut self, old: &str, new: &str) -> Result<usize> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            let seq = bump(&mut tx)?;
            let (lo, hi) = renamed_range(old);
            let rows: Vec<(i64, String, i64)> = tx
                .query(
                    "SELECT id, name, version FROM records WHERE name = $1 OR (name >= $2 AND name < $3)",
                    &[&old, &lo, &hi],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            if rows.is_empty() {
                return Ok(0);
            }
            for (id, _, _) in &rows {
                tx.execute(
                    "UPDATE records SET name = $2 WHERE id = $1",
                    &[id, &temp_name(*id)],
                )?;
            }
            for (id, name, v) in &rows {
                let to = moved_name(old, new, name)?;
                if !tx
                    .query(
                        "SELECT 1 FROM records WHERE name = $1 AND version = $2",
                        &[&to, v],
                    )?
                    .is_empty()
                {
                    return Err(Error::Conflict(format!("{to} version {v} exists already")));
                }
                tx.execute(
                    "UPDATE records SET name = $2, seq = $3 WHERE id = $1",
                    &[id, &to, &seq],
                )?;
                // Its locations move with it (the caller renames this way only names
                // no other node holds).
                tx.execute(
                    "DELETE FROM locations WHERE name = $1 AND version = $2",
                    &[&to, v],
                )?;
                tx.execute(
                    "UPDATE locations SET name = $3 WHERE name = $1 AND version = $2",
                    &[name, v, &to],
                )?;
            }
            tx.commit()?;
            Ok(rows.len())
        })
    }

    pub fn fetch(&mut self, rids: &[i64]) -> Result<Vec<Record>> {
        let rows = self.run(|c| {
            Ok(c.query(
                "SELECT id, name, version, project, size, time_start, time_end, facets, data FROM records WHERE id = ANY($1)",
                &[&rids],
            )?)
        })?;
        let mut by: std::collections::HashMap<i64, Record> = std::collections::HashMap::new();
        for r in rows {
            let c = Columns {
                name: r.get(1),
                version: r.get(2),
                project: r.get(3),
                size: r.get(4),
                time_start: r.get(5),
                time_end: r.get(6),
                facets: r.get(7),
                data: r.get(8),
            };
            by.insert(r.get(0), decode_record(c)?);
        }
        Ok(rids.iter().filter_map(|id| by.remove(id)).collect())
    }

    pub fn clear(&mut self) -> Result<()> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            tx.batch_execute(
                "UPDATE catalog_meta SET epoch = epoch + 1 WHERE k = 1;
                 DELETE FROM records; DELETE FROM removed; DELETE FROM locations;",
            )?;
            tx.commit()?;
            Ok(())
        })
    }
}

/// The chunk index of a record's file (virtual Zarr): its own table, created when first
/// used, so databases made before it keep working and the records table is untouched.
impl Pg {
    const CHUNK_REFS: &'static str = "CREATE TABLE IF NOT EXISTS chunk_refs (name TEXT NOT NULL, version BIGINT NOT NULL, refs TEXT NOT NULL, PRIMARY KEY (name, version))";

    pub fn put_chunk_refs(&mut self, name: &str, version: i64, refs: &str) -> Result<()> {
        self.run(|c| {
            c.batch_execute(Self::CHUNK_REFS)?;
            c.execute(
                "INSERT INTO chunk_refs (name, version, refs) VALUES ($1, $2, $3) ON CONFLICT (name, version) DO UPDATE SET refs = EXCLUDED.refs",
                &[&name, &version, &refs],
            )?;
            Ok(())
        })
    }

    pub fn chunk_refs(&mut self, name: &str, version: i64) -> Result<Option<String>> {
        self.run(|c| {
            c.batch_execute(Self::CHUNK_REFS)?;
            Ok(c.query_opt(
                "SELECT refs FROM chunk_refs WHERE name = $1 AND version = $2",
                &[&name, &version],
            )?
            .map(|r| r.get(0)))
        })
    }
}

/// Writes locations (server time as `seen`), in batches; the caller's transaction.
fn insert_locations(tx: &mut postgres::Transaction, locs: &[Loc]) -> Result<()> {
    if locs.is_empty() {
        return Ok(());
    }
    // One statement may not touch a row twice: the last of a (name, version, node) wins.
    let mut last = std::collections::HashMap::new();
    for (i, l) in locs.iter().enumerate() {
        last.insert((l.name.as_str(), l.version, l.node.as_str()), i);
    }
    let mut keep: Vec<usize> = last.into_values().collect();
    // Rows in key order: two writers touching the same rows lock them in one order.
    keep.sort_unstable_by(|&a, &b| {
        (&locs[a].name, locs[a].version, &locs[a].node).cmp(&(
            &locs[b].name,
            locs[b].version,
            &locs[b].node,
        ))
    });
    let st = tx.prepare(
        "INSERT INTO locations (name, version, node, manifest_digest, seen)
         SELECT n, v, o, d, now() FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[]) AS u(n, v, o, d)
         ON CONFLICT (name, version, node) DO UPDATE SET manifest_digest = EXCLUDED.manifest_digest,
           seen = EXCLUDED.seen",
    )?;
    for chunk in keep.chunks(BATCH) {
        let n: Vec<&str> = chunk.iter().map(|&i| locs[i].name.as_str()).collect();
        let v: Vec<i64> = chunk.iter().map(|&i| locs[i].version).collect();
        let o: Vec<&str> = chunk.iter().map(|&i| locs[i].node.as_str()).collect();
        let d: Vec<Option<&str>> = chunk.iter().map(|&i| locs[i].digest.as_deref()).collect();
        tx.execute(&st, &[&n, &v, &o, &d])?;
    }
    Ok(())
}

/// Deletes the records `ids` (a record whose last location went), with tombstones.
fn drop_records(tx: &mut postgres::Transaction, ids: &[i64]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let seq = bump(tx)?;
    tx.execute("DELETE FROM records WHERE id = ANY($1)", &[&ids])?;
    tx.execute(
        "INSERT INTO removed (id, seq) SELECT unnest($1::int8[]), $2",
        &[&ids, &seq],
    )?;
    Ok(())
}

/// The location catalog (see `location.rs`). Registrations touch only location rows
/// (no `catalog_meta` bump): nodes registering at once do not wait on one another.
/// A removal locks the records it may drop (`FOR UPDATE`) before it deletes its
/// locations, so two nodes removing the last two locations of a version at once are
/// serialised on that record and the second one drops it.
impl Pg {
    pub fn register_locations(&mut self, locs: &[Loc]) -> Result<()> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            insert_locations(&mut tx, locs)?;
            tx.commit()?;
            Ok(())
        })
    }

    pub fn remove_located(
        &mut self,
        node: &str,
        name: &str,
        version: Option<i64>,
    ) -> Result<usize> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "SELECT id FROM records WHERE name = $1 AND ($2::int8 IS NULL OR version = $2) ORDER BY version FOR UPDATE",
                &[&name, &version],
            )?;
            let n = tx.execute(
                "DELETE FROM locations WHERE node = $1 AND name = $2 AND ($3::int8 IS NULL OR version = $3)",
                &[&node, &name, &version],
            )?;
            let ids: Vec<i64> = tx
                .query(
                    "SELECT id FROM records r WHERE name = $1 AND ($2::int8 IS NULL OR version = $2)
                     AND NOT EXISTS (SELECT 1 FROM locations l WHERE l.name = r.name AND l.version = r.version)",
                    &[&name, &version],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            drop_records(&mut tx, &ids)?;
            tx.commit()?;
            Ok(n as usize)
        })
    }

    pub fn clear_node(&mut self, node: &str) -> Result<usize> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            let gone: Vec<(String, i64)> = tx
                .query(
                    "DELETE FROM locations WHERE node = $1 RETURNING name, version",
                    &[&node],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            // Records left with no location: those this node held alone, and records
            // no node has registered (written before locations existed).
            let ids: Vec<i64> = tx
                .query(
                    "SELECT id FROM records r WHERE NOT EXISTS
                     (SELECT 1 FROM locations l WHERE l.name = r.name AND l.version = r.version)
                     ORDER BY id FOR UPDATE",
                    &[],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            drop_records(&mut tx, &ids)?;
            tx.commit()?;
            Ok(gone.len())
        })
    }

    pub fn locations_of(&mut self, name: &str, timeout_ms: i64) -> Result<Vec<Location>> {
        let sql = format!(
            "SELECT l.name, l.version, l.node, l.manifest_digest, {}, {},
               coalesce(n.last_seen > now() - $2::float8 * interval '1 millisecond', false), n.load,
               CASE WHEN n.prefix IS NULL THEN NULL ELSE coalesce(n.role, 'storage') END
             FROM locations l LEFT JOIN nodes n ON n.prefix = l.node
             WHERE l.name = $1 ORDER BY l.version DESC, l.node",
            ms("l.seen"),
            ms("n.last_seen")
        );
        let rows = self.run(|c| Ok(c.query(sql.as_str(), &[&name, &(timeout_ms as f64)])?))?;
        rows.iter()
            .map(|r| {
                Ok(Location {
                    name: r.get(0),
                    version: unsigned(r.get(1))?,
                    node: r.get(2),
                    manifest_digest: r.get(3),
                    seen_ms: r.get(4),
                    last_seen_ms: r.get(5),
                    up: r.get(6),
                    load: r.get::<_, Option<i64>>(7).map(|n| n.max(0) as u64),
                    role: r.get::<_, Option<&str>>(8).map(|s| Role::stored(Some(s))),
                })
            })
            .collect()
    }

    pub fn node_locations(&mut self, node: &str) -> Result<Vec<(String, u64, Option<String>)>> {
        let rows = self.run(|c| {
            Ok(c.query(
                "SELECT name, version, manifest_digest FROM locations WHERE node = $1 ORDER BY name, version",
                &[&node],
            )?)
        })?;
        rows.iter()
            .map(|r| Ok((r.get(0), unsigned(r.get(1))?, r.get(2))))
            .collect()
    }

    pub fn sample_locations(&mut self, node: &str, n: i64) -> Result<Vec<Location>> {
        let sql = format!(
            "SELECT name, version, node, manifest_digest, {} FROM locations WHERE node = $1
             ORDER BY random() LIMIT $2",
            ms("seen")
        );
        let rows = self.run(|c| Ok(c.query(sql.as_str(), &[&node, &n])?))?;
        rows.iter()
            .map(|r| {
                Ok(Location {
                    name: r.get(0),
                    version: unsigned(r.get(1))?,
                    node: r.get(2),
                    manifest_digest: r.get(3),
                    seen_ms: r.get(4),
                    last_seen_ms: None,
                    up: false,
                    load: None,
                    role: None,
                })
            })
            .collect()
    }

    pub fn heartbeat(&mut self, node: &str, restarted: bool, role: Role) -> Result<()> {
        let role = role.as_str();
        self.run(|c| {
            c.execute(
                "INSERT INTO nodes (prefix, last_seen, started, load, role)
                 VALUES ($1, now(), now(), (SELECT count(*) FROM locations WHERE node = $1), $3)
                 ON CONFLICT (prefix) DO UPDATE SET last_seen = EXCLUDED.last_seen, load = EXCLUDED.load,
                 role = EXCLUDED.role,
                 started = CASE WHEN $2 THEN EXCLUDED.started ELSE nodes.started END",
                &[&node, &restarted, &role],
            )?;
            Ok(())
        })
    }

    pub fn liveness(&mut self, timeout_ms: i64) -> Result<Vec<crate::Liveness>> {
        let sql = format!(
            "SELECT prefix, {}, last_seen > now() - $1::float8 * interval '1 millisecond', role
             FROM nodes ORDER BY prefix",
            ms("started")
        );
        let rows = self.run(|c| Ok(c.query(sql.as_str(), &[&(timeout_ms as f64)])?))?;
        Ok(rows
            .iter()
            .map(|r| crate::Liveness {
                prefix: r.get(0),
                started_ms: r.get(1),
                up: r.get(2),
                role: Role::stored(r.get::<_, Option<&str>>(3)),
            })
            .collect())
    }

    pub fn nodes(&mut self, timeout_ms: i64) -> Result<Vec<NodeStatus>> {
        let sql = format!(
            "SELECT n.prefix, {}, {}, {},
               (SELECT count(*) FROM locations l WHERE l.node = n.prefix), n.role
             FROM nodes n ORDER BY n.prefix",
            ms("n.last_seen"),
            ms("(now() - n.last_seen)"),
            ms("n.started")
        );
        let rows = self.run(|c| Ok(c.query(sql.as_str(), &[])?))?;
        Ok(rows
            .iter()
            .map(|r| {
                let age: i64 = r.get(2);
                let n: i64 = r.get(4);
                NodeStatus {
                    prefix: r.get(0),
                    last_seen_ms: r.get(1),
                    age_ms: age,
                    started_ms: r.get(3),
                    up: age < timeout_ms,
                    locations: n.max(0) as u64,
                    role: Role::stored(r.get::<_, Option<&str>>(5)),
                }
            })
            .collect())
    }

    pub fn replicas(&mut self, prefix: &str, timeout_ms: i64) -> Result<Vec<Replicas>> {
        let (lo, hi) = if prefix == "/" {
            ("/".to_string(), "0".to_string())
        } else {
            renamed_range(prefix)
        };
        let rows = self.run(|c| {
            Ok(c.query(
                "WITH s AS (SELECT l.name, l.version, n.last_seen FROM locations l
                            LEFT JOIN nodes n ON n.prefix = l.node
                            WHERE (l.name = $1 OR (l.name >= $2 AND l.name < $3))
                              AND coalesce(n.role, 'storage') = 'storage'),
                      m AS (SELECT name, max(version) AS v FROM s GROUP BY name)
                 SELECT m.name, m.v,
                   count(*) FILTER (WHERE s.last_seen > now() - $4::float8 * interval '1 millisecond'),
                   count(*)
                 FROM m JOIN s ON s.name = m.name AND s.version = m.v
                 GROUP BY m.name, m.v ORDER BY m.name",
                &[&prefix, &lo, &hi, &(timeout_ms as f64)],
            )?)
        })?;
        rows.iter()
            .map(|r| {
                let up: i64 = r.get(2);
                let total: i64 = r.get(3);
                Ok(Replicas {
                    name: r.get(0),
                    version: unsigned(r.get(1))?,
                    up: up.max(0) as u64,
                    total: total.max(0) as u64,
                })
            })
            .collect()
    }
}

/// Federation-wide settings (see `settings.rs`): their own table, made by the first
/// write (a database without it has no settings). Writers take a lock that only
/// writers of this table wait on, so generations are handed out one at a time.
impl Pg {
    const SETTINGS: &'static str = "CREATE TABLE IF NOT EXISTS federation_settings (key TEXT COLLATE \"C\" PRIMARY KEY, value TEXT, gen BIGINT NOT NULL, changed TIMESTAMPTZ NOT NULL DEFAULT now(), changed_by TEXT NOT NULL)";

    fn has_settings(c: &mut impl postgres::GenericClient) -> Result<bool> {
        Ok(
            c.query_one("SELECT to_regclass('federation_settings') IS NOT NULL", &[])?
                .get(0),
        )
    }

    pub fn settings_rows(&mut self) -> Result<Vec<crate::settings::Row>> {
        let sql = format!(
            "SELECT key, value, gen, {}, changed_by FROM federation_settings ORDER BY key",
            ms("changed")
        );
        self.run(|c| {
            if !Self::has_settings(c)? {
                return Ok(Vec::new());
            }
            Ok(c.query(sql.as_str(), &[])?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
                .collect())
        })
    }

    pub fn settings_gen(&mut self) -> Result<i64> {
        self.run(|c| {
            if !Self::has_settings(c)? {
                return Ok(0);
            }
            Ok(c.query_one(
                "SELECT coalesce(max(gen), 0)::int8 FROM federation_settings",
                &[],
            )?
            .get(0))
        })
    }

    pub fn settings_write(&mut self, rows: &[(String, Option<String>)], by: &str) -> Result<i64> {
        self.run(|c| {
            let mut tx = c.transaction()?;
            if !Self::has_settings(&mut tx)? {
                tx.execute("SELECT pg_advisory_xact_lock(7262738)", &[])?;
                tx.batch_execute(Self::SETTINGS)?;
            }
            tx.batch_execute("LOCK TABLE federation_settings IN SHARE ROW EXCLUSIVE MODE")?;
            let gen: i64 = tx
                .query_one(
                    "SELECT (coalesce(max(gen), 0) + 1)::int8 FROM federation_settings",
                    &[],
                )?
                .get(0);
            for (k, v) in rows {
                tx.execute(
                    "INSERT INTO federation_settings (key, value, gen, changed, changed_by)
                     VALUES ($1, $2, $3, now(), $4) ON CONFLICT (key) DO UPDATE SET
                     value = EXCLUDED.value, gen = EXCLUDED.gen, changed = EXCLUDED.changed,
                     changed_by = EXCLUDED.changed_by",
                    &[k, v, &gen, &by],
                )?;
            }
            tx.commit()?;
            Ok(gen)
        })
    }
}
