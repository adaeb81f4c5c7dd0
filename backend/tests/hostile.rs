//! Hostile states: the engine never deletes, follows or adopts what it did not create, refuses
//! what its format cannot store, keeps its files private, and survives a full disk whose space
//! is held by deleted generations. One test per finding of the hostile-states issue (numbers
//! in the test names' comments); each asserts the state of the foreign files afterwards, not
//! only the error.

mod common;

use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use butter_db::fs::{BtrfsFs, Fs};
use butter_db::{Env, Error, Merges};

/// A database with one table and a few commits, closed again.
fn make_db(dir: &Path, commits: u8) {
    let env = Env::open_path(dir).expect("open");
    let t = env.create_table("t").expect("table");
    for i in 0..commits {
        let mut w = env.begin_write().expect("write");
        w.put(t, &[i], b"value").expect("put");
        w.commit().expect("commit");
    }
}

fn generations(dir: &Path) -> Vec<PathBuf> {
    let mut g: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("gen-"))
        })
        .collect();
    g.sort();
    g
}

fn assert_foreign(r: Result<Env, Error>, expect_path: &Path) {
    match r {
        Err(Error::ForeignEntry { path, reason }) => {
            assert_eq!(path, expect_path, "error names the wrong entry ({reason})");
            // The message names the path and says nothing was changed.
            let text = Error::ForeignEntry {
                path: path.clone(),
                reason,
            }
            .to_string();
            assert!(text.contains(&path.display().to_string()) && text.contains("nothing"));
        }
        Err(e) => panic!(
            "expected ForeignEntry for {}, got {e:?}",
            expect_path.display()
        ),
        Ok(_) => panic!(
            "expected ForeignEntry for {}, the database opened",
            expect_path.display()
        ),
    }
}

fn read_all(env: &Env) -> Vec<(Vec<u8>, Vec<u8>)> {
    let t = env.table("t").expect("table t");
    env.begin_read().scan(t, &[]).expect("scan")
}

/// Finding 1: `compact` as a symlink to someone's directory, a `compact/` with someone else's
/// file inside an existing database, and a `compact/` in a directory that holds no database.
#[test]
fn foreign_compact_is_refused_and_untouched() {
    let Some(dir) = common::btrfs_dir("hostile_compact") else {
        return;
    };
    let db = dir.path.join("db");
    make_db(&db, 3);
    let victim = dir.path.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("a"), b"precious").unwrap();
    std::fs::remove_dir(db.join("compact")).unwrap();
    symlink(&victim, db.join("compact")).unwrap();
    assert_foreign(Env::open_path(&db), &db.join("compact"));
    assert_eq!(std::fs::read(victim.join("a")).unwrap(), b"precious");

    // A real compact/ directory, with a file the engine never names that way.
    std::fs::remove_file(db.join("compact")).unwrap();
    std::fs::create_dir(db.join("compact")).unwrap();
    std::fs::write(db.join("compact/notes.txt"), b"mine").unwrap();
    std::fs::write(db.join("compact/00000000000000aa.seg"), b"x").unwrap();
    assert_foreign(Env::open_path(&db), &db.join("compact/notes.txt"));
    assert_eq!(
        std::fs::read(db.join("compact/notes.txt")).unwrap(),
        b"mine"
    );
    assert!(
        db.join("compact/00000000000000aa.seg").exists(),
        "nothing deleted"
    );
    // Once the foreign file is gone, the merge leftover is ours and is cleared.
    std::fs::remove_file(db.join("compact/notes.txt")).unwrap();
    let env = Env::open_path(&db).expect("open after the foreign file is gone");
    assert_eq!(read_all(&env).len(), 3);
    assert!(!db.join("compact/00000000000000aa.seg").exists());
    drop(env);

    // A directory that is not a database, with a compact/ of someone else's files.
    let other = dir.path.join("not-a-db");
    std::fs::create_dir_all(other.join("compact")).unwrap();
    std::fs::write(other.join("compact/a"), b"theirs").unwrap();
    assert_foreign(Env::open_path(&other), &other.join("compact"));
    assert_eq!(std::fs::read(other.join("compact/a")).unwrap(), b"theirs");
    assert!(
        generations(&other).is_empty(),
        "no database was created there"
    );
}

/// Finding 2: a `gen-N` that is a symlink to another database's generation, or a real snapshot
/// of another database's generation; and `butter.lock` as a symlink, a directory or a FIFO.
#[test]
fn foreign_generations_and_lock_are_refused() {
    let Some(dir) = common::btrfs_dir("hostile_gen") else {
        return;
    };
    let a = dir.path.join("a");
    let b = dir.path.join("b");
    make_db(&a, 2);
    make_db(&b, 6);
    let a_gens = generations(&a);
    let b_newest = generations(&b).pop().expect("b has a generation");
    let b_name = b_newest.file_name().expect("name").to_owned();
    assert!(a_gens.last().unwrap().file_name().unwrap() < b_name.as_os_str());

    // A symlink that would be A's newest generation.
    symlink(&b_newest, a.join(&b_name)).unwrap();
    assert_foreign(Env::open_path(&a), &a.join(&b_name));
    assert_eq!(
        generations(&a).len(),
        a_gens.len() + 1,
        "A's generations untouched"
    );
    assert!(a_gens.iter().all(|g| g.is_dir()));
    std::fs::remove_file(a.join(&b_name)).unwrap();

    // A real read-only snapshot of B's generation under A.
    BtrfsFs
        .snapshot(&b_newest, &a.join(&b_name), true)
        .expect("snapshot B into A");
    assert_foreign(Env::open_path(&a), &a.join(&b_name));
    assert!(a_gens.iter().all(|g| g.is_dir()), "A's own generation kept");
    BtrfsFs.delete_subvolume(&a.join(&b_name)).unwrap();

    // A's data is intact and B is unchanged.
    let env = Env::open_path(&a).expect("A opens once the foreign generation is gone");
    assert_eq!(read_all(&env).len(), 2);
    drop(env);
    let env = Env::open_path(&b).expect("B");
    assert_eq!(read_all(&env).len(), 6);
    drop(env);

    // butter.lock as a symlink: not followed, its target not created.
    let target = dir.path.join("lock-target");
    std::fs::remove_file(a.join("butter.lock")).unwrap();
    symlink(&target, a.join("butter.lock")).unwrap();
    assert_foreign(Env::open_path(&a), &a.join("butter.lock"));
    assert!(!target.exists(), "the symlink's target was created");
    std::fs::remove_file(a.join("butter.lock")).unwrap();

    // butter.lock as a directory (with someone's file in it) or a FIFO: refused, left as found.
    std::fs::create_dir(a.join("butter.lock")).unwrap();
    std::fs::write(a.join("butter.lock/theirs"), b"x").unwrap();
    assert_foreign(Env::open_path(&a), &a.join("butter.lock"));
    assert_eq!(std::fs::read(a.join("butter.lock/theirs")).unwrap(), b"x");
    std::fs::remove_dir_all(a.join("butter.lock")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        a.join("butter.lock"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RWXU,
        0,
    )
    .unwrap();
    assert_foreign(Env::open_path(&a), &a.join("butter.lock"));
    assert!(std::fs::symlink_metadata(a.join("butter.lock"))
        .unwrap()
        .file_type()
        .is_fifo());
    std::fs::remove_file(a.join("butter.lock")).unwrap();

    // With the lock's name free again, A opens with its data.
    let env = Env::open_path(&a).expect("A opens once its lock's name is free");
    assert_eq!(read_all(&env).len(), 2);
}

/// Finding 3: a table name longer than the manifest's 16-bit length.
#[test]
fn overlong_table_name_is_refused_and_the_database_still_opens() {
    let Some(dir) = common::btrfs_dir("hostile_name") else {
        return;
    };
    let db = dir.path.join("db");
    let env = Env::open_path(&db).expect("open");
    let long = "n".repeat(65_536);
    match env.create_table(&long) {
        Err(Error::NameTooLong(65_536)) => {}
        other => panic!("expected NameTooLong(65536), got {other:?}"),
    }
    let longest = "m".repeat(65_535);
    let t = env.create_table(&longest).expect("65,535 bytes fit");
    let mut w = env.begin_write().unwrap();
    w.put(t, b"k", b"v").unwrap();
    w.commit().unwrap();
    drop(env);
    let env = Env::open_path(&db).expect("reopens");
    assert!(env.table(&longest).is_some());
    assert!(env.table(&long).is_none());
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777
}

use butter_test_support::is_root;

/// Finding 10: files 0600 and directories 0700 by default, whatever the umask lets through;
/// 0640 and 0750 with group access; another user cannot read the database.
#[test]
fn files_are_private_unless_group_access() {
    let Some(dir) = common::btrfs_dir("hostile_modes") else {
        return;
    };
    // The test directory must be reachable by uid 65534 for the last check.
    std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (group, file_mode, dir_mode) in [(false, 0o600, 0o700), (true, 0o640, 0o750)] {
        let db = dir.path.join(format!("db-{group}"));
        let env = Env::builder(&db)
            .group_access(group)
            .merges(Merges::BackgroundWaited)
            .open()
            .expect("open");
        let t = env.create_table("t").unwrap();
        for i in 0..12u8 {
            let mut w = env.begin_write().unwrap();
            w.put(t, &[i], &[i; 100]).unwrap();
            w.commit().unwrap();
        }
        drop(env);
        let gen = generations(&db).pop().unwrap();
        let mut checked = 0;
        for d in [db.clone(), db.join("live"), db.join("compact"), gen.clone()] {
            assert_eq!(mode_of(&d), dir_mode, "{}", d.display());
            checked += 1;
        }
        let mut files = vec![db.join("butter.lock"), db.join("butter.id")];
        for sub in [db.join("live"), gen] {
            for e in std::fs::read_dir(&sub).unwrap().flatten() {
                files.push(e.path());
            }
        }
        assert!(files
            .iter()
            .any(|f| f.extension().is_some_and(|x| x == "seg")));
        for f in &files {
            assert_eq!(mode_of(f), file_mode, "{}", f.display());
            checked += 1;
        }
        assert!(checked >= 10);
    }
    if is_root() {
        // Another user can list neither database directory's contents nor read a file.
        let private = dir.path.join("db-false");
        let out = butter_test_support::as_user(65534, "cat")
            .arg(private.join("live/MANIFEST"))
            .output()
            .expect("setpriv");
        assert!(!out.status.success(), "uid 65534 read a private manifest");
    } else {
        butter_test_support::skip(
            "files_are_private_unless_group_access (uid 65534 part)",
            "not root",
        );
    }
}

/// Finding 8: a full disk whose free space is held by generations deleted but not yet
/// reclaimed by btrfs. A 300 MiB btrfs of its own; every commit replaces 24 MiB of
/// incompressible values, so a handful of unreclaimed generations fill it. All commits must
/// succeed and the last one's data must be there after reopening.
#[test]
fn disk_full_from_deleted_generations_recovers() {
    let Some(dir) = common::btrfs_dir("hostile_enospc") else {
        return;
    };
    if !is_root() {
        butter_test_support::skip(
            "disk_full_from_deleted_generations_recovers",
            "needs root to mount",
        );
        return;
    }
    let mnt = small_btrfs(&dir.path, 300);
    let db = mnt.path.join("db");
    let env = Env::builder(&db)
        .merges(Merges::Inline)
        .open()
        .expect("open");
    let t = env.create_table("t").unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = vec![0u8; 1 << 20];
    let mut max_pending = 0;
    for commit in 0..30u32 {
        let mut w = env.begin_write().unwrap();
        for key in 0..24u8 {
            for chunk in value.chunks_mut(8) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
            }
            value[..4].copy_from_slice(&commit.to_le_bytes());
            w.put(t, &[key], &value).unwrap();
        }
        w.commit()
            .unwrap_or_else(|e| panic!("commit {commit} failed: {e}"));
        max_pending = max_pending.max(deleted_pending(&mnt.path));
    }
    drop(env);
    let env = Env::open_path(&db).expect("reopen");
    let data = read_all(&env);
    assert_eq!(data.len(), 24);
    assert!(data.iter().all(|(_, v)| v[..4] == 29u32.to_le_bytes()));
    println!(
        "tier enospc-reclaim: 30 commits of 24 MiB on a 300 MiB btrfs, 0 failures, at most \
         {max_pending} deleted generations awaiting reclaim"
    );
    // The engine asks btrfs to reclaim after every 8 deletions; the cleaner may lag a little.
    assert!(
        max_pending <= 10,
        "{max_pending} deleted generations pending"
    );
}

/// Subvolumes deleted under `mnt` but not yet cleaned (`btrfs subvolume list -d`).
fn deleted_pending(mnt: &Path) -> usize {
    let out = Command::new("btrfs")
        .args(["subvolume", "list", "-d"])
        .arg(mnt)
        .output()
        .expect("btrfs subvolume list -d");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// A loop-mounted btrfs of `mib` MiB inside `base`, unmounted when dropped.
struct SmallFs {
    path: PathBuf,
    img: PathBuf,
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
        let _ = std::fs::remove_file(&self.img);
    }
}

fn small_btrfs(base: &Path, mib: u64) -> SmallFs {
    let img = base.join("small.img");
    let path = base.join("small");
    std::fs::create_dir_all(&path).unwrap();
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(mib << 20).unwrap();
    let ok = |c: &mut Command| assert!(c.status().expect("run").success(), "{c:?}");
    ok(Command::new("mkfs.btrfs")
        .args(["-q", "-f", "-m", "single"])
        .arg(&img));
    ok(Command::new("mount")
        .args(["-o", "loop,noatime"])
        .arg(&img)
        .arg(&path));
    SmallFs { path, img }
}

/// A `butter.id.tmp` in a directory without a database: someone's file is refused and kept; an
/// empty one (a first open killed between creating and writing it) is replaced.
#[test]
fn leftover_identity_tmp() {
    let Some(dir) = common::btrfs_dir("hostile_idtmp") else {
        return;
    };
    let db = dir.path.join("db");
    std::fs::create_dir(&db).unwrap();
    std::fs::write(db.join("butter.id.tmp"), b"someone's notes").unwrap();
    assert_foreign(Env::open_path(&db), &db.join("butter.id.tmp"));
    assert_eq!(
        std::fs::read(db.join("butter.id.tmp")).unwrap(),
        b"someone's notes"
    );
    std::fs::write(db.join("butter.id.tmp"), b"").unwrap();
    let env = Env::open_path(&db).expect("an empty leftover is replaced");
    assert!(db.join("butter.id").is_file() && !db.join("butter.id.tmp").exists());
    drop(env);
}

/// A copy by the `butter` tool killed before it had its identity leaves `butter.incomplete`
/// (and perhaps a staging snapshot): open refuses the directory and creates nothing there,
/// rather than starting a new, empty database beside the tool's files.
#[test]
fn an_unfinished_copy_is_not_opened() {
    let Some(dir) = common::btrfs_dir("hostile_incomplete") else {
        return;
    };
    let db = dir.path.join("db");
    std::fs::create_dir(&db).unwrap();
    std::fs::write(db.join("butter.incomplete"), b"").unwrap();
    match Env::open_path(&db) {
        Err(Error::NotADatabase { path, reason }) => {
            assert_eq!(path, db);
            assert!(reason.contains("butter.incomplete"), "{reason}");
        }
        other => panic!(
            "expected NotADatabase, got {:?}",
            other.map(|_| "an open database")
        ),
    }
    let mut left: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    // A refused open creates nothing, not even its lock file (issue 57).
    assert_eq!(left, ["butter.incomplete"], "open created something");
}

/// Issue 47: open checks everything before it changes anything. A foreign file in `compact/`
/// is refused before `live/` is discarded (an uncommitted file in `live/` is still there), and
/// a nested subvolume or a directory put into `live/` is refused, not deleted with it.
#[test]
fn open_checks_everything_before_discarding_live() {
    let Some(dir) = common::btrfs_dir("hostile_open_order") else {
        return;
    };
    let db = dir.path.join("db");
    make_db(&db, 3);
    let live = db.join("live");
    // An uncommitted segment, by the engine's name for one.
    let probe = live.join("00000000000000ff.seg");
    std::fs::write(&probe, b"not committed").unwrap();

    let foreign = db.join("compact").join("notes.txt");
    std::fs::write(&foreign, b"somebody's").unwrap();
    assert_foreign(Env::open_path(&db), &foreign);
    assert!(
        probe.exists(),
        "live/ was discarded before compact/ was checked"
    );
    assert_eq!(std::fs::read(&foreign).unwrap(), b"somebody's");
    std::fs::remove_file(&foreign).unwrap();

    let nested = live.join("nested");
    BtrfsFs.create_subvolume(&nested).unwrap();
    std::fs::write(nested.join("data"), b"keep").unwrap();
    assert_foreign(Env::open_path(&db), &nested);
    assert_eq!(std::fs::read(nested.join("data")).unwrap(), b"keep");
    assert!(
        probe.exists(),
        "live/ was discarded although it was refused"
    );
    BtrfsFs.delete_subvolume(&nested).unwrap();

    let plain = live.join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("data"), b"keep").unwrap();
    assert_foreign(Env::open_path(&db), &plain);
    assert_eq!(std::fs::read(plain.join("data")).unwrap(), b"keep");
    std::fs::remove_dir_all(&plain).unwrap();

    // With only files left in live/, open discards them and the data is all there.
    let env = Env::open_path(&db).expect("open after the foreign entries were removed");
    assert!(!probe.exists(), "the uncommitted file survived the open");
    assert_eq!(read_all(&env).len(), 3);
}

/// Issue 47: deletion goes through directory handles and never follows a symlink. A symlink
/// to a database, given as the directory to empty or remove, or to a generation, given as the
/// subvolume to delete, is refused and nothing behind it changes; `remove_tree_at` with the
/// identity of another directory removes nothing, with the right one removes everything.
#[test]
fn deletion_never_follows_a_symlink() {
    use butter_db::fs::FileId;
    use std::os::fd::AsFd;
    let Some(dir) = common::btrfs_dir("hostile_delete_symlink") else {
        return;
    };
    let db = dir.path.join("db");
    make_db(&db, 2);
    let before = generations(&db);
    assert!(!before.is_empty());
    let link = dir.path.join("link");
    symlink(&db, &link).unwrap();
    let gen_link = dir.path.join("gen-link");
    symlink(&before[0], &gen_link).unwrap();
    let not_followed = |e: std::io::Error| e.raw_os_error() == Some(libc::ENOTDIR);
    assert!(not_followed(
        BtrfsFs.delete_subvolumes_in(&link).unwrap_err()
    ));
    assert!(not_followed(BtrfsFs.remove_tree(&link).unwrap_err()));
    assert!(not_followed(
        BtrfsFs.delete_subvolume(&gen_link).unwrap_err()
    ));
    assert_eq!(
        generations(&db),
        before,
        "a generation was deleted through a symlink"
    );
    assert!(db.join("live").exists());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    let parent = std::fs::File::open(&dir.path).unwrap();
    let id = FileId::of(std::fs::File::open(&db).unwrap().as_fd()).unwrap();
    let other = dir.path.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("f"), b"keep").unwrap();
    assert!(BtrfsFs
        .remove_tree_at(parent.as_fd(), "other".as_ref(), Some(id))
        .is_err());
    assert_eq!(std::fs::read(other.join("f")).unwrap(), b"keep");
    BtrfsFs
        .remove_tree_at(parent.as_fd(), "db".as_ref(), Some(id))
        .expect("remove the database by handle");
    assert!(!db.exists());
}

/// Issue 57: a refused open creates nothing (no `butter.lock` afterwards), and open deletes
/// only the files it wrote: a file by another name in `live/`, a symlink there, a merge
/// output's name in `compact/` given to somebody's file by a hard link, and (as root) files of
/// another user by the engine's names in either are refused with `ForeignEntry` and kept; once
/// they are gone the database opens with its data.
#[test]
fn open_deletes_only_its_own_files_and_a_refusal_creates_nothing() {
    use std::os::unix::fs::MetadataExt;
    let Some(dir) = common::btrfs_dir("hostile_own_files") else {
        return;
    };
    let db = dir.path.join("db");
    make_db(&db, 3);
    let lock = db.join("butter.lock");
    let compact = db.join("compact");
    let live = db.join("live");
    let precious = dir.path.join("precious");
    std::fs::write(&precious, b"the user's own file").unwrap();
    let refused = |foreign: &Path, what: &str| {
        assert_foreign(Env::open_path(&db), foreign);
        assert!(
            std::fs::symlink_metadata(foreign).is_ok(),
            "{what}: deleted although open was refused"
        );
        assert!(!lock.exists(), "{what}: a refused open created butter.lock");
        assert_eq!(
            std::fs::read(&precious).unwrap(),
            b"the user's own file",
            "{what}"
        );
    };

    // Without its lock file: a foreign entry is refused before the lock file is made.
    std::fs::remove_file(&lock).unwrap();
    let notes = compact.join("notes.txt");
    std::fs::write(&notes, b"x").unwrap();
    refused(&notes, "a foreign name in compact/");
    std::fs::remove_file(&notes).unwrap();

    // A regular file by a name the engine never gives one in live/.
    let live_notes = live.join("notes.txt");
    std::fs::write(&live_notes, b"mine").unwrap();
    refused(&live_notes, "a foreign name in live/");
    assert_eq!(std::fs::read(&live_notes).unwrap(), b"mine");
    std::fs::remove_file(&live_notes).unwrap();

    // A symlink by a segment's name in live/.
    let live_link = live.join("00000000000000fd.seg");
    symlink(&precious, &live_link).unwrap();
    refused(&live_link, "a symlink in live/");
    std::fs::remove_file(&live_link).unwrap();

    // The user's file hard-linked into compact/ under a merge output's name.
    let linked = compact.join("00000000000000ab.seg");
    std::fs::hard_link(&precious, &linked).unwrap();
    refused(&linked, "a hard link in compact/");
    assert_eq!(std::fs::metadata(&precious).unwrap().nlink(), 2);
    std::fs::remove_file(&linked).unwrap();

    if is_root() {
        // Files by the engine's names that belong to another user (uid 65534).
        for foreign in [
            compact.join("00000000000000ac.seg"),
            live.join("00000000000000ad.seg"),
        ] {
            std::fs::write(&foreign, b"theirs").unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
            refused(&foreign, "another user's file");
            assert_eq!(std::fs::read(&foreign).unwrap(), b"theirs");
            std::fs::remove_file(&foreign).unwrap();
        }
    } else {
        butter_test_support::skip(
            "open_deletes_only_its_own_files_and_a_refusal_creates_nothing (other users' files)",
            "needs root to give a file to another user",
        );
    }

    // The engine's own leftovers (an uncommitted segment, a merge output) are cleared.
    std::fs::write(live.join("00000000000000fe.seg"), b"torn").unwrap();
    std::fs::write(compact.join("00000000000000fe.seg"), b"torn").unwrap();
    let env = Env::open_path(&db).expect("open once the foreign files are gone");
    assert_eq!(read_all(&env).len(), 3);
    assert!(lock.is_file());
    assert!(!live.join("00000000000000fe.seg").exists());
    assert!(!compact.join("00000000000000fe.seg").exists());
}
