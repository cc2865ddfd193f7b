//! Embedded storage: SQLite (WAL) at `<dir>/catalog.sqlite`, free text in FTS5.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};
use crate::index::IndexRow;
use crate::record::{decode_record, Columns, Prepared, Record};
use crate::store::{moved_name, renamed_range, temp_name, Changes, Chunks, Sink};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS catalog_meta (k INTEGER PRIMARY KEY CHECK (k = 1), epoch INTEGER NOT NULL, seq INTEGER NOT NULL);
INSERT OR IGNORE INTO catalog_meta VALUES (1, 0, 0);
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, version INTEGER NOT NULL,
  seq INTEGER NOT NULL, project TEXT NOT NULL, size INTEGER NOT NULL, time_start TEXT,
  time_end TEXT, facets TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (name, version));
CREATE INDEX IF NOT EXISTS records_seq ON records (seq);
CREATE TABLE IF NOT EXISTS removed (id INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS removed_seq ON removed (seq);
CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5 (body, content='', contentless_delete=1, detail=none, tokenize='ascii');
";

/// The on-disk format (`PRAGMA user_version`). 0: catalogs made before it was set, whose
/// `data` column holds the whole record (still read as they are). 1: `data` holds only
/// what the other columns do not, and FTS5 buffers up to [`FTS_HASH`] bytes of terms
/// before it writes a segment. A newer format is refused, never read as this one.
const FORMAT: i64 = 1;

/// FTS5's pending-terms buffer (its `hashsize`; 1 MiB by default): a bulk write of tens
/// of thousands of records becomes one segment at commit instead of one per MiB, each
/// merged again later.
const FTS_HASH: i64 = 32 << 20;

/// The page cache (KiB when negative): 16 MiB normally, 256 MiB during a bulk upsert
/// (`BULK` records or more) so that its pages are written once, at commit.
const CACHE: &str = "PRAGMA cache_size = -16384;";
const BULK_CACHE: &str = "PRAGMA cache_size = -262144;";
const BULK: usize = 1000;

pub(crate) struct Sqlite {
    conn: Connection,
}

fn bump(tx: &rusqlite::Transaction) -> Result<i64> {
    Ok(tx.query_row(
        "UPDATE catalog_meta SET seq = seq + 1 WHERE k = 1 RETURNING seq",
        [],
        |r| r.get(0),
    )?)
}

fn version(v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| Error::Corrupt(format!("negative version or size {v}")))
}

impl Sqlite {
    pub fn open(dir: &Path) -> Result<Sqlite> {
        std::fs::create_dir_all(dir)?;
        let conn = Connection::open(dir.join("catalog.sqlite"))?;
        conn.busy_timeout(Duration::from_secs(30))?;
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        conn.execute_batch(CACHE)?;
        let mut s = Sqlite { conn };
        let tx = s
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let format: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if format > FORMAT {
            return Err(Error::Corrupt(format!(
                "{} is in catalog format {format}, newer than this Granary's ({FORMAT}): \
                 use a newer Granary, or move it away and run `granary catalog rebuild`",
                dir.join("catalog.sqlite").display()
            )));
        }
        tx.execute_batch(SCHEMA)?;
        if format < FORMAT {
            // Format 0 rows stay as they are: `decode_record` reads both.
            tx.execute_batch(&format!(
                "INSERT INTO records_fts (records_fts, rank) VALUES ('hashsize', {FTS_HASH});
                 PRAGMA user_version = {FORMAT};"
            ))?;
        }
        tx.commit()?;
        Ok(s)
    }

    pub fn head(&mut self) -> Result<(i64, i64)> {
        let mut st = self
            .conn
            .prepare_cached("SELECT epoch, seq FROM catalog_meta WHERE k = 1")?;
        Ok(st.query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    pub fn changes(&mut self, since: i64, epoch: Option<i64>, sink: Sink) -> Result<Changes> {
        let tx = self.conn.transaction()?;
        let head: (i64, i64) =
            tx.query_row("SELECT epoch, seq FROM catalog_meta WHERE k = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        if epoch.is_some_and(|e| e != head.0) {
            return Ok(None);
        }
        {
            // A full load scans the table in id order; `+seq` keeps SQLite off the seq index.
            let mut st = tx.prepare(if since == 0 {
                "SELECT id, name, version, size, time_start, time_end, facets FROM records WHERE +seq > ?1 ORDER BY id"
            } else {
                "SELECT id, name, version, size, time_start, time_end, facets FROM records WHERE seq > ?1"
            })?;
            let mut q = st.query([since])?;
            while let Some(r) = q.next()? {
                sink(IndexRow {
                    rid: r.get(0)?,
                    name: r.get(1)?,
                    version: version(r.get(2)?)?,
                    size: version(r.get(3)?)?,
                    time_start: r.get(4)?,
                    time_end: r.get(5)?,
                    facets: r.get(6)?,
                });
            }
        }
        let removed = if since == 0 {
            Vec::new() // a full load reads only what exists
        } else {
            let mut st = tx.prepare("SELECT id FROM removed WHERE seq > ?1")?;
            let v = st
                .query_map([since], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            v
        };
        tx.commit()?;
        Ok(Some((head, removed)))
    }

    pub fn upsert_chunks(&mut self, next: Chunks) -> Result<()> {
        // A bulk write touches pages all over the name index: give it a larger cache
        // while it runs (the pages are freed again when the cache shrinks back).
        let first = next()?;
        let bulk = first.as_ref().is_some_and(|c| c.len() >= BULK);
        if bulk {
            self.conn.execute_batch(BULK_CACHE)?;
        }
        let mut first = first;
        let mut chunks = || match first.take() {
            Some(c) => Ok(Some(c)),
            None => next(),
        };
        let r = self.upsert_tx(&mut chunks);
        if bulk {
            self.conn.execute_batch(CACHE)?;
        }
        r
    }

    fn upsert_tx(&mut self, next: Chunks) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let seq = bump(&tx)?;
        // Record rows first, then the free text: FTS5 flushes its pending terms at every
        // statement savepoint once it is part of the transaction, so interleaving the two
        // would write the text index once per record. Chunks are written as they come
        // (the next one is being prepared meanwhile) and kept for the text.
        let mut rs: Vec<Prepared> = Vec::new();
        let mut ids = Vec::new();
        let mut existed = std::collections::HashSet::new();
        {
            let mut ins = tx.prepare_cached(
                "INSERT INTO records (name, version, seq, project, size, time_start, time_end, facets, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (name, version) DO NOTHING",
            )?;
            let mut find =
                tx.prepare_cached("SELECT id FROM records WHERE name = ?1 AND version = ?2")?;
            let mut upd = tx.prepare_cached(
                "UPDATE records SET seq = ?2, project = ?3, size = ?4, time_start = ?5, time_end = ?6,
                 facets = ?7, data = ?8 WHERE id = ?1",
            )?;
            let mut fresh_from = i64::MAX;
            while let Some(chunk) = next()? {
                for p in &chunk {
                    let n = ins.execute(params![
                        p.name,
                        p.version,
                        seq,
                        p.project,
                        p.size,
                        p.time_start,
                        p.time_end,
                        p.facets,
                        p.data
                    ])?;
                    let id = if n == 1 {
                        let id = tx.last_insert_rowid();
                        fresh_from = fresh_from.min(id);
                        id
                    } else {
                        let id: i64 = find.query_row(params![p.name, p.version], |r| r.get(0))?;
                        upd.execute(params![
                            id,
                            seq,
                            p.project,
                            p.size,
                            p.time_start,
                            p.time_end,
                            p.facets,
                            p.data
                        ])?;
                        // Its text row exists unless it was inserted by this very call.
                        if id < fresh_from {
                            existed.insert(id);
                        }
                        id
                    };
                    ids.push(id);
                }
                // The text is all that is needed of a record from here on.
                rs.extend(chunk.into_iter().map(|p| Prepared {
                    data: String::new(),
                    ..p
                }));
            }
        }
        {
            let mut fts_del = tx.prepare_cached("DELETE FROM records_fts WHERE rowid = ?1")?;
            let mut fts_ins =
                tx.prepare_cached("INSERT INTO records_fts (rowid, body) VALUES (?1, ?2)")?;
            for id in &existed {
                fts_del.execute([id])?;
            }
            // The last body written for an id wins.
            let mut last = std::collections::HashMap::with_capacity(ids.len());
            for (k, id) in ids.iter().enumerate() {
                last.insert(*id, k);
            }
            let mut order: Vec<(i64, usize)> = last.into_iter().collect();
            order.sort_unstable();
            for (id, k) in order {
                fts_ins.execute(params![id, rs[k].body])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub fn remove(&mut self, name: &str, version: Option<i64>) -> Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let ids: Vec<i64> = {
            let mut st = tx.prepare(
                "SELECT id FROM records WHERE name = ?1 AND (?2 IS NULL OR version = ?2)",
            )?;
            let v = st
                .query_map(params![name, version], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            v
        };
        if ids.is_empty() {
            return Ok(0);
        }
        let seq = bump(&tx)?;
        for id in &ids {
            tx.execute("DELETE FROM records WHERE id = ?1", [id])?;
            tx.execute("DELETE FROM records_fts WHERE rowid = ?1", [id])?;
            tx.execute("INSERT INTO removed (id, seq) VALUES (?1, ?2)", [id, &seq])?;
        }
        tx.commit()?;
        Ok(ids.len())
    }

    pub fn rename(&mut self, old: &str, new: &str) -> Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (lo, hi) = renamed_range(old);
        let rows: Vec<(i64, String, i64)> = {
            let mut st = tx.prepare(
                "SELECT id, name, version FROM records WHERE name = ?1 OR (name >= ?2 AND name < ?3)",
            )?;
            let v = st
                .query_map(params![old, lo, hi], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
            v
        };
        if rows.is_empty() {
            return Ok(0);
        }
        let seq = bump(&tx)?;
        for (id, _, _) in &rows {
            tx.execute(
                "UPDATE records SET name = ?2 WHERE id = ?1",
                params![id, temp_name(*id)],
            )?;
        }
        for (id, name, v) in &rows {
            let to = moved_name(old, new, name)?;
            let taken: Option<i64> = tx
                .query_row(
                    "SELECT id FROM records WHERE name = ?1 AND version = ?2",
                    params![to, v],
                    |r| r.get(0),
                )
                .optional()?;
            if taken.is_some() {
                return Err(Error::Conflict(format!("{to} version {v} exists already")));
            }
            tx.execute(
                "UPDATE records SET name = ?2, seq = ?3 WHERE id = ?1",
                params![id, to, seq],
            )?;
        }
        tx.commit()?;
        Ok(rows.len())
    }

    pub fn fetch(&mut self, rids: &[i64]) -> Result<Vec<Record>> {
        let mut st = self.conn.prepare_cached(
            "SELECT name, version, project, size, time_start, time_end, facets, data FROM records WHERE id = ?1",
        )?;
        let mut out = Vec::with_capacity(rids.len());
        for id in rids {
            let row = st
                .query_row([id], |r| {
                    Ok(Columns {
                        name: r.get(0)?,
                        version: r.get(1)?,
                        project: r.get(2)?,
                        size: r.get(3)?,
                        time_start: r.get(4)?,
                        time_end: r.get(5)?,
                        facets: r.get(6)?,
                        data: r.get(7)?,
                    })
                })
                .optional()?;
            if let Some(c) = row {
                out.push(decode_record(c)?);
            }
        }
        Ok(out)
    }

    pub fn text(&mut self, words: &[String], after: i64) -> Result<Vec<i64>> {
        let mut st = self.conn.prepare_cached(
            "SELECT rowid FROM records_fts WHERE records_fts MATCH ?1 AND rowid > ?2",
        )?;
        let m = crate::text::fts5_match(words);
        let mut q = st.query(params![m, after])?;
        let mut v = Vec::new();
        while let Some(r) = q.next()? {
            v.push(r.get::<_, i64>(0)?);
        }
        Ok(v)
    }

    pub fn clear(&mut self) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(
            "DELETE FROM records; DELETE FROM removed;
             INSERT INTO records_fts (records_fts) VALUES ('delete-all');
             UPDATE catalog_meta SET epoch = epoch + 1, seq = seq + 1 WHERE k = 1;",
        )?;
        tx.commit()?;
        Ok(())
    }
}
