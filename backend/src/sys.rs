//! Raw btrfs and VFS ioctls, `statfs`, and a child's private mount namespace: the only unsafe
//! code in the crate.
//!
//! Every function here is a safe wrapper: it takes borrowed file descriptors (which are open for
//! the duration of the call by construction) and validated names, and returns `io::Result`.
//! Struct layouts and request numbers follow the kernel's `include/uapi/linux/btrfs.h` and
//! `include/uapi/linux/fs.h` (tabulated in `docs/background.md` §2.7): the layouts are checked
//! at compile time, the request numbers by a unit test. The calls go through `rustix::ioctl`.

// The workspace denies `unsafe_code`; this module is the single, reviewed exception (style rule
// 8). Each `unsafe` block below states why it is sound.
#![allow(
    unsafe_code,
    reason = "btrfs ioctls have no safe interface; this is the one place"
)]

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::ioctl::{
    ioctl, CompileTimeOpcode, Getter, NoArg, NoneOpcode, ReadOpcode, ReadWriteOpcode, Setter,
    Updater, WriteOpcode,
};

/// The ioctl type byte shared by all btrfs ioctls (`BTRFS_IOCTL_MAGIC`) and by `FICLONE`.
const BTRFS_IOCTL_MAGIC: u8 = 0x94;

/// `BTRFS_SUBVOL_RDONLY`: a read-only snapshot (creation flag), and the read-only bit of
/// `SUBVOL_GETFLAGS`/`SUBVOL_SETFLAGS`.
pub const BTRFS_SUBVOL_RDONLY: u64 = 1 << 1;

/// `BTRFS_PATH_NAME_MAX`: `btrfs_ioctl_vol_args.name` is 4088 bytes including the NUL.
const BTRFS_PATH_NAME_MAX: usize = 4087;

/// `BTRFS_SUBVOL_NAME_MAX`: `btrfs_ioctl_vol_args_v2.name` is 4040 bytes including the NUL.
pub const SUBVOL_NAME_MAX: usize = 4039;

/// On btrfs the root directory of every subvolume has inode number 256
/// (`BTRFS_FIRST_FREE_OBJECTID`).
const BTRFS_SUBVOL_ROOT_INO: u64 = 256;

/// `struct btrfs_ioctl_vol_args` from `include/uapi/linux/btrfs.h`: used by the v1
/// `BTRFS_IOC_SNAP_DESTROY`.
#[allow(non_camel_case_types, reason = "named as in the kernel uapi header")]
#[repr(C)]
struct btrfs_ioctl_vol_args {
    /// `__s64 fd`: unused by `SNAP_DESTROY`.
    fd: i64,
    /// `char name[BTRFS_PATH_NAME_MAX + 1]`, NUL-terminated.
    name: [u8; BTRFS_PATH_NAME_MAX + 1],
}

/// `struct btrfs_ioctl_vol_args_v2` from `include/uapi/linux/btrfs.h`: used by
/// `SNAP_CREATE_V2`, `SUBVOL_CREATE_V2` and `SNAP_DESTROY_V2`.
#[allow(non_camel_case_types, reason = "named as in the kernel uapi header")]
#[repr(C)]
struct btrfs_ioctl_vol_args_v2 {
    /// `__s64 fd`: the source subvolume root for `SNAP_CREATE_V2`.
    fd: i64,
    /// `__u64 transid`: filled only by the removed `BTRFS_SUBVOL_CREATE_ASYNC`.
    transid: u64,
    /// `__u64 flags`: `BTRFS_SUBVOL_RDONLY` or 0 here.
    flags: u64,
    /// The union `{ __u64 size; struct btrfs_qgroup_inherit *qgroup_inherit; }` /
    /// `__u64 unused[4]`; always zero (no qgroup inheritance).
    unused: [u64; 4],
    /// The union `{ char name[BTRFS_SUBVOL_NAME_MAX + 1]; __u64 devid; __u64 subvolid; }`;
    /// only the NUL-terminated name is used here.
    name: [u8; SUBVOL_NAME_MAX + 1],
}

/// `struct file_clone_range` from `include/uapi/linux/fs.h`: the argument of `FICLONERANGE`.
#[allow(non_camel_case_types, reason = "named as in the kernel uapi header")]
#[repr(C)]
struct file_clone_range {
    /// `__s64 src_fd`.
    src_fd: i64,
    /// `__u64 src_offset`.
    src_offset: u64,
    /// `__u64 src_length`: 0 means "to the end of the source".
    src_length: u64,
    /// `__u64 dest_offset`.
    dest_offset: u64,
}

/// `struct btrfs_ioctl_send_args` from `include/uapi/linux/btrfs.h`: the argument of
/// `BTRFS_IOC_SEND`.
#[allow(non_camel_case_types, reason = "named as in the kernel uapi header")]
#[repr(C)]
struct btrfs_ioctl_send_args {
    /// `__s64 send_fd`: where the kernel writes the stream.
    send_fd: i64,
    /// `__u64 clone_sources_count`.
    clone_sources_count: u64,
    /// `__u64 __user *clone_sources`: root ids of subvolumes the stream may clone from.
    clone_sources: *const u64,
    /// `__u64 parent_root`: the root id the stream is a difference from, or 0 for a full one.
    parent_root: u64,
    /// `__u64 flags`: 0 (a stream with its header and end command).
    flags: u64,
    /// `__u32 version`: 0 is the kernel's default protocol (1).
    version: u32,
    /// `__u8 reserved[28]`, zero.
    reserved: [u8; 28],
}

/// `struct btrfs_ioctl_ino_lookup_args` from `include/uapi/linux/btrfs.h`: the argument of
/// `BTRFS_IOC_INO_LOOKUP`.
#[allow(non_camel_case_types, reason = "named as in the kernel uapi header")]
#[repr(C)]
struct btrfs_ioctl_ino_lookup_args {
    /// `__u64 treeid`: 0 asks for the tree (subvolume) of the descriptor's inode.
    treeid: u64,
    /// `__u64 objectid`: `BTRFS_FIRST_FREE_OBJECTID` asks for no path (no privilege needed).
    objectid: u64,
    /// `char name[BTRFS_INO_LOOKUP_PATH_MAX]`: the path the kernel writes (empty here).
    name: [u8; 4080],
}

// include/uapi/linux/btrfs.h: `btrfs_ioctl_send_args` is 72 bytes with a 64-bit pointer, and
// `btrfs_ioctl_ino_lookup_args` 4096.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<btrfs_ioctl_send_args>() == 72);
const _: () = assert!(std::mem::offset_of!(btrfs_ioctl_send_args, version) == 40);
const _: () = assert!(size_of::<btrfs_ioctl_ino_lookup_args>() == 4096);

// include/uapi/linux/fs.h: `struct file_clone_range` is four 64-bit fields, 32 bytes.
const _: () = assert!(size_of::<file_clone_range>() == 32);

// include/uapi/linux/btrfs.h: both vol-args structs are exactly 4096 bytes (the kernel copies
// that many bytes from user memory), with the name at offset 8 (v1) or 56 (v2).
const _: () = assert!(size_of::<btrfs_ioctl_vol_args>() == 4096);
const _: () = assert!(size_of::<btrfs_ioctl_vol_args_v2>() == 4096);
const _: () = assert!(std::mem::offset_of!(btrfs_ioctl_vol_args, name) == 8);
const _: () = assert!(std::mem::offset_of!(btrfs_ioctl_vol_args_v2, name) == 56);

impl btrfs_ioctl_vol_args {
    fn with_name(name: &OsStr) -> io::Result<Self> {
        let bytes = checked_name(name, BTRFS_PATH_NAME_MAX)?;
        let mut args = Self {
            fd: 0,
            name: [0; BTRFS_PATH_NAME_MAX + 1],
        };
        // The length was checked above (at most the array's length - 1): the rest stays NUL.
        for (dst, src) in args.name.iter_mut().zip(bytes) {
            *dst = *src;
        }
        Ok(args)
    }
}

impl btrfs_ioctl_vol_args_v2 {
    fn with_name(name: &OsStr) -> io::Result<Self> {
        let bytes = checked_name(name, SUBVOL_NAME_MAX)?;
        let mut args = Self {
            fd: 0,
            transid: 0,
            flags: 0,
            unused: [0; 4],
            name: [0; SUBVOL_NAME_MAX + 1],
        };
        // The length was checked above (at most the array's length - 1): the rest stays NUL.
        for (dst, src) in args.name.iter_mut().zip(bytes) {
            *dst = *src;
        }
        Ok(args)
    }
}

// The request numbers, as rustix opcode types: `WriteOpcode<M, N, T>` is the kernel's
// `_IOW(M, N, T)`, `ReadOpcode` is `_IOR` and `NoneOpcode<M, N, ()>` is `_IO(M, N)`; the size
// field comes from the argument type, so a wrong struct layout changes the number. The test
// `request_numbers_match_the_uapi_headers` below checks each against the kernel's value.
type SnapDestroy = WriteOpcode<BTRFS_IOCTL_MAGIC, 15, btrfs_ioctl_vol_args>;
type SnapCreateV2 = WriteOpcode<BTRFS_IOCTL_MAGIC, 23, btrfs_ioctl_vol_args_v2>;
type SubvolCreateV2 = WriteOpcode<BTRFS_IOCTL_MAGIC, 24, btrfs_ioctl_vol_args_v2>;
type SnapDestroyV2 = WriteOpcode<BTRFS_IOCTL_MAGIC, 63, btrfs_ioctl_vol_args_v2>;
type SubvolGetflags = ReadOpcode<BTRFS_IOCTL_MAGIC, 25, u64>;
type InoLookup = ReadWriteOpcode<BTRFS_IOCTL_MAGIC, 18, btrfs_ioctl_ino_lookup_args>;
type SendStream = WriteOpcode<BTRFS_IOCTL_MAGIC, 38, btrfs_ioctl_send_args>;
type SubvolSetflags = WriteOpcode<BTRFS_IOCTL_MAGIC, 26, u64>;
type BtrfsSync = NoneOpcode<BTRFS_IOCTL_MAGIC, 8, ()>;
type StartSync = ReadOpcode<BTRFS_IOCTL_MAGIC, 24, u64>;
type WaitSync = WriteOpcode<BTRFS_IOCTL_MAGIC, 22, u64>;
// include/uapi/linux/fs.h: FICLONE is `_IOW(0x94, 9, int)` and FICLONERANGE
// `_IOW(0x94, 13, struct file_clone_range)`.
type Ficlone = WriteOpcode<BTRFS_IOCTL_MAGIC, 9, libc::c_int>;
type FicloneRange = WriteOpcode<BTRFS_IOCTL_MAGIC, 13, file_clone_range>;
// FS_IOC_GETFLAGS/SETFLAGS are declared `_IOR('f', 1, long)` / `_IOW('f', 2, long)` but pass an
// `int` (fs/ioctl.c): the request numbers name `long`, the argument below is a `c_int`.
type FsIocGetflags = ReadOpcode<b'f', 1, libc::c_long>;
type FsIocSetflags = WriteOpcode<b'f', 2, libc::c_long>;

/// `FS_NOCOW_FL` from `include/uapi/linux/fs.h`: the file is nodatacow (`chattr +C`), and on
/// btrfs also has no data checksums. Settable only while the file is empty.
pub const FS_NOCOW_FL: u32 = 0x0080_0000;

fn invalid_name(name: &OsStr, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("invalid subvolume name {:?}: {why}", name.to_string_lossy()),
    )
}

/// Checks `name` for use as a single directory entry in a vol-args struct of capacity `max`
/// bytes (without the NUL) and returns its bytes.
fn checked_name(name: &OsStr, max: usize) -> io::Result<&[u8]> {
    let bytes = name.as_bytes();
    if bytes.is_empty() {
        return Err(invalid_name(name, "empty"));
    }
    if bytes.len() > max {
        return Err(invalid_name(
            name,
            &format!(
                "{} bytes, more than the ioctl's limit of {max}",
                bytes.len()
            ),
        ));
    }
    if bytes.contains(&b'/') {
        return Err(invalid_name(name, "contains '/'"));
    }
    if bytes.contains(&0) {
        return Err(invalid_name(name, "contains a NUL byte"));
    }
    if bytes == b"." || bytes == b".." {
        return Err(invalid_name(name, "'.' and '..' are not names"));
    }
    Ok(bytes)
}

/// Checks that `name` can name a subvolume or snapshot in the v2 ioctls: not empty, at most
/// [`SUBVOL_NAME_MAX`] bytes, no `/` or NUL, not `.` or `..`. Errors are
/// [`io::ErrorKind::InvalidInput`]. The kernel may still refuse a valid name (e.g. longer than
/// the filesystem's 255-byte `NAME_MAX`, or already existing).
pub fn validate_subvolume_name(name: &OsStr) -> io::Result<()> {
    checked_name(name, SUBVOL_NAME_MAX).map(|_| ())
}

/// `BTRFS_IOC_SUBVOL_CREATE_V2`: creates the empty subvolume `name` in the directory `parent`.
pub fn subvol_create(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let args = btrfs_ioctl_vol_args_v2::with_name(name)?;
    // SAFETY: `parent` is an open fd for the whole call (it is borrowed); the request takes a
    // pointer to a `btrfs_ioctl_vol_args_v2`, the type the opcode encodes and the Setter passes
    // (fully initialised); the kernel only reads it.
    unsafe { ioctl(parent, Setter::<SubvolCreateV2, _>::new(args)) }?;
    Ok(())
}

/// `BTRFS_IOC_SNAP_CREATE_V2`: snapshots the subvolume whose root directory is open as
/// `source_root` to `name` in the directory `dest_parent`, read-only if `readonly`.
///
/// The call commits a btrfs transaction: the snapshot is durable when it returns.
pub fn snap_create(
    dest_parent: BorrowedFd<'_>,
    source_root: BorrowedFd<'_>,
    name: &OsStr,
    readonly: bool,
) -> io::Result<()> {
    let mut args = btrfs_ioctl_vol_args_v2::with_name(name)?;
    args.fd = i64::from(source_root.as_raw_fd());
    args.flags = if readonly { BTRFS_SUBVOL_RDONLY } else { 0 };
    // SAFETY: both fds are open for the whole call (borrowed); the request takes a pointer to a
    // `btrfs_ioctl_vol_args_v2`, the type the opcode encodes and the Setter passes (fully
    // initialised); the kernel only reads it (the removed async mode was the only writer of
    // `transid`).
    unsafe { ioctl(dest_parent, Setter::<SnapCreateV2, _>::new(args)) }?;
    Ok(())
}

/// `BTRFS_IOC_SNAP_DESTROY_V2` by name: deletes the subvolume `name` in the directory `parent`.
/// Needs `CAP_SYS_ADMIN`, or the `user_subvol_rm_allowed` mount option and write access to a
/// writable subvolume. Does not commit.
pub fn snap_destroy_v2(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let args = btrfs_ioctl_vol_args_v2::with_name(name)?;
    // SAFETY: `parent` is open for the whole call (borrowed); the request takes a pointer to a
    // `btrfs_ioctl_vol_args_v2`, the type the opcode encodes and the Setter passes (fully
    // initialised, flags 0: by name); the kernel only reads it.
    unsafe { ioctl(parent, Setter::<SnapDestroyV2, _>::new(args)) }?;
    Ok(())
}

/// `BTRFS_IOC_SNAP_DESTROY` (v1, for kernels before 5.7): as [`snap_destroy_v2`].
pub fn snap_destroy_v1(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let args = btrfs_ioctl_vol_args::with_name(name)?;
    // SAFETY: `parent` is open for the whole call (borrowed); the request takes a pointer to a
    // `btrfs_ioctl_vol_args`, the type the opcode encodes and the Setter passes (fully
    // initialised); the kernel only reads it.
    unsafe { ioctl(parent, Setter::<SnapDestroy, _>::new(args)) }?;
    Ok(())
}

/// `BTRFS_IOC_SUBVOL_GETFLAGS` on an open subvolume root: its flags (see
/// [`BTRFS_SUBVOL_RDONLY`]).
pub fn subvol_flags(root: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: `root` is open for the whole call (borrowed); on success the kernel has written
    // the whole u64 the Getter holds (the size the request encodes), which is what it returns.
    let flags = unsafe { ioctl(root, Getter::<SubvolGetflags, u64>::new()) }?;
    Ok(flags)
}

/// `BTRFS_IOC_SUBVOL_SETFLAGS` on an open subvolume root. Allowed for the owner of the
/// subvolume; changing the read-only bit commits a transaction.
pub fn set_subvol_flags(root: BorrowedFd<'_>, flags: u64) -> io::Result<()> {
    // SAFETY: `root` is open for the whole call (borrowed); the request takes a pointer to a
    // u64, which the Setter holds; the kernel only reads it.
    unsafe { ioctl(root, Setter::<SubvolSetflags, u64>::new(flags)) }?;
    Ok(())
}

/// The id of the subvolume (its root tree) that the open file or directory `fd` is in
/// (`BTRFS_IOC_INO_LOOKUP` with tree 0 and no path asked: allowed without privilege).
pub fn subvolume_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut args = btrfs_ioctl_ino_lookup_args {
        treeid: 0,
        objectid: BTRFS_SUBVOL_ROOT_INO,
        name: [0; 4080],
    };
    // SAFETY: `fd` is open for the whole call (borrowed); the request takes a pointer to a
    // `btrfs_ioctl_ino_lookup_args` (the size the opcode encodes), which the Updater borrows
    // mutably for the call; it is fully initialised, and the kernel writes only within it.
    unsafe { ioctl(fd, Updater::<InoLookup, _>::new(&mut args)) }?;
    Ok(args.treeid)
}

/// `BTRFS_IOC_SEND`: writes the read-only subvolume open as `subvolume` to `out` as a send
/// stream, the difference from the subvolume `parent` (a root id, [`subvolume_id`]) if given.
/// Needs `CAP_SYS_ADMIN`. The kernel writes the whole stream before the call returns (on a
/// pipe, it blocks while the pipe is full; a pipe without reader fails with `EPIPE`).
pub fn send(subvolume: BorrowedFd<'_>, out: BorrowedFd<'_>, parent: Option<u64>) -> io::Result<()> {
    let sources: [u64; 1] = [parent.unwrap_or(0)];
    let args = btrfs_ioctl_send_args {
        send_fd: i64::from(out.as_raw_fd()),
        clone_sources_count: u64::from(parent.is_some()),
        clone_sources: if parent.is_some() {
            sources.as_ptr()
        } else {
            std::ptr::null()
        },
        parent_root: parent.unwrap_or(0),
        flags: 0,
        version: 0,
        reserved: [0; 28],
    };
    // SAFETY: `subvolume` and `out` are open for the whole call (borrowed); the request takes a
    // pointer to a `btrfs_ioctl_send_args` (the size the opcode encodes), which the Setter
    // holds, fully initialised; its `clone_sources` is null with a count of 0, or points to
    // `sources`, one u64 that lives until this function returns; the kernel only reads both.
    unsafe { ioctl(subvolume, Setter::<SendStream, _>::new(args)) }?;
    Ok(())
}

/// Where [`output_in_private_mount`] shows the directory to its child: a name in a tmpfs of
/// the child's own, on `/tmp` of the child's own mount namespace. No other process can see it,
/// nor rename or replace any component of the path.
pub const PRIVATE_MOUNT: &str = "/tmp/butter-mount";

/// Runs `cmd` to completion, as [`Command::output`] does, with the open directory `dir` mounted
/// at [`PRIVATE_MOUNT`] in a mount namespace of the child's own, so that a program that works
/// by path (`btrfs receive`) can be given a path nobody else can redirect.
///
/// This process first clones `dir` as a detached mount (`open_tree(OPEN_TREE_CLONE)` on the
/// handle: no path is looked up). Between fork and exec the child then:
/// 1. enters a new mount namespace (`unshare(CLONE_NEWNS)`);
/// 2. makes every mount in it private, so that nothing it mounts reaches the caller's namespace;
/// 3. mounts a new tmpfs (mode 0700) on `/tmp` and makes `butter-mount` in it;
/// 4. attaches the detached mount there (`move_mount`). A plain bind mount of `dir` would be
///    refused (`EINVAL`): `dir` is on a mount of the namespace the child has just left.
///
/// The mounts end with the child. Needs `CAP_SYS_ADMIN` (`EPERM` without it).
///
/// [`Command::output`]: std::process::Command::output
pub fn output_in_private_mount(
    cmd: &mut std::process::Command,
    dir: BorrowedFd<'_>,
) -> io::Result<std::process::Output> {
    use rustix::fs::{mkdir, Mode, CWD};
    use rustix::mount::{
        mount, mount_change, move_mount, open_tree, MountFlags, MountPropagationFlags,
        MoveMountFlags, OpenTreeFlags,
    };
    use rustix::thread::{unshare, UnshareFlags};
    use std::os::unix::process::CommandExt;
    let tree = open_tree(
        dir,
        c"",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH,
    )?;
    let tree_fd = tree.as_raw_fd();
    let setup = move || -> io::Result<()> {
        // SAFETY: `tree_fd` is `tree`, which this function holds open until the child has
        // exited; the child runs this before exec, so its copy of the descriptor is open too.
        let tree = unsafe { BorrowedFd::borrow_raw(tree_fd) };
        unshare(UnshareFlags::NEWNS)?;
        mount_change(
            c"/",
            MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
        )?;
        let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        mount(c"tmpfs", c"/tmp", c"tmpfs", flags, c"mode=0700")?;
        mkdir(PRIVATE_MOUNT_C, Mode::RWXU)?;
        move_mount(
            tree,
            c"",
            CWD,
            PRIVATE_MOUNT_C,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )?;
        Ok(())
    };
    // SAFETY: `pre_exec` runs `setup` in the forked child before exec, where only
    // async-signal-safe work is allowed. `setup` only makes system calls (unshare, mount,
    // mkdir, move_mount) through rustix with static C strings and a descriptor number; it
    // allocates nothing, takes no lock and touches no state shared with the parent's other
    // threads.
    unsafe { cmd.pre_exec(setup) };
    let out = cmd.output();
    drop(tree);
    out
}

/// [`PRIVATE_MOUNT`] as the system calls take it.
const PRIVATE_MOUNT_C: &std::ffi::CStr = c"/tmp/butter-mount";

/// `BTRFS_IOC_SYNC`: writes back all dirty data and commits the filesystem that `fd` is on.
pub fn sync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `fd` is open for the whole call (borrowed); the request takes no argument.
    unsafe { ioctl(fd, NoArg::<BtrfsSync>::new()) }?;
    Ok(())
}

/// `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)` over the whole file: writes its dirty
/// pages to the device and waits, returning any write-back error (EIO, ENOSPC). Flushes no
/// device cache and commits no metadata: that is the snapshot's job.
pub fn write_back(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: `fd` is open for the whole call (borrowed); offset 0 and length 0 mean "the whole
    // file"; no memory is passed to the kernel.
    let r = unsafe { libc::sync_file_range(fd.as_raw_fd(), 0, 0, flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `sync_file_range(WRITE)` over `len` bytes from `offset`: starts write-back of those dirty
/// pages and returns without waiting. Errors of the write-back itself are reported later, by
/// [`write_back`] on any descriptor of the file.
pub fn start_write_back(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    let offset = libc::off64_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
    let len = libc::off64_t::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `fd` is open for the whole call (borrowed); the range is plain integers checked to
    // fit in `off64_t`; no memory is passed to the kernel.
    let r =
        unsafe { libc::sync_file_range(fd.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `BTRFS_IOC_START_SYNC`: starts committing the current transaction without waiting, and
/// returns its id for [`wait_sync`].
pub fn start_sync(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: `fd` is open for the whole call (borrowed); on success the kernel has written the
    // whole u64 the Getter holds (the size the request encodes), which is what it returns.
    let transid = unsafe { ioctl(fd, Getter::<StartSync, u64>::new()) }?;
    Ok(transid)
}

/// `BTRFS_IOC_WAIT_SYNC`: waits until the transaction `transid` is committed.
pub fn wait_sync(fd: BorrowedFd<'_>, transid: u64) -> io::Result<()> {
    // SAFETY: `fd` is open for the whole call (borrowed); the request takes a pointer to a
    // u64, which the Setter holds; the kernel only reads it.
    unsafe { ioctl(fd, Setter::<WaitSync, u64>::new(transid)) }?;
    Ok(())
}

/// Moves the calling thread to `SCHED_IDLE`: it runs only when a CPU has nothing else to run.
/// Lowering one's own priority needs no privilege.
pub fn set_current_thread_idle() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a live, initialised struct the kernel only reads; pid 0 names the
    // calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Lowers the calling thread to nice `nice` (Linux keeps a nice value per thread). Lowering
/// one's own priority needs no privilege; raising it again would, so a thread is lowered once,
/// when it starts, and one already lower (a process started with `nice -n 15`) is left as it
/// is.
pub fn set_current_thread_background(nice: i32) -> io::Result<()> {
    let me = Some(rustix::thread::gettid());
    if rustix::process::getpriority_process(me)? >= nice {
        return Ok(());
    }
    rustix::process::setpriority_process(me, nice).map_err(io::Error::from)
}

/// The process's limit on open files (`RLIMIT_NOFILE`) as (soft, hard); `None` is unlimited.
pub fn open_file_limit() -> (Option<u64>, Option<u64>) {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (limit.current, limit.maximum)
}

/// Sets the process's soft limit on open files to `soft`, keeping the hard limit (`soft` must
/// not exceed it; lowering the soft limit, or raising it up to the hard one, needs no
/// privilege).
pub fn set_open_file_soft_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = open_file_limit();
    let limit = rustix::process::Rlimit {
        current: Some(soft),
        maximum: hard,
    };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit).map_err(io::Error::from)
}

/// `FS_IOC_GETFLAGS`: the inode flags (`chattr` attributes) of an open file.
pub fn inode_flags(fd: BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: `fd` is open for the whole call (borrowed); on success the kernel has written the
    // whole `int` the Getter holds (it writes an int whatever the request number says).
    let flags = unsafe { ioctl(fd, Getter::<FsIocGetflags, libc::c_int>::new()) }?;
    Ok(flags as u32)
}

/// `FS_IOC_SETFLAGS`: replaces the inode flags of an open file.
pub fn set_inode_flags(fd: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
    let flags = flags as libc::c_int;
    // SAFETY: `fd` is open for the whole call (borrowed); the request takes a pointer to an
    // `int` (whatever its number says), which the Setter holds; the kernel only reads it.
    unsafe { ioctl(fd, Setter::<FsIocSetflags, libc::c_int>::new(flags)) }?;
    Ok(())
}

/// `FICLONE`: makes `dest` (open for writing) share all of `source`'s extents (a reflink
/// copy); `dest`'s previous contents are replaced. Both must be on the same btrfs filesystem.
pub fn ficlone(dest: &impl AsFd, source: &impl AsFd) -> io::Result<()> {
    let dest = dest.as_fd();
    let source = source.as_fd();
    // Through libc, not rustix: the rustix that Lighthouse's lockfile pins (0.38.34) has no
    // pattern for an argument passed by value.
    let request = Ficlone::OPCODE.raw().into();
    // SAFETY: both fds are open for the whole call (borrowed); FICLONE takes the source fd by
    // value as its argument, so no memory is shared with the kernel.
    let rc = unsafe { libc::ioctl(dest.as_raw_fd(), request, source.as_raw_fd()) };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `FICLONERANGE`: makes `len` bytes of `dest` (open for writing) at `dest_offset` share the
/// extents of `source` at `source_offset` (`len` 0: to the end of `source`). Offsets and length
/// must be multiples of the filesystem block size, except a range that ends at `source`'s end.
pub fn ficlone_range(
    dest: &impl AsFd,
    source: &impl AsFd,
    source_offset: u64,
    len: u64,
    dest_offset: u64,
) -> io::Result<()> {
    let dest = dest.as_fd();
    let args = file_clone_range {
        src_fd: i64::from(source.as_fd().as_raw_fd()),
        src_offset: source_offset,
        src_length: len,
        dest_offset,
    };
    // SAFETY: both fds are open for the whole call (borrowed: `source` through `args.src_fd`,
    // which the kernel resolves during the call); the request takes a pointer to a
    // `file_clone_range`, the type the opcode encodes and the Setter passes (fully
    // initialised); the kernel only reads it.
    unsafe { ioctl(dest, Setter::<FicloneRange, _>::new(args)) }?;
    Ok(())
}

/// A filesystem type, from the `f_type` magic number of `statfs(2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsType {
    /// The `f_type` magic number (`include/uapi/linux/magic.h`).
    pub magic: u64,
    /// A human name for it, or `"unknown"`.
    pub name: &'static str,
}

/// `BTRFS_SUPER_MAGIC`.
const BTRFS_MAGIC: u64 = 0x9123_683E;

/// Magic numbers from `include/uapi/linux/magic.h` (and ZFS's own), with names.
const FS_MAGICS: &[(u64, &str)] = &[
    (BTRFS_MAGIC, "btrfs"),
    (0xEF53, "ext2/ext3/ext4"),
    (0x0102_1994, "tmpfs"),
    (0x5846_5342, "xfs"),
    (0x794C_7630, "overlayfs"),
    (0x6573_5546, "fuse"),
    (0x2FC1_2FC1, "zfs"),
    (0x6969, "nfs"),
    (0x8584_58F6, "ramfs"),
    (0xF2F5_2010, "f2fs"),
    (0xCA45_1A4E, "bcachefs"),
    (0x7371_7368, "squashfs"),
    (0x0102_1997, "9p"),
    (0xFF53_4D42, "cifs"),
    (0xFE53_4D42, "smb2"),
    (0x00C3_6400, "ceph"),
    (0x4D44, "vfat"),
    (0x2011_BAB0, "exfat"),
    (0x5346_544E, "ntfs"),
    (0x3153_464A, "jfs"),
    (0x5265_4973, "reiserfs"),
    (0x3434, "nilfs2"),
    (0xF15F, "ecryptfs"),
    (0x9FA0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6367_7270, "cgroup2"),
];

impl FsType {
    /// The type for a magic number.
    pub fn from_magic(magic: u64) -> Self {
        let name = FS_MAGICS
            .iter()
            .find(|(m, _)| *m == magic)
            .map_or("unknown", |(_, n)| *n);
        Self { magic, name }
    }

    /// Whether this is btrfs.
    pub fn is_btrfs(&self) -> bool {
        self.magic == BTRFS_MAGIC
    }
}

impl fmt::Display for FsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (statfs magic {:#x})", self.name, self.magic)
    }
}

/// The type of the filesystem `path` is on (`statfs(2)`).
pub fn filesystem_type(path: &Path) -> io::Result<FsType> {
    Ok(fs_type_of(&rustix::fs::statfs(path)?))
}

/// The type of the filesystem the open file `fd` is on (`fstatfs(2)`).
pub fn filesystem_type_fd(fd: BorrowedFd<'_>) -> io::Result<FsType> {
    Ok(fs_type_of(&rustix::fs::fstatfs(fd)?))
}

fn fs_type_of(st: &rustix::fs::StatFs) -> FsType {
    // `f_type` is a signed or unsigned word depending on the platform; every magic number is 32
    // bits, so keep the low 32 bits (undoing sign extension where the word is signed).
    let raw = i128::from(st.f_type);
    let magic = (raw & 0xFFFF_FFFF) as u64;
    FsType::from_magic(magic)
}

/// Whether the open directory `dir` is the root directory of a btrfs subvolume, as
/// [`is_subvolume_root`] but for a handle (nothing is looked up by name).
pub fn is_subvolume_root_fd(dir: BorrowedFd<'_>) -> io::Result<bool> {
    let st = rustix::fs::fstat(dir)?;
    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    if !is_dir || st.st_ino != BTRFS_SUBVOL_ROOT_INO {
        return Ok(false);
    }
    Ok(filesystem_type_fd(dir)?.is_btrfs())
}

/// Whether `path` is the root directory of a btrfs subvolume (its inode number is 256 on a btrfs
/// filesystem). `false` for anything on another filesystem.
pub fn is_subvolume_root(path: &Path) -> io::Result<bool> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() || meta.ino() != BTRFS_SUBVOL_ROOT_INO {
        return Ok(false);
    }
    Ok(filesystem_type(path)?.is_btrfs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::process::getpriority_process;
    use rustix::thread::gettid;

    /// Asserts that the opcode type `Op` makes the request number `want`, the kernel's `name`.
    fn check<Op: CompileTimeOpcode>(name: &str, want: u64) {
        let got = u64::from(Op::OPCODE.raw());
        assert_eq!(
            got, want,
            "{name}: {got:#010x}, the kernel's is {want:#010x}"
        );
    }

    /// Every request number the wrappers use, against the value in the kernel's uapi headers
    /// (`docs/background.md` §2.7; the generic `_IOC` encoding of x86, arm, riscv and the other
    /// `asm-generic/ioctl.h` architectures). A wrong struct size or direction changes them.
    #[test]
    fn request_numbers_match_the_uapi_headers() {
        // include/uapi/linux/btrfs.h
        check::<SnapDestroy>("BTRFS_IOC_SNAP_DESTROY", 0x5000_940F);
        check::<SnapCreateV2>("BTRFS_IOC_SNAP_CREATE_V2", 0x5000_9417);
        check::<SubvolCreateV2>("BTRFS_IOC_SUBVOL_CREATE_V2", 0x5000_9418);
        check::<SnapDestroyV2>("BTRFS_IOC_SNAP_DESTROY_V2", 0x5000_943F);
        check::<SubvolGetflags>("BTRFS_IOC_SUBVOL_GETFLAGS", 0x8008_9419);
        check::<SubvolSetflags>("BTRFS_IOC_SUBVOL_SETFLAGS", 0x4008_941A);
        check::<BtrfsSync>("BTRFS_IOC_SYNC", 0x0000_9408);
        check::<StartSync>("BTRFS_IOC_START_SYNC", 0x8008_9418);
        check::<WaitSync>("BTRFS_IOC_WAIT_SYNC", 0x4008_9416);
        check::<InoLookup>("BTRFS_IOC_INO_LOOKUP", 0xD000_9412);
        #[cfg(target_pointer_width = "64")]
        check::<SendStream>("BTRFS_IOC_SEND", 0x4048_9426);
        // include/uapi/linux/fs.h
        check::<Ficlone>("FICLONE", 0x4004_9409);
        check::<FicloneRange>("FICLONERANGE", 0x4020_940D);
        // FS_IOC_GETFLAGS/SETFLAGS name `long`, so their size field is the word size.
        #[cfg(target_pointer_width = "64")]
        {
            check::<FsIocGetflags>("FS_IOC_GETFLAGS", 0x8008_6601);
            check::<FsIocSetflags>("FS_IOC_SETFLAGS", 0x4008_6602);
        }
        #[cfg(target_pointer_width = "32")]
        {
            check::<FsIocGetflags>("FS_IOC_GETFLAGS", 0x8004_6601);
            check::<FsIocSetflags>("FS_IOC_SETFLAGS", 0x4004_6602);
        }
    }

    #[test]
    fn the_private_mount_point_is_one_path() {
        assert_eq!(PRIVATE_MOUNT_C.to_str().unwrap(), PRIVATE_MOUNT);
    }

    /// A merge thread's nice value is its own: the thread that spawned it keeps its own.
    #[test]
    fn a_background_thread_runs_at_the_merge_nice_value() {
        const MERGE_NICE: i32 = 10;
        let before = getpriority_process(Some(gettid())).unwrap();
        let nice = std::thread::spawn(|| {
            super::set_current_thread_background(MERGE_NICE).unwrap();
            getpriority_process(Some(gettid())).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(nice, MERGE_NICE.max(before));
        assert_eq!(getpriority_process(Some(gettid())).unwrap(), before);
    }
}
