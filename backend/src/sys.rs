//! Raw btrfs and VFS ioctls, and `statfs`: the only unsafe code in the crate.
//!
//! Every function here is a safe wrapper: it takes borrowed file descriptors (which are open for
//! the duration of the call by construction) and validated names, and returns `io::Result`.
//! Struct layouts and request numbers follow the kernel's `include/uapi/linux/btrfs.h` and
//! `include/uapi/linux/fs.h` (tabulated in `docs/background.md` §2.7); both are checked at
//! compile time.

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

// The ioctl wrappers generated by nix are `unsafe fn`s taking a raw fd and a raw pointer.
nix::ioctl_write_ptr!(
    ioc_snap_destroy,
    BTRFS_IOCTL_MAGIC,
    15,
    btrfs_ioctl_vol_args
);
nix::ioctl_write_ptr!(
    ioc_snap_create_v2,
    BTRFS_IOCTL_MAGIC,
    23,
    btrfs_ioctl_vol_args_v2
);
nix::ioctl_write_ptr!(
    ioc_subvol_create_v2,
    BTRFS_IOCTL_MAGIC,
    24,
    btrfs_ioctl_vol_args_v2
);
nix::ioctl_write_ptr!(
    ioc_snap_destroy_v2,
    BTRFS_IOCTL_MAGIC,
    63,
    btrfs_ioctl_vol_args_v2
);
nix::ioctl_read!(ioc_subvol_getflags, BTRFS_IOCTL_MAGIC, 25, u64);
nix::ioctl_write_ptr!(ioc_subvol_setflags, BTRFS_IOCTL_MAGIC, 26, u64);
nix::ioctl_none!(ioc_sync, BTRFS_IOCTL_MAGIC, 8);
nix::ioctl_read!(ioc_start_sync, BTRFS_IOCTL_MAGIC, 24, u64);
nix::ioctl_write_ptr!(ioc_wait_sync, BTRFS_IOCTL_MAGIC, 22, u64);
nix::ioctl_write_int!(ioc_ficlone, BTRFS_IOCTL_MAGIC, 9);
// FS_IOC_GETFLAGS/SETFLAGS are declared with `long` but pass an `int` (fs/ioctl.c), so the
// request numbers come from libc and the argument type is spelled out.
nix::ioctl_read_bad!(fs_ioc_getflags, libc::FS_IOC_GETFLAGS, libc::c_int);
nix::ioctl_write_ptr_bad!(fs_ioc_setflags, libc::FS_IOC_SETFLAGS, libc::c_int);

/// `FS_NOCOW_FL` from `include/uapi/linux/fs.h`: the file is nodatacow (`chattr +C`), and on
/// btrfs also has no data checksums. Settable only while the file is empty.
pub const FS_NOCOW_FL: u32 = 0x0080_0000;
nix::ioctl_write_ptr!(ioc_ficlonerange, BTRFS_IOCTL_MAGIC, 13, file_clone_range);

// The request numbers the macros above compute, against the values in the uapi headers
// (`docs/background.md` §2.7). A wrong struct size or direction would change them.
const _: () = {
    use nix::{request_code_none, request_code_read, request_code_write};
    let vol = size_of::<btrfs_ioctl_vol_args>();
    let vol2 = size_of::<btrfs_ioctl_vol_args_v2>();
    let m = BTRFS_IOCTL_MAGIC;
    // BTRFS_IOC_SNAP_DESTROY, _SNAP_CREATE_V2, _SUBVOL_CREATE_V2, _SNAP_DESTROY_V2
    assert!(request_code_write!(m, 15, vol) == 0x5000_940F);
    assert!(request_code_write!(m, 23, vol2) == 0x5000_9417);
    assert!(request_code_write!(m, 24, vol2) == 0x5000_9418);
    assert!(request_code_write!(m, 63, vol2) == 0x5000_943F);
    // BTRFS_IOC_SUBVOL_GETFLAGS, _SUBVOL_SETFLAGS
    assert!(request_code_read!(m, 25, 8) == 0x8008_9419);
    assert!(request_code_write!(m, 26, 8) == 0x4008_941A);
    // BTRFS_IOC_SYNC, _START_SYNC, _WAIT_SYNC
    assert!(request_code_none!(m, 8) == 0x0000_9408);
    assert!(request_code_read!(m, 24, 8) == 0x8008_9418);
    assert!(request_code_write!(m, 22, 8) == 0x4008_9416);
    // FICLONE, include/uapi/linux/fs.h: _IOW(0x94, 9, int)
    assert!(request_code_write!(m, 9, size_of::<libc::c_int>()) == 0x4004_9409);
    // FICLONERANGE, include/uapi/linux/fs.h: _IOW(0x94, 13, struct file_clone_range)
    assert!(request_code_write!(m, 13, size_of::<file_clone_range>()) == 0x4020_940D);
};

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
    // SAFETY: `parent` is an open fd for the whole call (it is borrowed), and `args` is a live,
    // fully initialised `btrfs_ioctl_vol_args_v2` of the size the request number encodes; the
    // kernel only reads it.
    unsafe { ioc_subvol_create_v2(parent.as_raw_fd(), &args) }?;
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
    // SAFETY: both fds are open for the whole call (borrowed); `args` is a live, fully
    // initialised `btrfs_ioctl_vol_args_v2` of the size the request encodes; the kernel only
    // reads it (the removed async mode was the only writer of `transid`).
    unsafe { ioc_snap_create_v2(dest_parent.as_raw_fd(), &args) }?;
    Ok(())
}

/// `BTRFS_IOC_SNAP_DESTROY_V2` by name: deletes the subvolume `name` in the directory `parent`.
/// Needs `CAP_SYS_ADMIN`, or the `user_subvol_rm_allowed` mount option and write access to a
/// writable subvolume. Does not commit.
pub fn snap_destroy_v2(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let args = btrfs_ioctl_vol_args_v2::with_name(name)?;
    // SAFETY: `parent` is open for the whole call (borrowed); `args` is a live, fully
    // initialised `btrfs_ioctl_vol_args_v2` (flags 0: by name) that the kernel only reads.
    unsafe { ioc_snap_destroy_v2(parent.as_raw_fd(), &args) }?;
    Ok(())
}

/// `BTRFS_IOC_SNAP_DESTROY` (v1, for kernels before 5.7): as [`snap_destroy_v2`].
pub fn snap_destroy_v1(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let args = btrfs_ioctl_vol_args::with_name(name)?;
    // SAFETY: `parent` is open for the whole call (borrowed); `args` is a live, fully
    // initialised `btrfs_ioctl_vol_args` of the size the request encodes; the kernel only reads
    // it.
    unsafe { ioc_snap_destroy(parent.as_raw_fd(), &args) }?;
    Ok(())
}

/// `BTRFS_IOC_SUBVOL_GETFLAGS` on an open subvolume root: its flags (see
/// [`BTRFS_SUBVOL_RDONLY`]).
pub fn subvol_flags(root: BorrowedFd<'_>) -> io::Result<u64> {
    let mut flags: u64 = 0;
    // SAFETY: `root` is open for the whole call (borrowed); `flags` is a live, aligned u64 the
    // kernel writes 8 bytes into, matching the request's size.
    unsafe { ioc_subvol_getflags(root.as_raw_fd(), &mut flags) }?;
    Ok(flags)
}

/// `BTRFS_IOC_SUBVOL_SETFLAGS` on an open subvolume root. Allowed for the owner of the
/// subvolume; changing the read-only bit commits a transaction.
pub fn set_subvol_flags(root: BorrowedFd<'_>, flags: u64) -> io::Result<()> {
    // SAFETY: `root` is open for the whole call (borrowed); `flags` is a live, aligned u64 the
    // kernel only reads.
    unsafe { ioc_subvol_setflags(root.as_raw_fd(), &flags) }?;
    Ok(())
}

/// `BTRFS_IOC_SYNC`: writes back all dirty data and commits the filesystem that `fd` is on.
pub fn sync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `fd` is open for the whole call (borrowed); the request takes no argument.
    unsafe { ioc_sync(fd.as_raw_fd()) }?;
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
    let mut transid: u64 = 0;
    // SAFETY: `fd` is open for the whole call (borrowed); `transid` is a live, aligned u64 the
    // kernel writes 8 bytes into, matching the request's size.
    unsafe { ioc_start_sync(fd.as_raw_fd(), &mut transid) }?;
    Ok(transid)
}

/// `BTRFS_IOC_WAIT_SYNC`: waits until the transaction `transid` is committed.
pub fn wait_sync(fd: BorrowedFd<'_>, transid: u64) -> io::Result<()> {
    // SAFETY: `fd` is open for the whole call (borrowed); `transid` is a live, aligned u64 the
    // kernel only reads.
    unsafe { ioc_wait_sync(fd.as_raw_fd(), &transid) }?;
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

/// `FS_IOC_GETFLAGS`: the inode flags (`chattr` attributes) of an open file.
pub fn inode_flags(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut flags: libc::c_int = 0;
    // SAFETY: `fd` is open for the whole call (borrowed); `flags` is a live, aligned int, the
    // size the kernel writes for this request.
    unsafe { fs_ioc_getflags(fd.as_raw_fd(), &mut flags) }?;
    Ok(flags as u32)
}

/// `FS_IOC_SETFLAGS`: replaces the inode flags of an open file.
pub fn set_inode_flags(fd: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
    let flags = flags as libc::c_int;
    // SAFETY: `fd` is open for the whole call (borrowed); `flags` is a live, aligned int the
    // kernel only reads.
    unsafe { fs_ioc_setflags(fd.as_raw_fd(), &flags) }?;
    Ok(())
}

/// `FICLONE`: makes `dest` (open for writing) share all of `source`'s extents (a reflink
/// copy); `dest`'s previous contents are replaced. Both must be on the same btrfs filesystem.
pub fn ficlone(dest: &impl AsFd, source: &impl AsFd) -> io::Result<()> {
    let dest = dest.as_fd();
    let source = source.as_fd();
    // A valid fd is non-negative, so it converts to the ioctl's unsigned argument losslessly.
    let arg = nix::sys::ioctl::ioctl_param_type::try_from(source.as_raw_fd())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both fds are open for the whole call (borrowed); FICLONE takes the source fd by
    // value, so no memory is shared with the kernel.
    unsafe { ioc_ficlone(dest.as_raw_fd(), arg) }?;
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
    // which the kernel resolves during the call); `args` is a live, fully initialised
    // `file_clone_range` of the size the request encodes; the kernel only reads it.
    unsafe { ioc_ficlonerange(dest.as_raw_fd(), &args) }?;
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
    use rustix::process::getpriority_process;
    use rustix::thread::gettid;

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
