//! The chunk-index table: stored, replaced, read back after reopening; absent keys are
//! `None`; an existing catalog without the table opens and gains it on first use.

use granary_catalog::Catalog;

#[test]
fn chunk_refs_round_trip_and_survive_reopening() {
    let t = tempfile::tempdir().expect("tempdir");
    let spec = t.path().to_str().expect("utf-8");
    {
        let c = Catalog::open(spec).expect("open");
        assert_eq!(c.chunk_refs("/a/b", 1).expect("read"), None);
        c.put_chunk_refs("/a/b", 1, r#"{"x":1}"#).expect("put");
        c.put_chunk_refs("/a/b", 1, r#"{"x":2}"#).expect("replace");
        c.put_chunk_refs("/a/b", 2, r#"{"x":3}"#).expect("put");
    }
    let c = Catalog::open(spec).expect("reopen");
    assert_eq!(
        c.chunk_refs("/a/b", 1).expect("read").as_deref(),
        Some(r#"{"x":2}"#)
    );
    assert_eq!(
        c.chunk_refs("/a/b", 2).expect("read").as_deref(),
        Some(r#"{"x":3}"#)
    );
    assert_eq!(c.chunk_refs("/a/c", 1).expect("read"), None);
}
