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
    bulk_upsert_in_chunks
);

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
