//! Unit tests of the replay's parsing and summaries.

use super::dirs::parse_db_dirs;
use super::partial::{batches_name, oom_reason, partial_row, BatchStream};
use super::summary::{summarise, BatchSlashings};
use crate::report::{BackendResult, BatchRecord};
use slasher_adapters::slasher::{AttesterSlashing, IndexedAttestation, ProposerSlashing};
use slasher_adapters::DatabaseBackend;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

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
    assert_eq!(
        BatchSlashings::canonical(&HashSet::new(), &HashSet::new()).digest(),
        None
    );
}

/// The canonical form (`BatchSlashings`) against the orders a slasher may list a slashing's
/// two halves in, and against real differences.
mod canonical {
    use super::*;
    use crate::report::{first_disagreement, BackendResult, BatchRecord};
    use slasher_adapters::slasher::types::{
        AttestationData, BeaconBlockHeader, Checkpoint, Hash256, SignedBeaconBlockHeader,
    };

    fn header(body: u8) -> SignedBeaconBlockHeader {
        SignedBeaconBlockHeader {
            message: BeaconBlockHeader {
                slot: 4_700_013,
                proposer_index: 1_234,
                body_root: Hash256::repeat_byte(body),
                ..BeaconBlockHeader::default()
            },
            signature: [body; 96],
        }
    }

    fn proposal(first: u8, second: u8) -> ProposerSlashing {
        ProposerSlashing {
            signed_header_1: header(first),
            signed_header_2: header(second),
        }
    }

    fn vote(validators: &[u64], source: u64, target: u64, head: u8) -> IndexedAttestation {
        let data = AttestationData {
            slot: target * 32,
            beacon_block_root: Hash256::repeat_byte(head),
            source: Checkpoint {
                epoch: source,
                ..Checkpoint::default()
            },
            target: Checkpoint {
                epoch: target,
                ..Checkpoint::default()
            },
            ..AttestationData::default()
        };
        IndexedAttestation::new(validators.to_vec(), data, [head; 96]).expect("attestation")
    }

    fn pair(a: &IndexedAttestation, b: &IndexedAttestation) -> AttesterSlashing {
        AttesterSlashing {
            attestation_1: a.clone(),
            attestation_2: b.clone(),
        }
    }

    fn of(attester: &[AttesterSlashing], proposer: &[ProposerSlashing]) -> BatchSlashings {
        BatchSlashings::canonical(attester, proposer)
    }

    /// A row with one batch per given batch of slashings, digested as the bench does.
    fn row(name: &str, batches: &[BatchSlashings]) -> BackendResult {
        BackendResult {
            name: name.into(),
            batches: batches
                .iter()
                .enumerate()
                .map(|(i, s)| BatchRecord {
                    index: i as u64,
                    attester_slashings: s.attester_count(),
                    proposer_slashings: s.proposer_count(),
                    slashings_digest: s.digest(),
                    ..BatchRecord::default()
                })
                .collect(),
            ..BackendResult::default()
        }
    }

    #[test]
    fn a_double_proposal_in_either_order_is_one_slashing() {
        let (ab, ba) = (of(&[], &[proposal(1, 2)]), of(&[], &[proposal(2, 1)]));
        assert!(ab.digest().is_some());
        assert_eq!(ab.digest(), ba.digest());
        assert_eq!(summarise(7, &ab), summarise(7, &ba));
        // Both orders at once are the same slashing: counted once.
        let both = of(&[], &[proposal(1, 2), proposal(2, 1)]);
        assert_eq!((both.proposer_count(), both.digest()), (1, ab.digest()));
        // The gate passes rows that listed the two orders.
        let quiet = of(&[], &[]);
        let rows = [
            row("lighthouse:lmdb@ext4", &[quiet.clone(), ab.clone()]),
            row("lmdb@ext4", &[quiet.clone(), ba]),
        ];
        assert!(first_disagreement(&[&rows[0], &rows[1]]).is_none());

        // A third header is another slashing: another digest, and the gate fails at batch 1.
        for other in [
            of(&[], &[proposal(1, 3)]),
            of(&[], &[proposal(3, 2)]),
            of(&[], &[proposal(1, 2), proposal(1, 3)]),
        ] {
            assert_ne!(other.digest(), ab.digest());
            let third = row("butter@btrfs", &[quiet.clone(), other]);
            let d = first_disagreement(&[&rows[0], &third]).expect("the gate fails");
            assert_eq!(d.batch_index, 1);
        }
    }

    #[test]
    fn a_double_vote_in_either_order_is_one_slashing_and_a_surround_keeps_its_order() {
        let x = vote(&[5, 9], 10, 11, 1);
        let y = vote(&[9], 10, 11, 2);
        let (xy, yx) = (of(&[pair(&x, &y)], &[]), of(&[pair(&y, &x)], &[]));
        assert!(xy.digest().is_some());
        assert_eq!(xy.digest(), yx.digest());
        assert_eq!(summarise(3, &xy), summarise(3, &yx));
        assert_eq!(of(&[pair(&x, &y), pair(&y, &x)], &[]).attester_count(), 1);
        let first = row("a", std::slice::from_ref(&xy));
        assert!(first_disagreement(&[&first, &row("b", &[yx])]).is_none());

        // A changed attestation: another head, another validator, another signature.
        let changed = [
            vote(&[9], 10, 11, 3),
            vote(&[8, 9], 10, 11, 2),
            IndexedAttestation {
                signature: [7; 96],
                ..y.clone()
            },
        ];
        for z in &changed {
            let other = of(&[pair(z, &x)], &[]);
            assert_ne!(other.digest(), xy.digest(), "{z:?}");
            let d = first_disagreement(&[&first, &row("b", &[other])]);
            assert_eq!(d.expect("the gate fails").batch_index, 0);
        }

        // A surround vote is valid only with the surrounding attestation first: the reversed
        // pair is another (invalid) slashing, and the two kinds never mix.
        let around = vote(&[9], 8, 12, 4);
        let (valid, reversed) = (of(&[pair(&around, &x)], &[]), of(&[pair(&x, &around)], &[]));
        assert_ne!(valid.digest(), reversed.digest());
        assert_ne!(valid.digest(), of(&[], &[proposal(1, 2)]).digest());
    }
}

#[test]
fn a_dead_childs_stream_becomes_a_partial_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(batches_name(".child-butter.json"));
    assert!(path
        .to_string_lossy()
        .ends_with(".child-butter.json.batches"));
    let head = BackendResult {
        name: "butter@btrfs".into(),
        backend: "butter".into(),
        durable: true,
        open_ms: 5.0,
        ..BackendResult::default()
    };
    let out = crate::system::outdir::OutDir::open(dir.path()).unwrap();
    let mut stream = BatchStream::create(&out, ".child-butter.json.batches", &head).unwrap();
    // Created exclusively: a second stream by the same name (or anything planted there) fails.
    assert!(BatchStream::create(&out, ".child-butter.json.batches", &head).is_err());
    assert!(partial_row(&path).is_none(), "no batch finished: no row");
    for (index, wall_ms) in [(0u64, 30.0), (1, 10.0), (2, 20.0)] {
        let batch = BatchRecord {
            index,
            wall_ms,
            commit_ms: wall_ms / 10.0,
            db_bytes: 100 * (index + 1),
            attester_slashings: usize::from(index == 1),
            ..BatchRecord::default()
        };
        stream.batch(&batch).unwrap();
    }
    drop(stream);
    // The child died while writing a fourth batch: a torn last line.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"index\":3,\"wall");
    std::fs::write(&path, text).unwrap();

    let row = partial_row(&path).expect("a row");
    assert!(row.interrupted, "marked partial");
    assert_eq!(row.name, "butter@btrfs");
    assert_eq!(row.open_ms, 5.0);
    let indexes: Vec<u64> = row.batches.iter().map(|b| b.index).collect();
    assert_eq!(indexes, [0, 1, 2]);
    assert_eq!(row.first_batch_ms, 30.0);
    assert_eq!(row.median_batch_ms, 20.0);
    assert_eq!(row.max_batch_ms, 30.0);
    assert!((row.total_s - 0.06).abs() < 1e-9, "{}", row.total_s);
    assert_eq!(row.db_bytes_final, 300);
    assert_eq!(row.slashings.attester, 1);
}

#[test]
fn an_oom_kill_is_named_with_its_limit() {
    let cgroup = Path::new("/sys/fs/cgroup/memory/x");
    let text = oom_reason(Some(128 << 20), cgroup);
    assert!(
        text.starts_with("killed by the kernel's OOM killer (memory limit 128 MiB;"),
        "{text}"
    );
    assert!(text.contains("/sys/fs/cgroup/memory/x"), "{text}");
    let text = oom_reason(None, cgroup);
    assert!(text.contains("the machine's memory ran out"), "{text}");
}

/// Issue 57: the child's errors name the --db-dir the run was given, not the
/// `/proc/self/fd/N/.` path it reaches the directory through.
#[test]
fn child_errors_name_the_db_dir_not_the_handle() {
    use super::child::name_db_dir;
    let db = std::path::Path::new("/srv/db/slasher-bench-lmdb-1-2");
    assert_eq!(
        name_db_dir(
            "opening /proc/self/fd/4/./data.mdb: Permission denied (at /proc/self/fd/17/.)",
            db
        )
        .as_deref(),
        Some(
            "opening /srv/db/slasher-bench-lmdb-1-2/data.mdb: Permission denied (at \
             /srv/db/slasher-bench-lmdb-1-2)"
        )
    );
    // Other /proc paths are left as they are.
    assert_eq!(
        name_db_dir("reading /proc/self/fd/x and /proc/self/fd/3/..", db).as_deref(),
        Some("reading /proc/self/fd/x and /proc/self/fd/3/..")
    );
    assert_eq!(name_db_dir("no handle here", db), None);
}
