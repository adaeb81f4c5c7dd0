//! A slasher's database backed up during a replay with the `butter` tool, restored, checked,
//! and the replay continued from the restored copy: every later batch finds exactly the
//! slashings the uninterrupted run found (issue 44, item 2).
//!
//! The fixture is generated (512 validators, 4 epochs, injected double votes, surround votes
//! and double proposals). The reference run replays all of it. A second run stops after
//! `BACKUP_AFTER` batches with its slasher still open (the writer holds the database's lock)
//! and is copied with `butter_tools::backup`; it then goes on to the end, so the copy must not
//! have disturbed it either. The copy is restored (`butter_tools::restore`, as an operator
//! would after losing the original), checked (`butter_tools::check`), and a new slasher
//! replays the rest of the fixture on it.
//!
//! The comparison must be able to fail: the same restore with one table emptied (the
//! `attesters` records, as if the copy had lost that table) must find different slashings in
//! some later batch, or fail outright.
//!
//! Streams (`btrfs send`, root) are covered by the tool's own tests (`tools/tests/live.rs`);
//! here the copy is the one an unprivileged operator makes.

use std::path::{Path, PathBuf};

use slasher_adapters::butter::Environment as Butter;
use slasher_adapters::slasher::{Config, Slasher};
use slasher_bench::fixtures::file::{Batch, FixtureReader};
use slasher_bench::fixtures::generate::{generate, GenerateOptions};
use ssz::Encode;

/// The last batch replayed before the backup (the fixture has 128).
const BACKUP_AFTER: usize = 70;
/// The table emptied in the negative control.
const DROPPED_TABLE: &str = "attesters";

/// Each batch's slashings, encoded and sorted (attester then proposer).
type Found = Vec<Vec<Vec<u8>>>;

fn config(path: &Path, fixture: &FixtureReader) -> Config {
    let hint = fixture.manifest().description.slasher_config;
    let mut c = Config::new(path);
    c.chunk_size = hint.chunk_size as usize;
    c.validator_chunk_size = hint.validator_chunk_size as usize;
    c.history_length = hint.history_length as usize;
    c
}

fn open(path: &Path, fixture: &FixtureReader) -> Slasher<Butter> {
    Slasher::<Butter>::create(config(path, fixture)).expect("open the slasher")
}

/// Replays `batches` on `slasher` (queue, `process_queued`, `prune_database`, as `replay`
/// does with one batch per update) and returns each batch's slashings.
fn replay(slasher: &Slasher<Butter>, batches: &[Batch]) -> Result<Found, String> {
    let mut found = Vec::new();
    for b in batches {
        for h in &b.headers {
            slasher.accept_block_header(*h);
        }
        for a in &b.attestations {
            slasher.accept_attestation(a.clone());
        }
        slasher
            .process_queued(b.current_epoch)
            .map_err(|e| format!("batch {}: {e}", b.index))?;
        slasher
            .prune_database(b.current_epoch)
            .map_err(|e| format!("batch {}: {e}", b.index))?;
        let mut encoded: Vec<Vec<u8>> = slasher
            .get_attester_slashings()
            .iter()
            .map(|s| [b"A".to_vec(), s.as_ssz_bytes()].concat())
            .chain(
                slasher
                    .get_proposer_slashings()
                    .iter()
                    .map(|s| [b"P".to_vec(), s.as_ssz_bytes()].concat()),
            )
            .collect();
        encoded.sort();
        found.push(encoded);
    }
    Ok(found)
}

/// Restores `copy` into `dest` with the tool, checks it, and continues the replay there.
fn restore_and_continue(
    copy: &Path,
    dest: &Path,
    fixture: &FixtureReader,
    rest: &[Batch],
    damage: impl FnOnce(&Path),
) -> Result<Found, String> {
    let restored = butter_tools::restore(&[copy.to_path_buf()], dest).map_err(|e| e.to_string())?;
    assert_eq!(restored.verified.tables, 9, "the slasher's nine tables");
    damage(dest);
    let checked = butter_tools::check(dest).map_err(|e| e.to_string())?;
    assert!(checked.verified.entries > 0);
    let slasher = open(dest, fixture);
    replay(&slasher, rest)
}

/// Deletes every entry of `table` in the database `db` (through the engine).
fn empty_table(db: &Path, table: &str) {
    let env = butter_db::Env::open_path(db).expect("open the restored copy");
    let t = env.table(table).expect("the table exists");
    let keys: Vec<Vec<u8>> = env
        .begin_read()
        .scan(t, &[])
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(!keys.is_empty(), "{table} is empty already");
    let mut txn = env.begin_write().unwrap();
    for k in keys {
        txn.delete(t, &k).unwrap();
    }
    txn.commit().unwrap();
}

/// Removes the databases it names when dropped (their read-only generations are beyond
/// `TempDir`'s reach), passed or failed.
struct Databases(Vec<PathBuf>);

impl Drop for Databases {
    fn drop(&mut self) {
        for db in &self.0 {
            if db.exists() {
                if let Err(e) = butter_tools::remove(db) {
                    eprintln!("removing {}: {e}", db.display());
                }
            }
        }
    }
}

/// Where each slashing was found: (batch, count), for the failure message.
fn summary(found: &[Vec<Vec<u8>>], first: usize) -> Vec<(usize, usize)> {
    found
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(i, s)| (first + i, s.len()))
        .collect()
}

#[test]
fn backup_during_replay_restore_check_and_continue() {
    let Some(base) = butter_test_support::btrfs_base("backup_restore_continue") else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("backup-restore-")
        .tempdir_in(&base)
        .expect("temp dir on btrfs");
    let dir = |name: &str| -> PathBuf { work.path().join(name) };
    let _cleanup = Databases(
        ["reference", "original", "copy", "restored", "damaged"]
            .iter()
            .map(|n| dir(n))
            .collect(),
    );
    let fixture_path = dir("small.fixture");
    generate(&GenerateOptions::new(512, 4, 5), &fixture_path).expect("generate");
    let fixture = FixtureReader::open(&fixture_path).expect("fixture");
    let batches: Vec<Batch> = FixtureReader::open(&fixture_path)
        .unwrap()
        .collect::<Result<_, _>>()
        .expect("read batches");
    let (before, rest) = batches.split_at(BACKUP_AFTER + 1);

    // The reference: one uninterrupted run.
    let reference = replay(&open(&dir("reference"), &fixture), &batches).unwrap();
    let later = &reference[BACKUP_AFTER + 1..];
    let later_slashings: usize = later.iter().map(Vec::len).sum();
    assert!(
        later_slashings > 0,
        "no slashing after batch {BACKUP_AFTER}: the test would prove nothing ({:?})",
        summary(&reference, 0)
    );

    // The run that is backed up while its slasher is open, then goes on.
    let original = dir("original");
    let slasher = open(&original, &fixture);
    let first = replay(&slasher, before).unwrap();
    let copy = dir("copy");
    let backed_up = butter_tools::backup(&original, &copy, None).expect("backup during replay");
    let went_on = replay(&slasher, rest).unwrap();
    drop(slasher);
    assert_eq!(
        [first, went_on].concat(),
        reference,
        "the backed-up run itself differs from the reference"
    );

    // Restore, check, continue.
    let continued = restore_and_continue(&copy, &dir("restored"), &fixture, rest, |_| {}).unwrap();
    assert_eq!(
        continued.len(),
        later.len(),
        "one result per batch after the backup"
    );
    for (i, (got, want)) in continued.iter().zip(later).enumerate() {
        assert_eq!(
            got,
            want,
            "batch {}: the restored copy (generation {}) found {} slashings, the reference {}",
            BACKUP_AFTER + 1 + i,
            backed_up.copy.generation,
            got.len(),
            want.len()
        );
    }
    eprintln!(
        "backup of generation {} after batch {BACKUP_AFTER}; {later_slashings} slashings in \
         the {} later batches, the same from the restored copy: {:?}",
        backed_up.copy.generation,
        later.len(),
        summary(later, BACKUP_AFTER + 1)
    );

    // The comparison has teeth: a copy that lost a table does not pass it.
    let damaged = restore_and_continue(&copy, &dir("damaged"), &fixture, rest, |db| {
        empty_table(db, DROPPED_TABLE)
    });
    match damaged {
        Ok(found) => assert_ne!(
            found.as_slice(),
            later,
            "a copy without {DROPPED_TABLE} found the same slashings"
        ),
        Err(e) => eprintln!("the copy without {DROPPED_TABLE} failed the replay: {e}"),
    }
}
