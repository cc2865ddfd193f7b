//! The query suite on the embedded back end (SQLite).

use crate::common;

use granary_catalog::{Query, Record};

fn dir() -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let s = d.path().join("cat").display().to_string();
    (d, s)
}

macro_rules! on_sqlite {
    ($($t:ident),*) => {$(
        #[test]
        fn $t() {
            let (_d, spec) = dir();
            common::$t(&spec);
        }
    )*};
}

on_sqlite!(
    facet_counts_match_brute_force,
    latest_only_and_versions,
    time_overlap_and_exclusions,
    autocomplete,
    second_handle_sees_writes,
    rename_conflicts_and_nesting,
    hostile_strings,
    word_cache_follows_changes,
    dataset_latest_and_name_children,
    datasets_follow_changes,
    bulk_upsert_in_chunks,
    records_round_trip
);

/// A catalog of format 0 (made before the format number: `data` holding whole records,
/// a UNIQUE `(name, version)` index, no name key) is moved to the current format when
/// opened: every record reads back as written, text search and renames work, record ids
/// are not reused; a newer format is refused.
#[test]
fn earlier_format_is_migrated_and_newer_refused() {
    let (_d, spec) = dir();
    let recs = common::random_records(40, 3);
    std::fs::create_dir_all(&spec).unwrap();
    let file = std::path::Path::new(&spec).join("catalog.sqlite");
    {
        // The format-0 schema and rows, as the earlier code wrote them.
        let c = rusqlite::Connection::open(&file).unwrap();
        c.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE catalog_meta (k INTEGER PRIMARY KEY CHECK (k = 1), epoch INTEGER NOT NULL, seq INTEGER NOT NULL);
             INSERT INTO catalog_meta VALUES (1, 0, 1);
             CREATE TABLE records (
               id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, version INTEGER NOT NULL,
               seq INTEGER NOT NULL, project TEXT NOT NULL, size INTEGER NOT NULL, time_start TEXT,
               time_end TEXT, facets TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (name, version));
             CREATE INDEX records_seq ON records (seq);
             CREATE TABLE removed (id INTEGER NOT NULL, seq INTEGER NOT NULL);
             CREATE INDEX removed_seq ON removed (seq);
             CREATE VIRTUAL TABLE records_fts USING fts5 (body, content='', contentless_delete=1, detail=none, tokenize='ascii');",
        )
        .unwrap();
        for r in recs.iter().chain([&Record {
            name: "/gone".into(),
            ..recs[0].clone()
        }]) {
            let mut facets: Vec<String> = r
                .facets
                .iter()
                .map(|(k, v)| format!("{k}\x1f{v}"))
                .collect();
            if !r.project.is_empty() && !r.facets.contains_key("project") {
                facets.push(format!("project\x1f{}", r.project));
            }
            c.execute(
                "INSERT INTO records (name, version, seq, project, size, time_start, time_end, facets, data)
                 VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6, ?7, ?8)",
                rusqlite::params![
                    r.name,
                    r.version as i64,
                    r.project,
                    r.size as i64,
                    r.time_start,
                    r.time_end,
                    facets.join("\x1e"),
                    serde_json::to_string(r).unwrap()
                ],
            )
            .unwrap();
            let body = granary_catalog::text::body(
                [r.title.as_str(), r.project.as_str(), r.text.as_str()]
                    .into_iter()
                    .chain(r.facets.values().map(String::as_str)),
            );
            c.execute(
                "INSERT INTO records_fts (rowid, body) VALUES (?1, ?2)",
                rusqlite::params![c.last_insert_rowid(), body],
            )
            .unwrap();
        }
        // The highest id removed: the counter stays above every id left.
        c.execute_batch(
            "DELETE FROM records WHERE name = '/gone'; INSERT INTO removed VALUES (41, 1);",
        )
        .unwrap();
    }
    let cat = granary_catalog::Catalog::open(&spec).unwrap();
    assert_eq!(cat.len().unwrap(), 40);
    for r in &recs {
        assert_eq!(cat.get(&r.name, Some(r.version)).unwrap().as_ref(), Some(r));
    }
    let word = recs[0].text.split(' ').next().unwrap().to_string();
    let q = Query {
        text: Some(word.clone()),
        latest_only: false,
        limit: 100,
        ..Query::default()
    };
    let want = recs
        .iter()
        .filter(|r| r.text.split(' ').any(|w| w == word))
        .count();
    assert_eq!(cat.query(&q).unwrap().total, want as u64);
    let first = recs[0].name.clone();
    assert!(cat.rename(&first, "/renamed").unwrap() >= 1);
    assert!(cat.get(&first, None).unwrap().is_none());
    cat.upsert(&Record {
        name: "/new".into(),
        ..recs[1].clone()
    })
    .unwrap();
    drop(cat);
    let c = rusqlite::Connection::open(&file).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1);
    let id: i64 = c
        .query_row("SELECT id FROM records WHERE name = '/new'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(id, 42, "a record id was reused");
    c.execute_batch("PRAGMA user_version = 2;").unwrap();
    drop(c);
    let e = granary_catalog::Catalog::open(&spec)
        .err()
        .expect("a newer format opened");
    assert!(e.to_string().contains("newer"), "{e}");
}

#[test]
fn writes_from_another_process_are_seen() {
    // A second connection is what another process has; WAL lets both write.
    let (_d, spec) = dir();
    let a = granary_catalog::Catalog::open(&spec).unwrap();
    let recs = common::random_records(50, 1);
    std::thread::scope(|s| {
        for chunk in recs.chunks(10) {
            let spec = spec.clone();
            s.spawn(move || {
                let b = granary_catalog::Catalog::open(&spec).unwrap();
                for r in chunk {
                    b.upsert(r).unwrap();
                }
            });
        }
    });
    assert_eq!(a.len().unwrap(), 50);
    assert!(std::path::Path::new(&spec).join("catalog.sqlite").exists());
}
