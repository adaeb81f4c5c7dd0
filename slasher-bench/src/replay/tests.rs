//! Unit tests of the replay's parsing and summaries.

use super::*;

#[test]
fn db_dir_specs_parse() {
    let b = [DatabaseBackend::Lmdb, DatabaseBackend::Redb];
    let one = parse_db_dirs("/x", &b).expect("one dir");
    assert_eq!(one.get(&DatabaseBackend::Redb), Some(&PathBuf::from("/x")));
    let per = parse_db_dirs("lmdb=/a, redb=/b", &b).expect("per backend");
    assert_eq!(per.get(&DatabaseBackend::Lmdb), Some(&PathBuf::from("/a")));
    assert_eq!(per.get(&DatabaseBackend::Redb), Some(&PathBuf::from("/b")));
    let err = parse_db_dirs("lmdb=/a", &b).expect_err("redb missing");
    assert!(
        err.to_string().contains("no entry for backend redb"),
        "{err}"
    );
    assert!(parse_db_dirs("nosuch=/a", &b).is_err());
}

#[test]
fn empty_batches_have_no_digest() {
    assert_eq!(slashings_digest(&HashSet::new(), &HashSet::new()), None);
}
