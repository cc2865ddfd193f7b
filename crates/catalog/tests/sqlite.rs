//! The query suite on the embedded back end (SQLite).

mod common;

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
    bulk_upsert_in_chunks,
    records_round_trip
);

/// A catalog written before the format number (its `data` column holding whole records)
/// is read as it is, and gets the current format; a newer format is refused.
#[test]
fn earlier_format_is_read_and_newer_refused() {
    let (_d, spec) = dir();
    let recs = common::random_records(20, 3);
    let file = std::path::Path::new(&spec).join("catalog.sqlite");
    {
        let cat = granary_catalog::Catalog::open(&spec).unwrap();
        cat.upsert_many(&recs[..10]).unwrap();
    }
    {
        // What the earlier format wrote: the record as JSON, whole.
        let c = rusqlite::Connection::open(&file).unwrap();
        c.execute_batch("UPDATE catalog_meta SET seq = seq + 1; PRAGMA user_version = 0;")
            .unwrap();
        for r in &recs[10..] {
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
                 SELECT ?1, ?2, seq, ?3, ?4, ?5, ?6, ?7, ?8 FROM catalog_meta",
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
        }
    }
    let cat = granary_catalog::Catalog::open(&spec).unwrap();
    assert_eq!(cat.len().unwrap(), 20);
    for r in &recs {
        assert_eq!(cat.get(&r.name, Some(r.version)).unwrap().as_ref(), Some(r));
    }
    drop(cat);
    let c = rusqlite::Connection::open(&file).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1);
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
