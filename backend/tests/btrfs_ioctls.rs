//! The btrfs ioctl layer (`BtrfsFs`, `filesystem_type`, `is_subvolume_root`) on a real btrfs
//! filesystem: the directory named by `BUTTER_BTRFS_DIR`, which `scripts/test.sh` creates
//! (a loop-mounted image, mode 1777).
//!
//! Without `BUTTER_BTRFS_DIR` every test prints a SKIP line and passes, except under `CI=true`,
//! where they fail. The unprivileged tests also need root (to switch to uid 65534 with
//! `setpriv` and to mount a second filesystem with `user_subvol_rm_allowed`).
//!
//! Durability of snapshots at return is not testable here (it needs a simulated power loss);
//! it belongs to the crash tiers.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use butter_db::fs::{
    filesystem_type, is_subvolume_root, validate_subvolume_name, BtrfsFs, Deletion, Fs, FsType,
    SUBVOL_NAME_MAX,
};

const DIR_VAR: &str = "BUTTER_BTRFS_DIR";
/// The unprivileged user the child process runs as (`nobody` on Debian).
const NOBODY: u32 = 65534;
/// Tells the test binary, re-run as [`NOBODY`], which scenario `unprivileged_child` plays.
const ROLE_VAR: &str = "BUTTER_UNPRIV_ROLE";
/// The directory (owned by [`NOBODY`]) the child works in.
const CHILD_DIR_VAR: &str = "BUTTER_UNPRIV_DIR";

/// A line on the real stderr, past the test harness's output capture.
fn loud(msg: &str) {
    let _ = writeln!(io::stderr(), "{msg}");
}

use butter_test_support::skip;

/// The btrfs directory under test, or `None` after the SKIP line (a failure under CI).
fn btrfs_dir(test: &str) -> Option<PathBuf> {
    let dir = butter_test_support::btrfs_base(test)?;
    let ty = filesystem_type(&dir).expect("statfs of BUTTER_BTRFS_DIR");
    assert!(
        ty.is_btrfs(),
        "{DIR_VAR}={} is on {ty}, not btrfs",
        dir.display()
    );
    Some(dir)
}

/// A fresh directory for one test under the btrfs directory; on drop, everything in it is
/// deleted, subvolumes included.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(base: &Path, test: &str) -> Scratch {
        let path = base.join(format!("ioctls-{}-{test}", std::process::id()));
        if path.exists() {
            remove_tree(&path).expect("remove a stale scratch directory");
        }
        fs::create_dir(&path).expect("create the scratch directory");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod scratch");
        Scratch { path }
    }

    fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = remove_tree(&self.path) {
            loud(&format!(
                "warning: could not clean up {}: {e}",
                self.path.display()
            ));
        }
    }
}

/// Deletes `path` and everything below it, subvolumes (read-only ones too) included.
fn remove_tree(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return fs::remove_file(path);
    }
    if is_subvolume_root(path)? {
        return BtrfsFs.delete_subvolume(path);
    }
    for entry in fs::read_dir(path)? {
        remove_tree(&entry?.path())?;
    }
    fs::remove_dir(path)
}

fn read(path: &Path) -> Vec<u8> {
    let mut data = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut data))
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    data
}

fn errno(result: io::Result<impl std::fmt::Debug>) -> i32 {
    match result {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e
            .raw_os_error()
            .unwrap_or_else(|| panic!("not an OS error: {e}")),
    }
}

fn assert_invalid_input(result: io::Result<()>, what: &str) {
    match result {
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
        other => panic!("{what}: expected InvalidInput, got {other:?}"),
    }
}

/// A subvolume `name` in `dir` holding `a` ("alpha"), `b` ("beta") and `sub/c` ("gamma").
fn subvolume_with_files(dir: &Path, name: &str) -> PathBuf {
    let sv = dir.join(name);
    BtrfsFs.create_subvolume(&sv).expect("create subvolume");
    BtrfsFs
        .write_new_file(&sv.join("a"), b"alpha", 0o600)
        .expect("write a");
    BtrfsFs
        .write_new_file(&sv.join("b"), b"beta", 0o600)
        .expect("write b");
    fs::create_dir(sv.join("sub")).expect("mkdir sub");
    BtrfsFs
        .write_new_file(&sv.join("sub/c"), b"gamma", 0o600)
        .expect("write sub/c");
    sv
}

/// Every way of changing a read-only snapshot fails with `EROFS`.
fn assert_read_only(snap: &Path) {
    assert!(BtrfsFs.is_readonly(snap).expect("getflags"));
    assert_eq!(
        errno(File::create(snap.join("new"))),
        libc::EROFS,
        "create in ro snapshot"
    );
    let open_rw = OpenOptions::new().write(true).open(snap.join("a"));
    assert_eq!(
        errno(open_rw),
        libc::EROFS,
        "open for writing in ro snapshot"
    );
    assert_eq!(
        errno(fs::remove_file(snap.join("b"))),
        libc::EROFS,
        "unlink in ro snapshot"
    );
    let rename = fs::rename(snap.join("a"), snap.join("a2"));
    assert_eq!(errno(rename), libc::EROFS, "rename in ro snapshot");
    assert_eq!(read(&snap.join("a")), b"alpha");
}

#[test]
fn create_subvolume_makes_a_subvolume_root() {
    let Some(base) = btrfs_dir("create_subvolume_makes_a_subvolume_root") else {
        return;
    };
    let scratch = Scratch::new(&base, "create");
    let sv = scratch.join("sv");
    BtrfsFs.create_subvolume(&sv).unwrap();
    assert!(is_subvolume_root(&sv).unwrap());
    assert_eq!(fs::metadata(&sv).unwrap().ino(), 256);
    assert!(
        fs::read_dir(&sv).unwrap().next().is_none(),
        "a new subvolume is empty"
    );
    assert!(!BtrfsFs.is_readonly(&sv).unwrap());

    BtrfsFs
        .write_new_file(&sv.join("f"), b"data", 0o600)
        .unwrap();
    assert_eq!(read(&sv.join("f")), b"data");
    // write_new_file never replaces.
    let again = BtrfsFs.write_new_file(&sv.join("f"), b"other", 0o600);
    assert_eq!(errno(again), libc::EEXIST);
    assert_eq!(read(&sv.join("f")), b"data");

    // Creating over an existing name fails and leaves it alone.
    assert_eq!(errno(BtrfsFs.create_subvolume(&sv)), libc::EEXIST);
    // The parent must exist.
    let orphan = scratch.join("missing/sv");
    assert_eq!(errno(BtrfsFs.create_subvolume(&orphan)), libc::ENOENT);
}

#[test]
fn readonly_snapshot_contains_files_and_refuses_writes() {
    let Some(base) = btrfs_dir("readonly_snapshot_contains_files_and_refuses_writes") else {
        return;
    };
    let scratch = Scratch::new(&base, "rosnap");
    let sv = subvolume_with_files(&scratch.path, "sv");
    let snap = scratch.join("gen-1");
    BtrfsFs.snapshot(&sv, &snap, true).unwrap();

    assert!(is_subvolume_root(&snap).unwrap());
    assert_eq!(read(&snap.join("a")), b"alpha");
    assert_eq!(read(&snap.join("b")), b"beta");
    assert_eq!(read(&snap.join("sub/c")), b"gamma");
    assert_read_only(&snap);

    // The snapshot is frozen: later changes to the source do not show through.
    BtrfsFs.remove_file(&sv.join("a")).unwrap();
    BtrfsFs
        .write_new_file(&sv.join("a.tmp"), b"alpha 2", 0o600)
        .unwrap();
    BtrfsFs.rename(&sv.join("a.tmp"), &sv.join("b")).unwrap();
    assert_eq!(read(&sv.join("b")), b"alpha 2");
    assert!(!sv.join("a").exists());
    assert_eq!(read(&snap.join("a")), b"alpha");
    assert_eq!(read(&snap.join("b")), b"beta");

    // A snapshot name that exists already is refused.
    assert_eq!(errno(BtrfsFs.snapshot(&sv, &snap, true)), libc::EEXIST);
}

#[test]
fn writable_snapshot_is_independent_of_its_source() {
    let Some(base) = btrfs_dir("writable_snapshot_is_independent_of_its_source") else {
        return;
    };
    let scratch = Scratch::new(&base, "rwsnap");
    let sv = subvolume_with_files(&scratch.path, "sv");
    let snap = scratch.join("work");
    BtrfsFs.snapshot(&sv, &snap, false).unwrap();

    assert!(is_subvolume_root(&snap).unwrap());
    assert!(!BtrfsFs.is_readonly(&snap).unwrap());
    assert_eq!(read(&snap.join("sub/c")), b"gamma");
    BtrfsFs
        .write_new_file(&snap.join("new"), b"only here", 0o600)
        .unwrap();
    BtrfsFs.remove_file(&snap.join("a")).unwrap();
    assert!(!sv.join("new").exists());
    assert_eq!(read(&sv.join("a")), b"alpha");

    // A snapshot of a read-only snapshot can be writable again.
    let ro = scratch.join("ro");
    BtrfsFs.snapshot(&snap, &ro, true).unwrap();
    let rw_again = scratch.join("rw-again");
    BtrfsFs.snapshot(&ro, &rw_again, false).unwrap();
    BtrfsFs
        .write_new_file(&rw_again.join("x"), b"x", 0o600)
        .unwrap();
    assert_eq!(read(&rw_again.join("new")), b"only here");

    // set_readonly toggles the flag both ways.
    BtrfsFs.set_readonly(&rw_again, true).unwrap();
    assert_eq!(errno(File::create(rw_again.join("y"))), libc::EROFS);
    BtrfsFs.set_readonly(&rw_again, false).unwrap();
    File::create(rw_again.join("y")).unwrap();
}

#[test]
fn snapshot_source_must_be_a_subvolume_root() {
    let Some(base) = btrfs_dir("snapshot_source_must_be_a_subvolume_root") else {
        return;
    };
    let scratch = Scratch::new(&base, "notroot");
    let sv = subvolume_with_files(&scratch.path, "sv");
    let result = BtrfsFs.snapshot(&sv.join("sub"), &scratch.join("snap"), true);
    assert_eq!(errno(result), libc::EINVAL);
    assert!(!scratch.join("snap").exists());
}

#[test]
fn delete_readonly_and_writable_snapshots() {
    let Some(base) = btrfs_dir("delete_readonly_and_writable_snapshots") else {
        return;
    };
    let scratch = Scratch::new(&base, "delete");
    let sv = subvolume_with_files(&scratch.path, "sv");
    let ro = scratch.join("gen-1");
    let rw = scratch.join("gen-1-rw");
    BtrfsFs.snapshot(&sv, &ro, true).unwrap();
    BtrfsFs.snapshot(&sv, &rw, false).unwrap();

    let privileged = is_root();
    let ro_how = BtrfsFs.delete_subvolume_reporting(&ro).unwrap();
    let rw_how = BtrfsFs.delete_subvolume_reporting(&rw).unwrap();
    if privileged {
        // CAP_SYS_ADMIN: SNAP_DESTROY directly, without touching the read-only flag.
        assert_eq!(
            ro_how,
            Deletion::Destroyed {
                cleared_readonly: false
            }
        );
        assert_eq!(
            rw_how,
            Deletion::Destroyed {
                cleared_readonly: false
            }
        );
    }
    assert!(!ro.exists() && !rw.exists());
    // The source is untouched, and the names can be reused.
    assert_eq!(read(&sv.join("a")), b"alpha");
    BtrfsFs.snapshot(&sv, &ro, true).unwrap();
    BtrfsFs.delete_subvolume(&ro).unwrap();
    BtrfsFs.delete_subvolume(&sv).unwrap();
    assert!(!sv.exists());

    // Deleting what is not there.
    assert_eq!(errno(BtrfsFs.delete_subvolume(&sv)), libc::ENOENT);
}

#[test]
fn delete_refuses_a_plain_directory() {
    let Some(base) = btrfs_dir("delete_refuses_a_plain_directory") else {
        return;
    };
    let scratch = Scratch::new(&base, "plaindir");
    let dir = scratch.join("dir");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("keep"), b"keep").unwrap();
    let err = BtrfsFs.delete_subvolume(&dir).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    assert_eq!(read(&dir.join("keep")), b"keep", "and must not empty it");
}

#[test]
fn invalid_names_are_rejected_before_the_kernel() {
    for name in [&b""[..], b".", b"..", b"a/b", b"a\0b", b"/"] {
        let name = OsStr::from_bytes(name);
        assert_invalid_input(validate_subvolume_name(name), &format!("{name:?}"));
    }
    let longest = vec![b'n'; SUBVOL_NAME_MAX];
    validate_subvolume_name(OsStr::from_bytes(&longest)).unwrap();
    let too_long = vec![b'n'; SUBVOL_NAME_MAX + 1];
    assert_invalid_input(
        validate_subvolume_name(OsStr::from_bytes(&too_long)),
        "4040 bytes",
    );
    validate_subvolume_name(OsStr::new("gen-000123")).unwrap();

    let Some(base) = btrfs_dir("invalid_names_are_rejected_before_the_kernel") else {
        return;
    };
    let scratch = Scratch::new(&base, "names");
    let sv = subvolume_with_files(&scratch.path, "sv");
    let too_long = scratch.path.join(OsStr::from_bytes(&too_long));
    let with_nul = scratch.path.join(OsStr::from_bytes(b"a\0b"));
    for bad in [
        &too_long,
        &with_nul,
        &PathBuf::from("/"),
        &scratch.join(".."),
    ] {
        assert_invalid_input(BtrfsFs.create_subvolume(bad), "create_subvolume");
        assert_invalid_input(BtrfsFs.snapshot(&sv, bad, true), "snapshot");
        assert_invalid_input(BtrfsFs.delete_subvolume(bad), "delete_subvolume");
    }
    // Valid for the ioctl struct, but longer than btrfs's 255-byte name limit: the kernel
    // refuses it.
    let long = scratch.path.join("x".repeat(256));
    assert_eq!(errno(BtrfsFs.create_subvolume(&long)), libc::ENAMETOOLONG);
    assert_eq!(
        fs::read_dir(&scratch.path).unwrap().count(),
        1,
        "only sv was created"
    );
}

#[test]
fn filesystem_type_names_btrfs_and_tmpfs() {
    assert_eq!(FsType::from_magic(0xEF53).name, "ext2/ext3/ext4");
    assert_eq!(FsType::from_magic(0x5846_5342).name, "xfs");
    assert_eq!(FsType::from_magic(0x1234).name, "unknown");
    let tmpfs = Path::new("/dev/shm");
    if tmpfs.is_dir() {
        let ty = filesystem_type(tmpfs).unwrap();
        assert_eq!((ty.name, ty.magic), ("tmpfs", 0x0102_1994), "{ty}");
        assert!(!ty.is_btrfs());
        assert!(!is_subvolume_root(tmpfs).unwrap());
    } else {
        skip(
            "filesystem_type_names_btrfs_and_tmpfs",
            "/dev/shm does not exist",
        );
    }
    assert_eq!(
        errno(filesystem_type(Path::new("/nonexistent/x"))),
        libc::ENOENT
    );

    let Some(base) = btrfs_dir("filesystem_type_names_btrfs_and_tmpfs") else {
        return;
    };
    let ty = filesystem_type(&base).unwrap();
    assert_eq!((ty.name, ty.magic), ("btrfs", 0x9123_683E), "{ty}");
    assert!(ty.is_btrfs());
    assert_eq!(ty.to_string(), "btrfs (statfs magic 0x9123683e)");
}

#[test]
fn is_subvolume_root_distinguishes_roots() {
    let Some(base) = btrfs_dir("is_subvolume_root_distinguishes_roots") else {
        return;
    };
    let scratch = Scratch::new(&base, "isroot");
    let sv = subvolume_with_files(&scratch.path, "sv");
    let snap = scratch.join("snap");
    BtrfsFs.snapshot(&sv, &snap, true).unwrap();
    assert!(is_subvolume_root(&sv).unwrap());
    assert!(is_subvolume_root(&snap).unwrap());
    assert!(
        !is_subvolume_root(&scratch.path).unwrap(),
        "a plain directory"
    );
    assert!(
        !is_subvolume_root(&sv.join("sub")).unwrap(),
        "a directory inside a subvolume"
    );
    assert!(!is_subvolume_root(&sv.join("a")).unwrap(), "a file");
    assert_eq!(
        errno(is_subvolume_root(&scratch.join("nothing"))),
        libc::ENOENT
    );
    // The mount point of a fresh filesystem is the top-level subvolume's root.
    if fs::metadata(&base).unwrap().ino() == 256 {
        assert!(is_subvolume_root(&base).unwrap());
    }
}

#[test]
fn sync_and_reflink() {
    let Some(base) = btrfs_dir("sync_and_reflink") else {
        return;
    };
    let scratch = Scratch::new(&base, "sync");
    let sv = subvolume_with_files(&scratch.path, "sv");
    BtrfsFs.sync(&sv).unwrap();
    BtrfsFs.sync(&sv.join("a")).unwrap();
    BtrfsFs
        .write_new_file(&sv.join("dirty"), b"dirty", 0o600)
        .unwrap();
    let transid = BtrfsFs.start_sync(&sv).unwrap();
    assert!(transid > 0);
    BtrfsFs.wait_sync(&sv, transid).unwrap();
    assert!(BtrfsFs.start_sync(&sv).unwrap() >= transid);

    // A 1 MiB file cloned within the subvolume and into another subvolume.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    BtrfsFs
        .write_new_file(&sv.join("big"), &data, 0o600)
        .unwrap();
    let other = scratch.join("other");
    BtrfsFs.create_subvolume(&other).unwrap();
    for dest in [sv.join("big.clone"), other.join("big.clone")] {
        let source = File::open(sv.join("big")).unwrap();
        let target = File::create(&dest).unwrap();
        BtrfsFs.reflink(&source, &target).unwrap();
        drop(target);
        assert_eq!(read(&dest), data, "{}", dest.display());
    }
    // Clones are independent files.
    fs::write(other.join("big.clone"), b"changed").unwrap();
    assert_eq!(read(&sv.join("big")), data);

    // FICLONERANGE: the second 64 KiB of `big` over the first 64 KiB of a copy; unaligned
    // ranges are refused.
    let piece = sv.join("piece");
    fs::write(&piece, vec![0u8; 128 << 10]).unwrap();
    let source = File::open(sv.join("big")).unwrap();
    let target = OpenOptions::new().write(true).open(&piece).unwrap();
    BtrfsFs
        .reflink_range(&source, 64 << 10, &target, 0, 64 << 10)
        .unwrap();
    let unaligned = BtrfsFs.reflink_range(&source, 1, &target, 0, 4096);
    assert_eq!(errno(unaligned), libc::EINVAL);
    drop(target);
    let got = read(&piece);
    assert_eq!(got[..64 << 10], data[64 << 10..128 << 10]);
    assert!(got[64 << 10..].iter().all(|&b| b == 0));

    // FICLONE needs a destination open for writing.
    let source = File::open(sv.join("big")).unwrap();
    let read_only = File::open(sv.join("big.clone")).unwrap();
    assert_eq!(errno(BtrfsFs.reflink(&source, &read_only)), libc::EBADF);

    // `Fs::clone_file`, as background merges use it: a file written (and written back) in a
    // plain directory outside any snapshot, cloned into a subvolume as a new file, survives
    // the source's unlink and is in the subvolume's next read-only snapshot. An existing
    // destination is refused.
    let work = scratch.join("work");
    fs::create_dir(&work).unwrap();
    let mut m = BtrfsFs.create_new_file(&work.join("m"), 0o600).unwrap();
    BtrfsFs
        .append_nowait(&mut m, 0, &[IoSlice::new(&data)])
        .unwrap();
    BtrfsFs.write_back(&work.join("m")).unwrap();
    BtrfsFs
        .clone_file(&work.join("m"), &other.join("m"), 0o600)
        .unwrap();
    let again = BtrfsFs.clone_file(&work.join("m"), &other.join("m"), 0o600);
    assert_eq!(errno(again), libc::EEXIST);
    BtrfsFs.remove_file(&work.join("m")).unwrap();
    BtrfsFs
        .snapshot(&other, &scratch.join("other-snap"), true)
        .unwrap();
    assert_eq!(read(&other.join("m")), data);
    assert_eq!(read(&scratch.join("other-snap").join("m")), data);

    // A file given as many pieces in several appends (as a segment is written: runs of
    // blocks, each block's entries then its trailer) holds them in order: appends of more
    // pieces than one `writev` takes, of empty pieces only, and of nothing.
    let pieces: Vec<Vec<u8>> = (0..3_000u32)
        .map(|i| {
            let len = (i.wrapping_mul(2_654_435_761) % 5_000) as usize * usize::from(i % 7 != 0);
            (0..len).map(|j| (i as usize + j) as u8).collect()
        })
        .collect();
    let slices: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
    let mut file = BtrfsFs
        .create_new_file(&work.join("pieces"), 0o600)
        .unwrap();
    let mut start = 0u64;
    for run in [0..1_505, 1_505..1_505, 1_505..1_506, 1_506..3_000] {
        let run = &slices[run];
        BtrfsFs.append_nowait(&mut file, start, run).unwrap();
        start += run.iter().map(|p| p.len() as u64).sum::<u64>();
    }
    assert!(
        pieces[1_505].is_empty(),
        "an append of an empty piece alone"
    );
    drop(file);
    BtrfsFs.write_back(&work.join("pieces")).unwrap();
    let whole = pieces.concat();
    assert!(whole.len() > 4 << 20, "{} bytes", whole.len());
    assert_eq!(read(&work.join("pieces")), whole);
}

/// Whether `path` has the nodatacow attribute (`C` in `lsattr -d`).
fn is_nodatacow(path: &Path) -> bool {
    let out = run(Command::new("lsattr").arg("-d").arg(path));
    let attrs = out
        .split_whitespace()
        .next()
        .expect("lsattr prints the attributes");
    attrs.contains('C')
}

/// `Fs::clone_file` from a plain directory into a nodatacow (`chattr +C`) one and back: btrfs
/// refuses to clone between a file with data checksums and one without, so the new file must
/// be given the source's flag (`FS_IOC_GETFLAGS`, then `FS_IOC_SETFLAGS` on the empty
/// destination) whatever its directory would give it.
#[test]
fn clone_file_between_nodatacow_and_plain_directories() {
    let Some(base) = btrfs_dir("clone_nodatacow") else {
        return;
    };
    let scratch = Scratch::new(&base, "nodatacow");
    let plain = scratch.join("plain");
    let nocow = scratch.join("nocow");
    fs::create_dir(&plain).unwrap();
    fs::create_dir(&nocow).unwrap();
    run(Command::new("chattr").arg("+C").arg(&nocow));
    assert!(is_nodatacow(&nocow) && !is_nodatacow(&plain));
    let data: Vec<u8> = (0..256u32 << 10).map(|i| (i % 253) as u8).collect();
    for (from, to, source_nocow) in [(&plain, &nocow, false), (&nocow, &plain, true)] {
        let src = from.join("src");
        BtrfsFs.write_new_file(&src, &data, 0o600).unwrap();
        assert_eq!(is_nodatacow(&src), source_nocow, "{}", src.display());
        let dst = to.join("dst");
        BtrfsFs.clone_file(&src, &dst, 0o600).unwrap();
        assert_eq!(is_nodatacow(&dst), source_nocow, "{}", dst.display());
        assert_eq!(read(&dst), data, "{}", dst.display());
    }
}

// ---- Unprivileged use ----------------------------------------------------------------------

/// Whether this process runs as root (effective uid 0), from /proc/self/status.
fn is_root() -> bool {
    euid() == 0
}

fn euid() -> u32 {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("Uid line");
    // "Uid:\treal\teffective\tsaved\tfs"
    line.split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .expect("effective uid")
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Checks what the unprivileged tests need; `None` (after a SKIP line) if they cannot run.
fn unprivileged_setup(test: &str) -> Option<PathBuf> {
    let base = btrfs_dir(test)?;
    if !is_root() {
        skip(
            test,
            "needs root (to run a child as uid 65534 and to mount)",
        );
        return None;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip(test, "setpriv (util-linux) not found");
        return None;
    }
    // The unprivileged child must be able to walk down to the btrfs directory.
    let base = base.canonicalize().expect("canonicalize BUTTER_BTRFS_DIR");
    for dir in base.ancestors() {
        let mode = fs::metadata(dir)
            .expect("stat an ancestor")
            .permissions()
            .mode();
        if mode & 0o001 == 0 {
            let why = format!(
                "uid {NOBODY} cannot reach {DIR_VAR}: {} is mode {:o}",
                dir.display(),
                mode & 0o7777
            );
            skip(test, &why);
            return None;
        }
    }
    Some(base)
}

/// Runs `unprivileged_child` in a copy of this test binary as uid/gid 65534 with no
/// supplementary groups, playing `role` in `dir`, and returns its stdout.
fn run_as_nobody(scratch: &Scratch, role: &str, dir: &Path) -> String {
    // A copy in a world-readable place: the build directory may not be reachable for nobody.
    let exe = scratch.join(&format!("test-binary-{role}"));
    fs::copy(std::env::current_exe().expect("current_exe"), &exe).expect("copy test binary");
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).expect("chmod test binary");
    let stdout = run(butter_test_support::as_user(NOBODY, &exe)
        .args([
            "--exact",
            "--ignored",
            "unprivileged_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE_VAR, role)
        .env(CHILD_DIR_VAR, dir));
    fs::remove_file(&exe).expect("remove the copied binary");
    let done = format!("UNPRIVILEGED CHILD DONE: {role}");
    assert!(
        stdout.contains(&done),
        "the child did not finish its checks:\n{stdout}"
    );
    println!("--- child as uid {NOBODY} ({role}) ---\n{stdout}");
    stdout
}

/// A directory owned by [`NOBODY`], holding a root-owned subvolume `root-owned`.
fn nobody_dir(parent: &Path) -> PathBuf {
    let dir = parent.join("nobody");
    fs::create_dir(&dir).unwrap();
    BtrfsFs.create_subvolume(&dir.join("root-owned")).unwrap();
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

/// The paths of the subvolumes `btrfs subvolume list` reports under `mount`.
fn listed_subvolumes(mount: &Path) -> Vec<String> {
    let out = run(Command::new("btrfs").args(["subvolume", "list"]).arg(mount));
    out.lines()
        .filter_map(|l| l.split(" path ").nth(1))
        .map(str::to_owned)
        .collect()
}

#[test]
fn unprivileged_without_user_subvol_rm_allowed() {
    let test = "unprivileged_without_user_subvol_rm_allowed";
    let Some(base) = unprivileged_setup(test) else {
        return;
    };
    let options = fs::read_to_string("/proc/self/mounts").unwrap();
    let base_str = base.canonicalize().unwrap().to_string_lossy().into_owned();
    let mount_line = options
        .lines()
        .find(|l| l.split(' ').nth(1) == Some(base_str.as_str()));
    if mount_line.is_some_and(|l| l.contains("user_subvol_rm_allowed")) {
        skip(
            test,
            "BUTTER_BTRFS_DIR is mounted with user_subvol_rm_allowed",
        );
        return;
    }
    let scratch = Scratch::new(&base, "unpriv");
    let dir = nobody_dir(&scratch.path);
    run_as_nobody(&scratch, "no-rm-allowed", &dir);

    // Check as root: the subvolumes the child deleted are gone from the filesystem.
    // `btrfs subvolume list` names paths from the filesystem's top level, which is above `base`
    // when BUTTER_BTRFS_DIR is a directory inside the mount: match from our directory's name on.
    let listed = listed_subvolumes(&base);
    let prefix = format!("ioctls-{}-unpriv/nobody/", std::process::id());
    let ours: Vec<&str> = listed
        .iter()
        .filter_map(|p| p.find(&prefix).map(|at| &p[at..]))
        .collect();
    assert_eq!(
        ours,
        [format!("{prefix}root-owned")],
        "all listed: {listed:?}"
    );
}

#[test]
fn unprivileged_with_user_subvol_rm_allowed() {
    let test = "unprivileged_with_user_subvol_rm_allowed";
    let Some(base) = unprivileged_setup(test) else {
        return;
    };
    let scratch = Scratch::new(&base, "unpriv-rm");
    let mount = LoopMount::new(&scratch.path, "user_subvol_rm_allowed,noatime");
    let dir = nobody_dir(&mount.mnt);
    run_as_nobody(&scratch, "rm-allowed", &dir);
    let listed = listed_subvolumes(&mount.mnt);
    assert_eq!(listed, ["nobody/root-owned"]);
    drop(mount);
}

/// A small btrfs image, loop-mounted with `options` under `parent`; unmounted, detached and
/// deleted on drop.
struct LoopMount {
    img: PathBuf,
    mnt: PathBuf,
    loop_dev: String,
    mounted: bool,
}

impl LoopMount {
    fn new(parent: &Path, options: &str) -> LoopMount {
        let img = parent.join("small.img");
        let mnt = parent.join("mnt");
        File::create(&img).unwrap().set_len(256 << 20).unwrap();
        run(Command::new("mkfs.btrfs")
            .args(["-q", "-f", "-m", "single"])
            .arg(&img));
        fs::create_dir(&mnt).unwrap();
        let out = run(Command::new("losetup").args(["-f", "--show"]).arg(&img));
        let mut this = LoopMount {
            img,
            mnt,
            loop_dev: out.trim().to_owned(),
            mounted: false,
        };
        run(Command::new("mount")
            .args(["-o", options, &this.loop_dev])
            .arg(&this.mnt));
        this.mounted = true;
        fs::set_permissions(&this.mnt, fs::Permissions::from_mode(0o755)).unwrap();
        this
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let mut steps: Vec<Command> = Vec::new();
        if self.mounted {
            let mut umount = Command::new("umount");
            umount.arg(&self.mnt);
            steps.push(umount);
        }
        let mut detach = Command::new("losetup");
        detach.args(["-d", &self.loop_dev]);
        steps.push(detach);
        for mut step in steps {
            match step.status() {
                Ok(s) if s.success() => {}
                other => loud(&format!("warning: cleanup {step:?}: {other:?}")),
            }
        }
        for result in [fs::remove_dir(&self.mnt), fs::remove_file(&self.img)] {
            if let Err(e) = result {
                loud(&format!("warning: cleanup of the small btrfs image: {e}"));
            }
        }
    }
}

/// Not a test by itself: the body of the unprivileged tests, run by them in a child process as
/// uid 65534 (`BUTTER_UNPRIV_ROLE` set). Ignored, so a test run lists it as ignored instead of
/// counting a pass; the parent runs it with `--ignored`.
#[test]
#[ignore = "the child process of the unprivileged tests, run by them"]
fn unprivileged_child() {
    let role = std::env::var_os(ROLE_VAR).expect(
        "BUTTER_UNPRIV_ROLE: this is the unprivileged tests' child, not a test to run alone",
    );
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR_VAR).expect("BUTTER_UNPRIV_DIR"));
    assert_eq!(euid(), NOBODY, "the child must run unprivileged");
    let rm_allowed = match role.to_str() {
        Some("no-rm-allowed") => false,
        Some("rm-allowed") => true,
        other => panic!("unknown role {other:?}"),
    };

    // Creating subvolumes and snapshots of one's own subvolumes needs no privilege.
    let sv = subvolume_with_files(&dir, "live");
    let ro = dir.join("gen-1");
    BtrfsFs.snapshot(&sv, &ro, true).unwrap();
    assert_eq!(read(&ro.join("sub/c")), b"gamma");
    assert_read_only(&ro);
    let rw = dir.join("gen-1-rw");
    BtrfsFs.snapshot(&sv, &rw, false).unwrap();
    BtrfsFs
        .write_new_file(&rw.join("more"), b"more", 0o600)
        .unwrap();
    BtrfsFs.sync(&dir).unwrap();

    // ...but a snapshot of somebody else's subvolume does.
    let theirs = BtrfsFs.snapshot(&dir.join("root-owned"), &dir.join("stolen"), true);
    assert_eq!(errno(theirs), libc::EPERM);
    assert!(!dir.join("stolen").exists());

    // A plain directory is never emptied by delete_subvolume.
    let plain = dir.join("plain");
    fs::create_dir(&plain).unwrap();
    fs::write(plain.join("keep"), b"keep").unwrap();
    // Refused by the kernel (EINVAL) or, when SNAP_DESTROY is not allowed at all, by the
    // subvolume-root check before the fallback.
    let err = BtrfsFs.delete_subvolume(&plain).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    assert_eq!(read(&plain.join("keep")), b"keep");

    // Nested: a subvolume inside the writable snapshot, and a read-only snapshot inside that.
    let nested = rw.join("nested");
    BtrfsFs.create_subvolume(&nested).unwrap();
    BtrfsFs
        .write_new_file(&nested.join("n"), b"n", 0o600)
        .unwrap();
    BtrfsFs
        .snapshot(&nested, &nested.join("nested-ro"), true)
        .unwrap();

    let ro_how = BtrfsFs.delete_subvolume_reporting(&ro).unwrap();
    let rw_how = BtrfsFs.delete_subvolume_reporting(&rw).unwrap();
    let sv_how = BtrfsFs.delete_subvolume_reporting(&sv).unwrap();
    if rm_allowed {
        // SNAP_DESTROY is allowed, but not on a read-only subvolume (EROFS): the flag is
        // cleared first. `rw` holds nested subvolumes (ENOTEMPTY): those go first.
        assert_eq!(
            ro_how,
            Deletion::Destroyed {
                cleared_readonly: true
            }
        );
        assert_eq!(
            rw_how,
            Deletion::Destroyed {
                cleared_readonly: false
            }
        );
        assert_eq!(
            sv_how,
            Deletion::Destroyed {
                cleared_readonly: false
            }
        );
    } else {
        // SNAP_DESTROY is refused (EPERM): cleared, emptied and rmdir'ed.
        assert_eq!(
            ro_how,
            Deletion::EmptiedAndRemoved {
                cleared_readonly: true
            }
        );
        assert_eq!(
            rw_how,
            Deletion::EmptiedAndRemoved {
                cleared_readonly: false
            }
        );
        assert_eq!(
            sv_how,
            Deletion::EmptiedAndRemoved {
                cleared_readonly: false
            }
        );
    }
    println!("deleted: ro {ro_how:?}, rw {rw_how:?}, live {sv_how:?}");
    for gone in [&ro, &rw, &sv] {
        assert!(!gone.exists(), "{} still exists", gone.display());
    }
    fs::remove_file(plain.join("keep")).unwrap();
    fs::remove_dir(&plain).unwrap();
    println!("UNPRIVILEGED CHILD DONE: {}", role.to_string_lossy());
}
