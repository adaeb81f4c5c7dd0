//! The database directory itself: which entries the engine owns there, how each one is checked
//! before it is read, deleted or adopted, and the database's identity.
//!
//! The engine only touches names it uses (`butter.lock`, `butter.id`, `butter.id.tmp`, `live`,
//! `compact`, `gen-<20 digits>`); anything else in the directory is left alone. Each of its own
//! names is looked at with `lstat` (never through a symlink) and must have the type the engine
//! gives it: a symlink, or a directory where a subvolume belongs, is [`Error::ForeignEntry`].
//! Files are opened with `O_NOFOLLOW`. The directory is the caller's; its mode (0700 when the
//! engine creates it) is what keeps other users from swapping entries between the check and
//! the use.
//!
//! Identity: a database is created with 16 random bytes written to `butter.id` in the
//! directory and to `butter.id` inside `live/`, so inside every generation. A generation whose
//! identity differs (a snapshot of another database moved or linked in) is foreign, and so is
//! a `live`, `compact` or `gen-*` entry in a directory that has no `butter.id`.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::sys;

/// The identity file, in the database directory and in `live/` (so in every generation).
pub(crate) const ID_FILE: &str = "butter.id";
/// Written, then renamed to [`ID_FILE`], when a database is created.
pub(crate) const ID_TMP_FILE: &str = "butter.id.tmp";
/// The writer's lock file.
pub(crate) const LOCK_FILE: &str = "butter.lock";
/// The writable working subvolume.
pub(crate) const LIVE_DIR: &str = "live";
/// Where background merges write (a plain directory outside every snapshot).
pub(crate) const COMPACT_DIR: &str = "compact";
/// Marks a directory the `butter` tool is making into a copy, or removing
/// (`admin::INCOMPLETE_MARKER`): without a `butter.id` beside it, open refuses the directory
/// rather than create a database there.
pub(crate) const INCOMPLETE_FILE: &str = "butter.incomplete";
const GEN_PREFIX: &str = "gen-";

const ID_MAGIC: &[u8; 8] = b"BTRID001";
const ID_LEN: usize = 8 + 16 + 4;

/// A database's identity: 16 random bytes chosen at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DbId([u8; 16]);

impl DbId {
    /// A fresh identity from the kernel's random source.
    pub(crate) fn generate() -> Result<DbId> {
        let mut id = [0u8; 16];
        File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut id))
            .map_err(|e| Error::io("read", "/dev/urandom", e))?;
        Ok(DbId(id))
    }

    /// The identity file's bytes: magic, the 16 bytes, CRC-32 of both.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(ID_LEN);
        b.extend_from_slice(ID_MAGIC);
        b.extend_from_slice(&self.0);
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(bytes: &[u8], path: &Path) -> Result<DbId> {
        let (Some(body), Some(stored)) = (bytes.get(..ID_LEN - 4), bytes.get(ID_LEN - 4..)) else {
            return Err(Error::corrupted(
                path,
                "identity file shorter than 28 bytes",
            ));
        };
        if bytes.len() != ID_LEN || body.get(..8) != Some(ID_MAGIC.as_slice()) {
            return Err(Error::foreign(path, "not a butter_db identity file"));
        }
        let got = crc32fast::hash(body);
        let expected = u32::from_le_bytes(stored.try_into().unwrap_or_default());
        if got != expected {
            return Err(Error::ChecksumMismatch {
                path: path.into(),
                region: "identity file".into(),
                offset: 0,
                len: bytes.len() as u64,
                expected,
                got,
            });
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(body.get(8..24).unwrap_or(&[0; 16]));
        Ok(DbId(id))
    }

    fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The type an owned entry must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A plain directory.
    Dir,
    /// A btrfs subvolume root.
    Subvolume,
    /// Either of the two: the database directory itself, which may be a mount point or a
    /// subvolume made for it.
    DirOrSubvolume,
}

impl Kind {
    /// Whether an entry of type `found` is of this kind.
    fn admits(self, found: Found) -> bool {
        matches!(
            (self, found),
            (Kind::File, Found::File)
                | (Kind::Dir, Found::Dir)
                | (Kind::Subvolume, Found::Subvolume)
                | (Kind::DirOrSubvolume, Found::Dir | Found::Subvolume)
        )
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Subvolume => "a subvolume",
            Kind::DirOrSubvolume => "a directory or a subvolume",
        }
    }
}

/// The type of an entry found on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Symlink,
    File,
    Dir,
    Subvolume,
    Special,
}

impl Found {
    fn describe(self) -> &'static str {
        match self {
            Found::Symlink => "a symlink",
            Found::File => "a regular file",
            Found::Dir => "a directory",
            Found::Subvolume => "a subvolume",
            Found::Special => "a special file",
        }
    }
}

/// Whether `path` exists (without following a symlink) with the type `kind`; `Ok(false)` if
/// nothing is there, [`Error::ForeignEntry`] for a symlink or another type.
pub(crate) fn check_kind(path: &Path, kind: Kind) -> Result<bool> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("lstat", path, e)),
    };
    let ft = meta.file_type();
    let found = if ft.is_symlink() {
        Found::Symlink
    } else if ft.is_file() {
        Found::File
    } else if ft.is_dir() {
        match sys::is_subvolume_root(path) {
            Ok(true) => Found::Subvolume,
            Ok(false) => Found::Dir,
            // Gone between the two looks (a writer deleting an old generation while a
            // reader without the lock scans): nothing is there, as for the first look.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("lstat", path, e)),
        }
    } else {
        Found::Special
    };
    if kind.admits(found) {
        Ok(true)
    } else {
        Err(Error::foreign(
            path,
            format!(
                "it is {}; butter_db makes {} there",
                found.describe(),
                kind.describe()
            ),
        ))
    }
}

/// Reads an identity file, refusing a symlink or another type. `Ok(None)` if absent.
pub(crate) fn read_id(path: &Path) -> Result<Option<DbId>> {
    if !check_kind(path, Kind::File)? {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(ID_LEN);
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|f| f.take(ID_LEN as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| Error::io("read", path, e))?;
    DbId::decode(&bytes, path).map(Some)
}

/// Reads a whole file, refusing (`ELOOP`) a symlink.
pub(crate) fn read_nofollow(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Gives a new database in `dir` its identity file `butter.id`, written as `butter.id.tmp` and
/// renamed, so that it is either absent or whole. A `butter.id.tmp` left by an earlier attempt
/// that failed before the rename is taken up again if it holds a whole identity (it can only
/// be ours) and replaced if it is empty (nothing is lost); any other file there is foreign.
pub(crate) fn create_id(fs: &dyn Fs, dir: &Path, mode: u32) -> Result<DbId> {
    let tmp = dir.join(ID_TMP_FILE);
    let dst = dir.join(ID_FILE);
    if check_kind(&tmp, Kind::File)? {
        let bytes = read_nofollow(&tmp).map_err(|e| Error::io("read", &tmp, e))?;
        if bytes.is_empty() {
            fs.remove_file(&tmp)
                .map_err(|e| Error::io("unlink", &tmp, e))?;
        } else {
            let id = DbId::decode(&bytes, &tmp).map_err(|_| {
                Error::foreign(
                    &tmp,
                    "it is not a whole butter_db identity; remove it to create the database here",
                )
            })?;
            fs.rename(&tmp, &dst)
                .map_err(|e| Error::io("rename", &dst, e))?;
            return Ok(id);
        }
    }
    let id = DbId::generate()?;
    fs.write_new_file(&tmp, &id.encode(), mode)
        .map_err(|e| Error::io("write", &tmp, e))?;
    fs.rename(&tmp, &dst)
        .map_err(|e| Error::io("rename", &dst, e))?;
    Ok(id)
}

/// Checks that the generation directory `gen` carries identity `id`.
pub(crate) fn check_generation_id(gen: &Path, id: &DbId) -> Result<()> {
    let path = gen.join(ID_FILE);
    match read_id(&path)? {
        Some(found) if found == *id => Ok(()),
        Some(found) => Err(Error::foreign(
            gen,
            format!(
                "it belongs to database {}, this one is {}",
                found.hex(),
                id.hex()
            ),
        )),
        None => Err(Error::foreign(gen, "it has no butter.id")),
    }
}

/// The name of generation `generation`'s snapshot.
pub(crate) fn gen_name(generation: u64) -> String {
    format!("{GEN_PREFIX}{generation:020}")
}

pub(crate) fn parse_gen_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(GEN_PREFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What the database directory holds of the engine's names.
#[derive(Debug)]
pub(crate) struct RootScan {
    /// The identity, if `butter.id` exists.
    pub(crate) id: Option<DbId>,
    /// Generation numbers, ascending; each checked to be a subvolume (not its identity).
    pub(crate) generations: Vec<u64>,
    /// `live` exists (and is a subvolume).
    pub(crate) live: bool,
    /// `compact` exists (and is a directory).
    pub(crate) compact: bool,
}

/// Looks at the engine's names under `root`, checking each one's type. Touches nothing.
pub(crate) fn scan(root: &Path) -> Result<RootScan> {
    let mut generations = Vec::new();
    let rd = std::fs::read_dir(root).map_err(|e| Error::io("list", root, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", root, e))?;
        let Some(g) = entry.file_name().to_str().and_then(parse_gen_name) else {
            continue;
        };
        // Listed but gone by the time it is looked at: only a reader without the lock sees
        // this (the writer deleted it after a commit), and a gone generation is not one.
        if check_kind(&entry.path(), Kind::Subvolume)? {
            generations.push(g);
        }
    }
    generations.sort_unstable();
    let scan = RootScan {
        id: read_id(&root.join(ID_FILE))?,
        generations,
        live: check_kind(&root.join(LIVE_DIR), Kind::Subvolume)?,
        compact: check_kind(&root.join(COMPACT_DIR), Kind::Dir)?,
    };
    if scan.id.is_none() {
        // Without an identity the directory holds no database of ours: any entry by one of
        // our names belongs to somebody else (or to a butter_db of the first format, which
        // had no identity and cannot be opened by this version).
        let mut names = Vec::new();
        if scan.live {
            names.push(PathBuf::from(LIVE_DIR));
        }
        if scan.compact {
            names.push(PathBuf::from(COMPACT_DIR));
        }
        if let Some(&g) = scan.generations.first() {
            names.push(PathBuf::from(gen_name(g)));
        }
        if let Some(name) = names.first() {
            return Err(Error::foreign(
                root.join(name),
                format!(
                    "{} has no {ID_FILE}, so it holds no database this version of butter_db \
                     created (databases of the first format had no identity and must be made \
                     anew)",
                    root.display()
                ),
            ));
        }
    }
    Ok(scan)
}

/// Opens the lock file of the database in `dir` for `flock` if it exists (`Ok(None)` if not),
/// never through a symlink (`ELOOP`) and without blocking on a FIFO put in its place. For
/// looking at another process's database: the engine's own open creates the file instead.
pub(crate) fn open_existing_lock(dir: &Path) -> std::io::Result<Option<std::fs::File>> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join(LOCK_FILE))
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// How long taking the writer's lock waits for another holder to let go before the database
/// counts as in use ([`lock_exclusive`]).
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Takes the writer's lock (`flock(LOCK_EX)`) on `file`, trying every 10 ms for up to
/// [`LOCK_WAIT`]; `Ok(false)` if another open file held it all that time. The lock belongs to
/// the open file, not to the process: a child that another thread of the last holder forked
/// shares it until it execs (the file is close-on-exec), so a database just closed can stay
/// locked for that moment; the wait covers it.
///
/// # Errors
/// `flock` failing for another reason than the lock being held.
pub(crate) fn lock_exclusive(file: &File) -> std::io::Result<bool> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether a process holds the writer's lock of the database in `dir` (`flock` on its
/// `butter.lock`, tried without waiting and released at once). `false` if there is no lock
/// file, or if it is a symlink or not a regular file (which the engine never opens).
///
/// # Errors
/// The lock file exists but cannot be opened or locked for another reason.
pub fn lock_held(dir: &Path) -> std::io::Result<bool> {
    let file = match open_existing_lock(dir) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(false),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Ok(false);
    }
    // Taken on `file`, so released when `file` is closed at the end of this function.
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// Whether `dir` holds what a butter_db database leaves when the rest was removed (e.g. by
/// `rm -rf`, which cannot delete read-only snapshots): only the engine's names, and at least
/// one `live` or `gen-N` subvolume that carries the engine's identity file. Looks, touches
/// nothing; never follows a symlink.
pub fn holds_only_database_remains(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut carries_identity = false;
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return false;
        };
        let path = entry.path();
        let (subvolume, plain) = match name {
            LIVE_DIR => (true, false),
            _ if parse_gen_name(name).is_some() => (true, false),
            COMPACT_DIR => (false, check_kind(&path, Kind::Dir).unwrap_or(false)),
            ID_FILE | ID_TMP_FILE | LOCK_FILE => {
                (false, check_kind(&path, Kind::File).unwrap_or(false))
            }
            _ => (false, false),
        };
        if subvolume {
            if !check_kind(&path, Kind::Subvolume).unwrap_or(false) {
                return false;
            }
            carries_identity |= matches!(read_id(&path.join(ID_FILE)), Ok(Some(_)));
        } else if !plain {
            return false;
        }
    }
    carries_identity
}

/// Whether `name` is a background merge's output (`<16 hex digits>.seg`).
pub(crate) fn is_merge_output(name: &str) -> bool {
    name.strip_suffix(".seg").is_some_and(|stem| {
        stem.len() == 16
            && stem
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The background merge outputs an earlier process left in `compact/` (`None` if there is no
/// `compact/`). Anything else there (another name, a symlink, a directory, or a file the
/// engine did not write: see [`check_own_file`]) is [`Error::ForeignEntry`]. Touches nothing.
pub(crate) fn compact_outputs(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    if !check_kind(dir, Kind::Dir)? {
        return Ok(None);
    }
    let owner = owner_of(dir)?;
    let mut ours = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let path = entry.path();
        let named = entry.file_name().to_str().is_some_and(is_merge_output);
        if !named || !check_kind(&path, Kind::File)? {
            return Err(Error::foreign(
                path,
                "compact/ holds only background merge outputs named <16 hex digits>.seg",
            ));
        }
        check_own_file(&path, owner, "compact/")?;
        ours.push(path);
    }
    Ok(Some(ours))
}

/// The owner (uid) of `path`, not followed if it is a symlink.
fn owner_of(path: &Path) -> Result<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .map(|m| m.uid())
        .map_err(|e| Error::io("lstat", path, e))
}

/// Whether `name` is one the engine gives a file in `live/`: the identity, the manifest, its
/// temporary, or a segment (committed, merged in or spilled: `<16 hex digits>.seg`).
fn is_live_file_name(name: &str) -> bool {
    name == ID_FILE || name == "MANIFEST" || name == "MANIFEST.tmp" || is_merge_output(name)
}

/// Checks that the regular file `path`, in a directory of the engine's (`live/` or `compact/`,
/// `place`) owned by `dir_owner`, is one the engine could have written there: a single link
/// (the engine never links a file twice, so a second name means somebody's file was linked
/// in), and owned by the directory's owner or by root (the engine's files belong to the
/// process that opened the database: its owner, or root). Anything else is
/// [`Error::ForeignEntry`]. A file by the engine's name, of the owner, with one link is taken
/// to be the engine's: those names are the engine's inside directories it made, which only
/// their owner can write.
fn check_own_file(path: &Path, dir_owner: u32, place: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io("lstat", path, e))?;
    if meta.nlink() != 1 {
        return Err(Error::foreign(
            path,
            format!(
                "it has {} links; butter_db never gives a file in {place} a second name, so \
                 this one is somebody else's file linked in",
                meta.nlink()
            ),
        ));
    }
    if meta.uid() != dir_owner && meta.uid() != 0 {
        return Err(Error::foreign(
            path,
            format!(
                "it belongs to uid {}, neither {place}'s owner (uid {dir_owner}) nor root, so \
                 butter_db did not write it",
                meta.uid()
            ),
        ));
    }
    Ok(())
}

/// Checks that `live/` holds only the engine's files: it is discarded at open (it holds only
/// uncommitted state, all of it files the engine wrote), so anything else there is somebody
/// else's, [`Error::ForeignEntry`], never deleted with it: a directory or a nested subvolume,
/// a symlink or special file, a file by a name the engine never gives one there (it writes
/// only `butter.id`, `MANIFEST`, `MANIFEST.tmp` and `<16 hex digits>.seg`), or a file it did
/// not write ([`check_own_file`]). Touches nothing.
pub(crate) fn check_live_contents(live: &Path) -> Result<()> {
    let owner = owner_of(live)?;
    let rd = std::fs::read_dir(live).map_err(|e| Error::io("list", live, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", live, e))?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io("lstat", &path, e))?;
        if meta.is_dir() {
            return Err(Error::foreign(
                path,
                "live/ holds only files butter_db writes; a directory or subvolume there is \
                 not its own and is not deleted with live/",
            ));
        }
        if !meta.is_file() || !entry.file_name().to_str().is_some_and(is_live_file_name) {
            return Err(Error::foreign(
                path,
                "live/ holds only the files butter_db writes there (butter.id, MANIFEST, \
                 MANIFEST.tmp, <16 hex digits>.seg); this one is not deleted with live/",
            ));
        }
        check_own_file(&path, owner, "live/")?;
    }
    Ok(())
}

/// Creates `compact/` if missing (mode `dir_mode`), or deletes the merge outputs an earlier
/// process left there. Anything else there (another name, a symlink, a directory) is
/// [`Error::ForeignEntry`] and nothing is deleted.
pub(crate) fn clear_compact_dir(fs: &dyn Fs, dir: &Path, dir_mode: u32) -> Result<()> {
    let Some(ours) = compact_outputs(dir)? else {
        return fs
            .create_dir(dir, dir_mode)
            .map_err(|e| Error::io("create directory", dir, e));
    };
    for path in ours {
        fs.remove_file(&path)
            .map_err(|e| Error::io("unlink", &path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_names_sort_and_parse() {
        assert_eq!(gen_name(7), "gen-00000000000000000007");
        assert_eq!(parse_gen_name(&gen_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_gen_name("gen-7"), None);
        assert_eq!(parse_gen_name("gen-0000000000000000000x"), None);
        assert!(gen_name(9) < gen_name(10));
    }

    #[test]
    fn each_kind_admits_only_its_own_types() {
        let all = [
            Found::Symlink,
            Found::File,
            Found::Dir,
            Found::Subvolume,
            Found::Special,
        ];
        let admitted = |kind: Kind| -> Vec<Found> {
            all.iter().copied().filter(|f| kind.admits(*f)).collect()
        };
        assert_eq!(admitted(Kind::File), [Found::File]);
        assert_eq!(admitted(Kind::Dir), [Found::Dir]);
        assert_eq!(admitted(Kind::Subvolume), [Found::Subvolume]);
        assert_eq!(
            admitted(Kind::DirOrSubvolume),
            [Found::Dir, Found::Subvolume]
        );
    }

    #[test]
    fn merge_output_names() {
        assert!(is_merge_output("000000000000002c.seg"));
        assert!(!is_merge_output("000000000000002C.seg"));
        assert!(!is_merge_output("a"));
        assert!(!is_merge_output("000000000000002c.seg.tmp"));
        assert!(!is_merge_output("00000000000002c.seg"));
    }

    #[test]
    fn identity_round_trips_and_rejects_damage() {
        let id = DbId([7; 16]);
        let p = Path::new("x");
        let bytes = id.encode();
        assert_eq!(DbId::decode(&bytes, p).ok(), Some(id));
        let mut bad = bytes.clone();
        bad[10] ^= 1;
        assert!(matches!(
            DbId::decode(&bad, p),
            Err(Error::ChecksumMismatch { .. })
        ));
        assert!(matches!(
            DbId::decode(b"hello", p),
            Err(Error::Corrupted { .. })
        ));
        let mut other = bytes;
        other[0] = b'X';
        assert!(matches!(
            DbId::decode(&other, p),
            Err(Error::ForeignEntry { .. })
        ));
    }
}
