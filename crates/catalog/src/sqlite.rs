//! Embedded storage: SQLite (WAL) at `<dir>/catalog.sqlite`, free text in FTS5.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};
use crate::index::IndexRow;
use crate::record::{decode_record, Prepared, Record};
use crate::store::{moved_name, renamed_range, temp_name, Changes};

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
CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5 (body, content='', contentless_delete=1, tokenize='ascii');
";

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
        let mut s = Sqlite { conn };
        let tx = s
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(SCHEMA)?;
        tx.commit()?;
        Ok(s)
    }

    pub fn head(&mut self) -> Result<(i64, i64)> {
        let mut st = self
            .conn
            .prepare_cached("SELECT epoch, seq FROM catalog_meta WHERE k = 1")?;
        Ok(st.query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    pub fn changes(&mut self, since: i64) -> Result<Changes> {
        let tx = self.conn.transaction()?;
        let head: (i64, i64) =
            tx.query_row("SELECT epoch, seq FROM catalog_meta WHERE k = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let mut rows = Vec::new();
        {
            // A full load scans the table; `+seq` keeps SQLite off the seq index then.
            let mut st = tx.prepare(if since == 0 {
                "SELECT id, name, version, size, time_start, time_end, facets FROM records WHERE +seq > ?1"
            } else {
                "SELECT id, name, version, size, time_start, time_end, facets FROM records WHERE seq > ?1"
            })?;
            let mut q = st.query([since])?;
            while let Some(r) = q.next()? {
                rows.push(IndexRow {
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
        let removed = {
            let mut st = tx.prepare("SELECT id FROM removed WHERE seq > ?1")?;
            let v = st
                .query_map([since], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            v
        };
        tx.commit()?;
        Ok(Changes {
            head,
            rows,
            removed,
        })
    }

    pub fn upsert_many(&mut self, rs: &[Prepared]) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let seq = bump(&tx)?;
        {
            let mut find =
                tx.prepare_cached("SELECT id FROM records WHERE name = ?1 AND version = ?2")?;
            let mut ins = tx.prepare_cached(
                "INSERT INTO records (name, version, seq, project, size, time_start, time_end, facets, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id",
            )?;
            let mut upd = tx.prepare_cached(
                "UPDATE records SET seq = ?2, project = ?3, size = ?4, time_start = ?5, time_end = ?6,
                 facets = ?7, data = ?8 WHERE id = ?1",
            )?;
            let mut fts_del = tx.prepare_cached("DELETE FROM records_fts WHERE rowid = ?1")?;
            let mut fts_ins =
                tx.prepare_cached("INSERT INTO records_fts (rowid, body) VALUES (?1, ?2)")?;
            for p in rs {
                let old: Option<i64> = find
                    .query_row(params![p.name, p.version], |r| r.get(0))
                    .optional()?;
                let id = match old {
                    Some(id) => {
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
                        fts_del.execute([id])?;
                        id
                    }
                    None => ins.query_row(
                        params![
                            p.name,
                            p.version,
                            seq,
                            p.project,
                            p.size,
                            p.time_start,
                            p.time_end,
                            p.facets,
                            p.data
                        ],
                        |r| r.get(0),
                    )?,
                };
                fts_ins.execute(params![id, p.body])?;
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
        let mut st = self
            .conn
            .prepare_cached("SELECT name, version, data FROM records WHERE id = ?1")?;
        let mut out = Vec::with_capacity(rids.len());
        for id in rids {
            let row: Option<(String, i64, String)> = st
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            if let Some((n, v, d)) = row {
                out.push(decode_record(n, v, &d)?);
            }
        }
        Ok(out)
    }

    pub fn text(&mut self, words: &[String]) -> Result<Vec<i64>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT rowid FROM records_fts WHERE records_fts MATCH ?1")?;
        let m = crate::text::fts5_match(words);
        let v = st
            .query_map([m], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
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
