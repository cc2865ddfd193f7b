//! Embedded storage: SQLite (WAL) at `<dir>/catalog.sqlite`, free text in FTS5.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{Error, Result};
use crate::feed::{Changes, Chunks, IndexRow, Sink};
use crate::location::{Loc, Location, NodeStatus, Replicas};
use crate::record::{decode_record, Columns, Prepared, Record};
use crate::rename::moved_name;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS catalog_meta (k INTEGER PRIMARY KEY CHECK (k = 1), epoch INTEGER NOT NULL, seq INTEGER NOT NULL);
INSERT OR IGNORE INTO catalog_meta VALUES (1, 0, 0);
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, version INTEGER NOT NULL,
  seq INTEGER NOT NULL, project TEXT NOT NULL, size INTEGER NOT NULL, time_start TEXT,
  time_end TEXT, facets TEXT NOT NULL, data TEXT NOT NULL, name_key INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS records_key ON records (name_key, version);
CREATE INDEX IF NOT EXISTS records_seq ON records (seq);
CREATE TABLE IF NOT EXISTS removed (id INTEGER NOT NULL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS removed_seq ON removed (seq);
CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5 (body, content='', contentless_delete=1, detail=none, tokenize='ascii');
CREATE TABLE IF NOT EXISTS locations (name TEXT NOT NULL, version INTEGER NOT NULL, node TEXT NOT NULL,
  manifest_digest TEXT, seen INTEGER NOT NULL, PRIMARY KEY (name, version, node)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS locations_node ON locations (node);
CREATE TABLE IF NOT EXISTS nodes (prefix TEXT PRIMARY KEY, last_seen INTEGER NOT NULL, started INTEGER NOT NULL, load INTEGER, role TEXT);
";

/// The database's clock in milliseconds since the Unix epoch (SQL expression).
const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// The on-disk format (`PRAGMA user_version`). 0: catalogs made before it was set: `data`
/// holds the whole record, `(name, version)` is a UNIQUE index. 1: `data` holds only
/// what the other columns do not (format-0 rows are read as they are), names are found
/// through [`name_key`] (an integer index on `(name_key, version)`, the name compared
/// after it), and FTS5 buffers up to [`FTS_HASH`] bytes of terms before it writes a
/// segment. Opening a format-0 catalog moves it to 1 (the table is copied once, ids
/// kept). A newer format is refused, never read as this one.
const FORMAT: i64 = 1;

/// The key a name is found by: 64-bit FNV-1a of its bytes. Stored in the catalog, so it
/// must never change. Collisions are harmless (the name is compared after the key);
/// the key only spares the index long, shared-prefix names.
pub(crate) fn name_key(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// Moves a format-0 `records` table to format 1: a copy with `name_key` and without the
/// `(name, version)` UNIQUE index, ids kept, and the AUTOINCREMENT counter kept (ids are
/// never reused). Runs inside the caller's transaction.
fn migrate_from_0(tx: &rusqlite::Transaction) -> Result<()> {
    let has_key: bool = tx.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('records') WHERE name = 'name_key'",
        [],
        |r| r.get(0),
    )?;
    if has_key {
        return Ok(());
    }
    let counter: Option<i64> = tx
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'records'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    tx.execute_batch(
        "CREATE TABLE records_v1 (
           id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, version INTEGER NOT NULL,
           seq INTEGER NOT NULL, project TEXT NOT NULL, size INTEGER NOT NULL, time_start TEXT,
           time_end TEXT, facets TEXT NOT NULL, data TEXT NOT NULL, name_key INTEGER NOT NULL);",
    )?;
    {
        let mut read = tx.prepare("SELECT id, name FROM records ORDER BY id")?;
        let mut copy = tx.prepare(
            "INSERT INTO records_v1 SELECT id, name, version, seq, project, size, time_start,
             time_end, facets, data, ?2 FROM records WHERE id = ?1",
        )?;
        let mut rows = read.query([])?;
        while let Some(r) = rows.next()? {
            let (id, name): (i64, String) = (r.get(0)?, r.get(1)?);
            copy.execute(params![id, name_key(&name)])?;
        }
    }
    tx.execute_batch("DROP TABLE records; ALTER TABLE records_v1 RENAME TO records;")?;
    if let Some(c) = counter {
        tx.execute(
            "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'records'",
            [c],
        )?;
        tx.execute(
            "INSERT INTO sqlite_sequence (name, seq) SELECT 'records', ?1
             WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'records')",
            [c],
        )?;
    }
    Ok(())
}

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

/// A location from a row `(name, version, node, manifest_digest, seen, last_seen, up,
/// load, role)`: the inner error is a version out of range (the row itself read fine).
fn location_row(r: &rusqlite::Row) -> rusqlite::Result<Result<Location>> {
    let v: i64 = r.get(1)?;
    let load: Option<i64> = r.get(7)?;
    let l = Location {
        name: r.get(0)?,
        version: 0,
        node: r.get(2)?,
        manifest_digest: r.get(3)?,
        seen_ms: r.get(4)?,
        last_seen_ms: r.get(5)?,
        up: r.get(6)?,
        load: load.map(|n| n.max(0) as u64),
        role: r
            .get::<_, Option<String>>(8)?
            .map(|s| crate::location::Role::stored(Some(&s))),
    };
    Ok(version(v).map(|version| Location { version, ..l }))
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
        let existed: bool = tx.query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE name = 'records'",
            [],
            |r| r.get(0),
        )?;
        if existed && format < 1 {
            migrate_from_0(&tx)?;
        }
        tx.execute_batch(SCHEMA)?;
        // `nodes.load` came after the table did.
        let has_load: bool = tx.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info('nodes') WHERE name = 'load'",
            [],
            |r| r.get(0),
        )?;
        if !has_load {
            tx.execute_batch("ALTER TABLE nodes ADD COLUMN load INTEGER")?;
        }
        // So did `nodes.role` (NULL: a node from before roles, read as storage).
        let has_role: bool = tx.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info('nodes') WHERE name = 'role'",
            [],
            |r| r.get(0),
        )?;
        if !has_role {
            tx.execute_batch("ALTER TABLE nodes ADD COLUMN role TEXT")?;
        }
        if format < FORMAT {
            // Format 0 rows keep their `data`: `decode_record` reads both.
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
                    words: None,
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
                "INSERT INTO records (name, version, seq, project, size, time_start, time_end, facets, data, name_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?;
            let mut find = tx.prepare_cached(
                "SELECT id FROM records WHERE name_key = ?1 AND version = ?2 AND name = ?3",
            )?;
            let mut upd = tx.prepare_cached(
                "UPDATE records SET seq = ?2, project = ?3, size = ?4, time_start = ?5, time_end = ?6,
                 facets = ?7, data = ?8 WHERE id = ?1",
            )?;
            let mut fresh_from = i64::MAX;
            while let Some(chunk) = next()? {
                for p in &chunk {
                    let key = name_key(&p.cols.name);
                    let found: Option<i64> = find
                        .query_row(params![key, p.cols.version, p.cols.name], |r| r.get(0))
                        .optional()?;
                    let id = if let Some(id) = found {
                        upd.execute(params![
                            id,
                            seq,
                            p.cols.project,
                            p.cols.size,
                            p.cols.time_start,
                            p.cols.time_end,
                            p.cols.facets,
                            p.cols.data
                        ])?;
                        // Its text row exists unless it was inserted by this very call.
                        if id < fresh_from {
                            existed.insert(id);
                        }
                        id
                    } else {
                        ins.execute(params![
                            p.cols.name,
                            p.cols.version,
                            seq,
                            p.cols.project,
                            p.cols.size,
                            p.cols.time_start,
                            p.cols.time_end,
                            p.cols.facets,
                            p.cols.data,
                            key
                        ])?;
                        let id = tx.last_insert_rowid();
                        fresh_from = fresh_from.min(id);
                        id
                    };
                    ids.push(id);
                }
                // The text is all that is needed of a record from here on.
                {
                    let mut loc = tx.prepare_cached(&format!(
                        "INSERT INTO locations (name, version, node, manifest_digest, seen)
                         VALUES (?1, ?2, ?3, ?4, {NOW_MS}) ON CONFLICT (name, version, node)
                         DO UPDATE SET manifest_digest = excluded.manifest_digest, seen = excluded.seen"
                    ))?;
                    for p in &chunk {
                        if let Some((node, digest)) = &p.loc {
                            loc.execute(params![p.cols.name, p.cols.version, node, digest])?;
                        }
                    }
                }
                rs.extend(chunk.into_iter().map(|p| Prepared {
                    cols: Columns {
                        data: String::new(),
                        ..p.cols
                    },
                    body: p.body,
                    loc: None,
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
                "SELECT id FROM records WHERE name_key = ?3 AND name = ?1 AND (?2 IS NULL OR version = ?2)",
            )?;
            let v = st
                .query_map(params![name, version, name_key(name)], |r| r.get(0))?
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
        tx.execute(
            "DELETE FROM locations WHERE name = ?1 AND (?2 IS NULL OR version = ?2)",
            params![name, version],
        )?;
        tx.commit()?;
        Ok(ids.len())
    }

    /// Renames the records `ids` (`old` and the names under it, as the index found them
    /// at `seen`); `None` when the catalog is no longer at `seen` (the caller syncs and
    /// asks again): SQLite keeps no name order of its own.
    pub fn rename(
        &mut self,
        old: &str,
        new: &str,
        seen: (i64, i64),
        ids: &[i64],
    ) -> Result<Option<usize>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let head: (i64, i64) =
            tx.query_row("SELECT epoch, seq FROM catalog_meta WHERE k = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        if head != seen {
            return Ok(None);
        }
        let mut rows: Vec<(i64, String, i64)> = Vec::with_capacity(ids.len());
        {
            let mut st = tx.prepare_cached("SELECT name, version FROM records WHERE id = ?1")?;
            for &id in ids {
                let (name, v): (String, i64) =
                    st.query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.push((id, name, v));
            }
        }
        if rows.is_empty() {
            return Ok(Some(0));
        }
        let seq = bump(&tx)?;
        let moving: std::collections::HashSet<i64> = ids.iter().copied().collect();
        let mut moves = Vec::with_capacity(rows.len());
        {
            let mut taken = tx.prepare_cached(
                "SELECT id FROM records WHERE name_key = ?1 AND version = ?2 AND name = ?3",
            )?;
            for (id, name, v) in &rows {
                let to = moved_name(old, new, name)?;
                let key = name_key(&to);
                // A target held by a record that moves away too is free after the move.
                let mut q = taken.query(params![key, v, to])?;
                while let Some(r) = q.next()? {
                    if !moving.contains(&r.get::<_, i64>(0)?) {
                        return Err(Error::Conflict(format!("{to} version {v} exists already")));
                    }
                }
                moves.push((*id, to, key));
            }
        }
        for (id, to, key) in &moves {
            tx.execute(
                "UPDATE records SET name = ?2, name_key = ?3, seq = ?4 WHERE id = ?1",
                params![id, to, key, seq],
            )?;
        }
        // Their locations move with them (the caller renames this way only names no
        // other node holds).
        for ((_, name, v), (_, to, _)) in rows.iter().zip(&moves) {
            tx.execute(
                "UPDATE OR REPLACE locations SET name = ?3 WHERE name = ?1 AND version = ?2",
                params![name, v, to],
            )?;
        }
        tx.commit()?;
        Ok(Some(rows.len()))
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
            "DELETE FROM records; DELETE FROM removed; DELETE FROM locations;
             INSERT INTO records_fts (records_fts) VALUES ('delete-all');
             UPDATE catalog_meta SET epoch = epoch + 1, seq = seq + 1 WHERE k = 1;",
        )?;
        tx.commit()?;
        Ok(())
    }
}

/// The chunk index of a record's file (virtual Zarr): its own table, created when first
/// used, so catalogs made before it keep working and the records table is untouched.
impl Sqlite {
    const CHUNK_REFS: &'static str = "CREATE TABLE IF NOT EXISTS chunk_refs (name TEXT NOT NULL, version INTEGER NOT NULL, refs TEXT NOT NULL, PRIMARY KEY (name, version))";

    pub fn put_chunk_refs(&mut self, name: &str, version: i64, refs: &str) -> Result<()> {
        self.conn.execute_batch(Self::CHUNK_REFS)?;
        self.conn.execute(
            "INSERT OR REPLACE INTO chunk_refs (name, version, refs) VALUES (?1, ?2, ?3)",
            params![name, version, refs],
        )?;
        Ok(())
    }

    pub fn chunk_refs(&mut self, name: &str, version: i64) -> Result<Option<String>> {
        self.conn.execute_batch(Self::CHUNK_REFS)?;
        Ok(self
            .conn
            .query_row(
                "SELECT refs FROM chunk_refs WHERE name = ?1 AND version = ?2",
                params![name, version],
                |r| r.get(0),
            )
            .optional()?)
    }
}

/// The location catalog (see `location.rs`): rows of their own, written without the
/// records' change sequence unless a record goes with its last location.
impl Sqlite {
    pub fn register_locations(&mut self, locs: &[Loc]) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut st = tx.prepare_cached(&format!(
                "INSERT INTO locations (name, version, node, manifest_digest, seen)
                 VALUES (?1, ?2, ?3, ?4, {NOW_MS}) ON CONFLICT (name, version, node)
                 DO UPDATE SET manifest_digest = excluded.manifest_digest, seen = excluded.seen"
            ))?;
            for l in locs {
                st.execute(params![l.name, l.version, l.node, l.digest])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Removes `node`'s locations of `name` (one version or all), then the records of
    /// `name` left with no location. Returns the locations removed.
    pub fn remove_located(
        &mut self,
        node: &str,
        name: &str,
        version: Option<i64>,
    ) -> Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let n = tx.execute(
            "DELETE FROM locations WHERE node = ?1 AND name = ?2 AND (?3 IS NULL OR version = ?3)",
            params![node, name, version],
        )?;
        let ids: Vec<i64> = {
            let mut st = tx.prepare(
                "SELECT id FROM records r WHERE name_key = ?3 AND name = ?1 AND (?2 IS NULL OR version = ?2)
                 AND NOT EXISTS (SELECT 1 FROM locations l WHERE l.name = r.name AND l.version = r.version)",
            )?;
            let v = st
                .query_map(params![name, version, name_key(name)], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            v
        };
        Self::drop_records(&tx, &ids)?;
        tx.commit()?;
        Ok(n)
    }

    fn drop_records(tx: &rusqlite::Transaction, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let seq = bump(tx)?;
        for id in ids {
            tx.execute("DELETE FROM records WHERE id = ?1", [id])?;
            tx.execute("DELETE FROM records_fts WHERE rowid = ?1", [id])?;
            tx.execute("INSERT INTO removed (id, seq) VALUES (?1, ?2)", [id, &seq])?;
        }
        Ok(())
    }

    /// Removes every location of `node`, then every record left with no location.
    /// Returns the locations removed.
    pub fn clear_node(&mut self, node: &str) -> Result<usize> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let n = tx.execute("DELETE FROM locations WHERE node = ?1", [node])?;
        let ids: Vec<i64> = {
            let mut st = tx.prepare(
                "SELECT id FROM records r WHERE NOT EXISTS
                 (SELECT 1 FROM locations l WHERE l.name = r.name AND l.version = r.version)",
            )?;
            let v = st
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            v
        };
        Self::drop_records(&tx, &ids)?;
        tx.commit()?;
        Ok(n)
    }

    /// Every location of `name` (all versions), with the holders' liveness and load.
    pub fn locations_of(&mut self, name: &str, timeout_ms: i64) -> Result<Vec<Location>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT l.name, l.version, l.node, l.manifest_digest, l.seen, n.last_seen,
               coalesce(n.last_seen > {NOW_MS} - ?2, 0), n.load,
               CASE WHEN n.prefix IS NULL THEN NULL ELSE coalesce(n.role, 'storage') END
             FROM locations l LEFT JOIN nodes n ON n.prefix = l.node
             WHERE l.name = ?1 ORDER BY l.version DESC, l.node"
        ))?;
        let v = st
            .query_map(params![name, timeout_ms], location_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        v.into_iter().collect()
    }

    /// `node`'s locations: (name, version, manifest digest), sorted.
    pub fn node_locations(&mut self, node: &str) -> Result<Vec<(String, u64, Option<String>)>> {
        let mut st = self.conn.prepare_cached(
            "SELECT name, version, manifest_digest FROM locations WHERE node = ?1 ORDER BY name, version",
        )?;
        let v = st
            .query_map([node], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<Vec<(String, i64, Option<String>)>>>()?;
        v.into_iter()
            .map(|(n, v, d)| Ok((n, version(v)?, d)))
            .collect()
    }

    /// Up to `n` of `node`'s locations, chosen at random (liveness and load not read).
    pub fn sample_locations(&mut self, node: &str, n: i64) -> Result<Vec<Location>> {
        let mut st = self.conn.prepare_cached(
            "SELECT name, version, node, manifest_digest, seen, NULL, 0, NULL, NULL FROM locations
             WHERE node = ?1 ORDER BY random() LIMIT ?2",
        )?;
        let v = st
            .query_map(params![node, n], location_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        v.into_iter().collect()
    }

    /// Records that `node` is alive now (its `started` is kept unless `restarted`).
    pub fn heartbeat(
        &mut self,
        node: &str,
        restarted: bool,
        role: crate::location::Role,
    ) -> Result<()> {
        self.conn.execute(
            &format!(
                "INSERT INTO nodes (prefix, last_seen, started, load, role)
                 VALUES (?1, {NOW_MS}, {NOW_MS}, (SELECT count(*) FROM locations WHERE node = ?1), ?3)
                 ON CONFLICT (prefix) DO UPDATE SET last_seen = excluded.last_seen, load = excluded.load,
                 role = excluded.role,
                 started = CASE WHEN ?2 THEN excluded.started ELSE started END"
            ),
            params![node, restarted, role.as_str()],
        )?;
        Ok(())
    }

    /// Every node's liveness and role (no location count).
    pub fn liveness(&mut self, timeout_ms: i64) -> Result<Vec<crate::Liveness>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT prefix, started, last_seen > {NOW_MS} - ?1, role FROM nodes ORDER BY prefix"
        ))?;
        let v = st
            .query_map([timeout_ms], |r| {
                Ok(crate::Liveness {
                    prefix: r.get(0)?,
                    started_ms: r.get(1)?,
                    up: r.get(2)?,
                    role: crate::location::Role::stored(r.get::<_, Option<String>>(3)?.as_deref()),
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(v)
    }

    /// Every node that ever sent a heartbeat, with its liveness and location count.
    pub fn nodes(&mut self, timeout_ms: i64) -> Result<Vec<NodeStatus>> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT n.prefix, n.last_seen, {NOW_MS} - n.last_seen, n.started,
               (SELECT count(*) FROM locations l WHERE l.node = n.prefix), n.role
             FROM nodes n ORDER BY n.prefix"
        ))?;
        let v = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(v.into_iter()
            .map(|(prefix, last, age, started, n, role)| NodeStatus {
                prefix,
                last_seen_ms: last,
                age_ms: age,
                started_ms: started,
                up: age < timeout_ms,
                locations: n.max(0) as u64,
                role: crate::location::Role::stored(role.as_deref()),
            })
            .collect())
    }

    /// For each name equal to or under `prefix` (every name for `/`): its highest
    /// registered version and how many nodes (up, all) hold that version.
    pub fn replicas(&mut self, prefix: &str, timeout_ms: i64) -> Result<Vec<Replicas>> {
        let (lo, hi) = if prefix == "/" {
            ("/".to_string(), "0".to_string())
        } else {
            crate::rename::renamed_range(prefix)
        };
        let mut st = self.conn.prepare_cached(&format!(
            "WITH s AS (SELECT l.name, l.version, n.last_seen FROM locations l
                        LEFT JOIN nodes n ON n.prefix = l.node
                        WHERE (l.name = ?1 OR (l.name >= ?2 AND l.name < ?3))
                          AND coalesce(n.role, 'storage') = 'storage'),
                  m AS (SELECT name, max(version) AS v FROM s GROUP BY name)
             SELECT m.name, m.v, coalesce(sum(s.last_seen > {NOW_MS} - ?4), 0), count(*)
             FROM m JOIN s ON s.name = m.name AND s.version = m.v
             GROUP BY m.name, m.v ORDER BY m.name"
        ))?;
        let v = st
            .query_map(params![prefix, lo, hi, timeout_ms], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        v.into_iter()
            .map(|(name, v, up, total)| {
                Ok(Replicas {
                    name,
                    version: version(v)?,
                    up: up.max(0) as u64,
                    total: total.max(0) as u64,
                })
            })
            .collect()
    }
}

/// Federation-wide settings (see `settings.rs`): their own table, made by the first
/// write (a catalog without it has no settings).
impl Sqlite {
    const SETTINGS: &'static str = "CREATE TABLE IF NOT EXISTS federation_settings (key TEXT PRIMARY KEY, value TEXT, gen INTEGER NOT NULL, changed INTEGER NOT NULL, changed_by TEXT NOT NULL)";

    fn has_settings(&mut self) -> Result<bool> {
        Ok(self.conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_schema WHERE name = 'federation_settings'",
            [],
            |r| r.get(0),
        )?)
    }

    pub fn settings_rows(&mut self) -> Result<Vec<crate::settings::Row>> {
        if !self.has_settings()? {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare_cached(
            "SELECT key, value, gen, changed, changed_by FROM federation_settings ORDER BY key",
        )?;
        let rows = st.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    pub fn settings_gen(&mut self) -> Result<i64> {
        if !self.has_settings()? {
            return Ok(0);
        }
        Ok(self.conn.query_row(
            "SELECT coalesce(max(gen), 0) FROM federation_settings",
            [],
            |r| r.get(0),
        )?)
    }

    pub fn settings_write(&mut self, rows: &[(String, Option<String>)], by: &str) -> Result<i64> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(Self::SETTINGS)?;
        let gen: i64 = tx.query_row(
            "SELECT coalesce(max(gen), 0) + 1 FROM federation_settings",
            [],
            |r| r.get(0),
        )?;
        {
            let mut st = tx.prepare_cached(&format!(
                "INSERT INTO federation_settings (key, value, gen, changed, changed_by)
                 VALUES (?1, ?2, ?3, {NOW_MS}, ?4) ON CONFLICT (key) DO UPDATE SET
                 value = excluded.value, gen = excluded.gen, changed = excluded.changed,
                 changed_by = excluded.changed_by"
            ))?;
            for (k, v) in rows {
                st.execute(params![k, v, gen, by])?;
            }
        }
        tx.commit()?;
        Ok(gen)
    }
}
