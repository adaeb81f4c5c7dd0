//! Reading a generation without the writer's lock.
//!
//! A writer deletes every older generation after each commit, so what a reader opens can
//! disappear under it: by `SNAP_DESTROY` (files already open stay readable) or, without
//! privileges, by clearing the read-only flag, unlinking the files one by one and `rmdir`. A
//! [`Snapshot`] therefore opens every file it will read (identity, manifest, each segment)
//! before reading any data; a file found missing while a newer generation exists means the
//! writer moved on, and the newest generation is opened instead. Once open, the files are
//! immutable and stay readable whatever happens to their names, so nothing read afterwards can
//! be a commit's doing: an error then is the data's.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::env::{MANIFEST_FILE, SEGMENT_TABLE_FORMAT};
use crate::error::{Error, Result};
use crate::fs::BtrfsFs;
use crate::iter::{MemLookup, MergeIter};
use crate::manifest::Manifest;
use crate::root::{self, gen_name, parse_gen_name, DbId, Kind, COMPACT_DIR, ID_FILE, LOCK_FILE};
use crate::segment::BlockCache;
use crate::segment::{self, key_cmp, CacheUse, Segment};

use super::names::INCOMPLETE_MARKER;

/// How many times a reader starts again on a newer generation before giving up (each retry
/// means the writer committed and deleted the generation being opened, in between).
const MAX_ATTEMPTS: usize = 1000;
/// Decoded blocks a snapshot keeps (reads of whole tables bypass it).
const CACHE_BYTES: usize = 16 << 20;

/// One segment as the manifest lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Sequence number (the file is `<16 hex digits>.seg`).
    pub seq: u64,
    /// File length in bytes.
    pub file_len: u64,
    /// Entries, tombstones and overwritten versions included.
    pub entries: u64,
}

/// One table as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Its name.
    pub name: String,
    /// Its segments, newest first.
    pub segments: Vec<SegmentInfo>,
}

/// A table's contents, from a full read of its segments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Keys a reader sees.
    pub entries: u64,
    /// Bytes of those entries, each counted as a 6-byte header, its key and its value (as
    /// segment format 1 stores them and memory holds them; format 2 files take less, so
    /// scale `file_bytes` by `live_bytes / (live_bytes + dead_bytes)` for the live share of
    /// the files).
    pub live_bytes: u64,
    /// Bytes of stored entries a reader does not see: deletions and overwritten versions,
    /// which the next merge of the table drops.
    pub dead_bytes: u64,
    /// Stored deletions.
    pub tombstones: u64,
    /// Bytes of the segment files (entries, block trailers, index and footer).
    pub file_bytes: u64,
    /// Segments.
    pub segments: usize,
}

/// What [`Snapshot::verify`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verified {
    /// Tables.
    pub tables: usize,
    /// Segment files.
    pub segments: usize,
    /// Data blocks.
    pub blocks: u64,
    /// Entries (tombstones included).
    pub entries: u64,
    /// Bytes of segment files.
    pub bytes: u64,
}

#[derive(Debug)]
struct OpenTable {
    name: String,
    segments: Vec<Arc<Segment>>,
}

/// A committed generation opened read-only: every file it holds is open, so a writer deleting
/// it changes nothing of what this reads.
#[derive(Debug)]
pub struct Snapshot {
    dir: PathBuf,
    generation: u64,
    id: DbId,
    next_seq: u64,
    manifest_len: u64,
    format_version: u32,
    tables: Vec<OpenTable>,
    /// The files read at open, kept open (the segments keep their own).
    _files: Vec<File>,
}

/// Whether a generation newer than `generation` exists in `db` (the writer has moved on, so
/// `generation` may be being deleted).
fn superseded(db: &Path, generation: u64) -> Result<bool> {
    Ok(root::scan(db)?
        .generations
        .last()
        .is_some_and(|&g| g > generation))
}

impl Snapshot {
    /// Opens the newest committed generation of the database in `db` without its lock and
    /// without writing anything; a writer may be committing meanwhile.
    ///
    /// # Errors
    /// [`Error::NotADatabase`] (no identity, or no committed generation), the engine's checks
    /// of its entries ([`Error::ForeignEntry`]), a corrupt manifest, identity or segment footer
    /// and index, I/O errors.
    pub fn open(db: &Path) -> Result<Snapshot> {
        for attempt in 1..=MAX_ATTEMPTS {
            let scan = root::scan(db)?;
            let Some(id) = scan.id else {
                return Err(Error::NotADatabase {
                    path: db.into(),
                    reason: format!("it has no {ID_FILE}"),
                });
            };
            let Some(&newest) = scan.generations.last() else {
                // A listing can miss every generation while a writer replaces the newest: the
                // old one is gone by the time it is looked at, the new one came after the
                // listing passed its place. Only a database that still has none at the last
                // attempt has none.
                if attempt < MAX_ATTEMPTS {
                    continue;
                }
                return Err(Error::NotADatabase {
                    path: db.into(),
                    reason: "it holds no committed generation".into(),
                });
            };
            match Snapshot::open_generation(&db.join(gen_name(newest))) {
                Ok(s) if s.id == id && s.generation == newest => return Ok(s),
                Ok(s) if s.id != id => {
                    return Err(Error::foreign(
                        &s.dir,
                        "its identity is not the database directory's",
                    ))
                }
                Ok(s) => {
                    return Err(Error::corrupted(
                        s.dir.join(MANIFEST_FILE),
                        format!("manifest says generation {}", s.generation),
                    ))
                }
                Err(e) if superseded(db, newest)? => {
                    log::debug!("generation {newest} went away while opening it ({e}); again");
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Io {
            op: "open the newest generation",
            path: db.into(),
            source: io::Error::other(format!(
                "a writer replaced it {MAX_ATTEMPTS} times while it was being opened"
            )),
        })
    }

    /// Opens the generation snapshot `dir` by itself (a `gen-N` directory, or a received
    /// copy of one): its identity, its manifest and every segment it lists.
    ///
    /// # Errors
    /// As [`Snapshot::open`].
    pub fn open_generation(dir: &Path) -> Result<Snapshot> {
        if !root::check_kind(dir, Kind::Subvolume)? {
            return Err(Error::NotADatabase {
                path: dir.into(),
                reason: "no such generation".into(),
            });
        }
        let id_path = dir.join(ID_FILE);
        let id_file = open_nofollow(&id_path)?;
        let id = root::read_id(&id_path)?
            .ok_or_else(|| Error::foreign(dir, format!("it has no {ID_FILE}")))?;
        let manifest_path = dir.join(MANIFEST_FILE);
        let manifest_file = open_nofollow(&manifest_path)?;
        let bytes = read_all(&manifest_file, &manifest_path)?;
        let manifest = Manifest::decode(&bytes, &manifest_path)?;
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_gen_name);
        if name.is_some_and(|g| g != manifest.generation)
            || manifest.table_format != SEGMENT_TABLE_FORMAT
        {
            return Err(Error::corrupted(
                &manifest_path,
                format!(
                    "generation {} in table format {} in directory {}",
                    manifest.generation,
                    manifest.table_format,
                    dir.display()
                ),
            ));
        }
        let cache = Arc::new(BlockCache::new(CACHE_BYTES));
        let mut tables = Vec::with_capacity(manifest.tables.len());
        for t in &manifest.tables {
            let mut segments = Vec::with_capacity(t.segments.len());
            for s in &t.segments {
                segments.push(Arc::new(Segment::open(
                    dir.join(segment::file_name(s.seq)),
                    s.seq,
                    s.file_len,
                    s.entries,
                    cache.clone(),
                )?));
            }
            tables.push(OpenTable {
                name: t.name.clone(),
                segments,
            });
        }
        Ok(Snapshot {
            dir: dir.into(),
            generation: manifest.generation,
            id,
            next_seq: manifest.next_seq,
            manifest_len: bytes.len() as u64,
            format_version: manifest.version(),
            tables,
            _files: vec![id_file, manifest_file],
        })
    }

    /// The generation's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its number.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The database's identity (32 hex digits).
    pub fn identity(&self) -> String {
        self.id.to_hex_string()
    }

    /// The manifest's next segment sequence number.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The manifest's length in bytes.
    pub fn manifest_len(&self) -> u64 {
        self.manifest_len
    }

    /// The manifest's format version (1 for a database no commit of this build has written
    /// yet, 2 after).
    pub fn format_version(&self) -> u32 {
        self.format_version
    }

    /// The tables and their segments as the manifest lists them.
    pub fn tables(&self) -> Vec<TableInfo> {
        self.tables
            .iter()
            .map(|t| TableInfo {
                name: t.name.clone(),
                segments: t
                    .segments
                    .iter()
                    .map(|s| SegmentInfo {
                        seq: s.seq,
                        file_len: s.file_len,
                        entries: s.entries,
                    })
                    .collect(),
            })
            .collect()
    }

    fn table(&self, name: &str) -> Result<&OpenTable> {
        self.tables
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::TableNotFound(name.into()))
    }

    /// Reads every block of every segment ([`Segment::verify`]: checksums, layout, index, key
    /// order, entry counts); the first problem is the error.
    ///
    /// # Errors
    /// [`Error::ChecksumMismatch`], [`Error::Corrupted`] naming the file (and block), I/O.
    pub fn verify(&self) -> Result<Verified> {
        let mut v = Verified {
            tables: self.tables.len(),
            ..Verified::default()
        };
        for t in &self.tables {
            for s in &t.segments {
                let c = s.verify()?;
                v.segments += 1;
                v.blocks += c.blocks;
                v.entries += c.entries;
                v.bytes += s.file_len;
            }
        }
        Ok(v)
    }

    /// Reads table `name` whole: what a reader sees of it and what its segments hold besides.
    ///
    /// # Errors
    /// [`Error::TableNotFound`], corruption and I/O as [`Snapshot::verify`].
    pub fn table_stats(&self, name: &str) -> Result<TableStats> {
        let t = self.table(name)?;
        let mut stats = TableStats {
            segments: t.segments.len(),
            ..TableStats::default()
        };
        let mut stored = 0;
        for s in &t.segments {
            let c = s.verify()?;
            stored += c.entry_bytes;
            stats.tombstones += c.tombstones;
            stats.file_bytes += s.file_len;
        }
        self.scan(name, None, None, |k, v| {
            stats.entries += 1;
            stats.live_bytes += (6 + k.len() + v.len()) as u64;
            true
        })?;
        stats.dead_bytes = stored.saturating_sub(stats.live_bytes);
        Ok(stats)
    }

    /// Calls `f` with every key of table `name` in `[from, to)` (either bound may be absent)
    /// and its value, in key order, as a reader sees them, until `f` returns false.
    ///
    /// # Errors
    /// [`Error::TableNotFound`], corruption and I/O.
    pub fn scan(
        &self,
        name: &str,
        from: Option<&[u8]>,
        to: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let t = self.table(name)?;
        let mut merge = MergeIter::new_using(&t.segments, CacheUse::Bypass);
        match from {
            Some(k) => merge.seek(k, true)?,
            None => merge.rewind()?,
        }
        let mut mem = MemLookup(None);
        while let Some((k, v)) = merge.next(&mut mem, true)? {
            if to.is_some_and(|to| key_cmp(k, to).is_ge()) {
                break;
            }
            if !f(k, v.unwrap_or_default()) {
                break;
            }
        }
        Ok(())
    }
}

/// One file of an opened generation, to be copied byte for byte elsewhere (`butter backup
/// --plain`): its name in the generation directory, its length, and the descriptor the
/// [`Snapshot`] opened, so that what is read is this generation's even after a writer deleted
/// it.
#[derive(Debug)]
pub struct GenerationFile<'a> {
    /// Its name in the generation (`butter.id`, `MANIFEST`, `<16 hex digits>.seg`).
    pub name: String,
    /// Its length: the manifest's for a segment, the bytes read at open for the manifest.
    pub len: u64,
    file: &'a File,
}

impl GenerationFile<'_> {
    /// Reads up to `buf.len()` bytes at `offset` (`pread`); 0 at the end of the file.
    ///
    /// # Errors
    /// I/O.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        self.file.read_at(buf, offset)
    }
}

impl Snapshot {
    /// Every file the generation is made of, open since [`Snapshot::open`]: each segment the
    /// manifest lists (in the manifest's order), then `MANIFEST`, then `butter.id`. Nothing
    /// else belongs to a committed generation.
    ///
    /// # Errors
    /// I/O (the identity file's length, or opening a segment's file).
    pub fn files(&self) -> Result<Vec<GenerationFile<'_>>> {
        let mut files = Vec::new();
        for t in &self.tables {
            for s in &t.segments {
                files.push(GenerationFile {
                    name: segment::file_name(s.seq),
                    len: s.file_len,
                    file: s.file()?,
                });
            }
        }
        let [id_file, manifest_file] = self._files.as_slice() else {
            return Err(Error::corrupted(
                &self.dir,
                "the generation's files are not open",
            ));
        };
        files.push(GenerationFile {
            name: MANIFEST_FILE.into(),
            len: self.manifest_len,
            file: manifest_file,
        });
        let id_path = self.dir.join(ID_FILE);
        let id_len = id_file
            .metadata()
            .map_err(|e| Error::io("fstat", &id_path, e))?
            .len();
        files.push(GenerationFile {
            name: ID_FILE.into(),
            len: id_len,
            file: id_file,
        });
        Ok(files)
    }
}

/// A filesystem's size and use (`statvfs`), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsUsage {
    /// Size.
    pub total: u64,
    /// Used.
    pub used: u64,
    /// Available to an unprivileged user.
    pub available: u64,
}

/// What a database directory holds, looked at without opening it.
#[derive(Debug, Clone, Default)]
pub struct DirInfo {
    /// The identity in `butter.id` (32 hex digits), if any.
    pub identity: Option<String>,
    /// Generation snapshots on disk, ascending (normally one; more while readers pin older
    /// ones or while the writer deletes them).
    pub generations: Vec<u64>,
    /// Whether `live/` exists.
    pub live: bool,
    /// Background merge outputs in `compact/` (not yet swapped in) and their bytes.
    pub merge_outputs: (usize, u64),
    /// The process holding the writer's lock, if one does (from `/proc/locks`).
    pub lock_holder: Option<u32>,
    /// A copy or removal by the `butter` tool was interrupted here (`butter.incomplete`).
    pub incomplete: bool,
    /// The filesystem holding the directory.
    pub fs: FsUsage,
}

/// Looks at what `db` holds of the engine's names (checking each one's type, touching nothing)
/// and at its filesystem.
///
/// # Errors
/// [`Error::ForeignEntry`] as when opening, I/O.
pub fn inspect_dir(db: &Path) -> Result<DirInfo> {
    let incomplete = root::check_kind(&db.join(INCOMPLETE_MARKER), Kind::File)?;
    let scan = root::scan(db)?;
    let merge_outputs = merge_outputs(db, &scan)?;
    let vfs = rustix::fs::statvfs(db).map_err(|e| Error::io("statvfs", db, e.into()))?;
    let block = vfs.f_frsize;
    let fs = FsUsage {
        total: vfs.f_blocks * block,
        used: (vfs.f_blocks - vfs.f_bfree) * block,
        available: vfs.f_bavail * block,
    };
    Ok(DirInfo {
        identity: scan.id.map(|id| id.to_hex_string()),
        generations: scan.generations,
        live: scan.live,
        merge_outputs,
        lock_holder: lock_holder(&db.join(LOCK_FILE)),
        incomplete,
        fs,
    })
}

/// The background merge outputs in `db`'s `compact/` (not yet swapped in): how many, and their
/// bytes.
fn merge_outputs(db: &Path, scan: &root::RootScan) -> Result<(usize, u64)> {
    let mut outputs = (0, 0);
    if !scan.compact {
        return Ok(outputs);
    }
    let compact = db.join(COMPACT_DIR);
    for entry in std::fs::read_dir(&compact).map_err(|e| Error::io("list", &compact, e))? {
        // A commit swapping a merge output in unlinks it: one gone meanwhile is not counted.
        match entry.and_then(|e| e.metadata()) {
            Ok(meta) => {
                outputs.0 += 1;
                outputs.1 += meta.len();
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("stat", &compact, e)),
        }
    }
    Ok(outputs)
}

/// The bytes the database in `db` takes, without opening it: the segments its newest
/// committed manifest lists (their lengths as the manifest records them, the figure `butter
/// stat` adds up), the manifest itself, and background merge outputs not yet swapped in.
/// Older generations, and segments the newest commit retired, share extents with these or are
/// deleted by the next commit, and are not counted. Reads the manifest alone, no segment.
///
/// # Errors
/// [`Error::NotADatabase`] (no identity, or no committed generation), the checks of the
/// directory's entries as in [`inspect_dir`], a corrupt manifest, I/O errors.
pub fn database_bytes(db: &Path) -> Result<u64> {
    for attempt in 1..=MAX_ATTEMPTS {
        // `inspect_dir`'s checks of the directory, without what the gauge does not need (the
        // lock's holder from /proc, the filesystem's usage).
        root::check_kind(&db.join(INCOMPLETE_MARKER), Kind::File)?;
        let scan = root::scan(db)?;
        let Some(&newest) = scan.generations.last().filter(|_| scan.id.is_some()) else {
            // As in `Snapshot::open`: a listing beside a writer can miss every generation.
            if scan.id.is_some() && attempt < MAX_ATTEMPTS {
                continue;
            }
            return Err(Error::NotADatabase {
                path: db.into(),
                reason: format!("it has no {ID_FILE} or no committed generation"),
            });
        };
        let path = db.join(gen_name(newest)).join(MANIFEST_FILE);
        let bytes = match open_nofollow(&path).and_then(|f| read_all(&f, &path)) {
            Ok(bytes) => bytes,
            // The writer committed and deleted that generation meanwhile: again, on the newer.
            Err(e) if superseded(db, newest)? => {
                log::debug!("generation {newest} went away while sizing it ({e}); again");
                continue;
            }
            Err(e) => return Err(e),
        };
        let manifest = Manifest::decode(&bytes, &path)?;
        let segments: u64 = manifest
            .tables
            .iter()
            .flat_map(|t| &t.segments)
            .map(|s| s.file_len)
            .sum();
        return Ok(segments + bytes.len() as u64 + merge_outputs(db, &scan)?.1);
    }
    Err(Error::Io {
        op: "size the newest generation",
        path: db.into(),
        source: io::Error::other(format!(
            "a writer replaced it {MAX_ATTEMPTS} times while it was being read"
        )),
    })
}

/// The pid holding a `flock` on `lock`, from `/proc/locks`, read without taking the lock:
/// taking it, even shared and briefly, could make a writer starting at that moment fail with
/// `Locked`. `/proc/locks` names the file by the filesystem's device and the inode number, but
/// btrfs reports another device per subvolume to `stat`, so a lock on the same inode number is
/// confirmed by the holder's open descriptors (when they can be read): one of them must be the
/// same file (device and inode of what it has open; no path is looked up again).
fn lock_holder(lock: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(lock).ok()?;
    let (dev, ino) = (meta.dev(), meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // "1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF"
        let f: Vec<&str> = line.split_whitespace().collect();
        let (kind, pid, file) = (f.get(1)?, f.get(4)?, f.get(5)?);
        let pid: u32 = pid.parse().ok()?;
        let found: u64 = file.rsplit(':').next()?.parse().ok()?;
        if *kind != "FLOCK" || found != ino {
            return None;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return Some(pid);
        };
        fds.flatten()
            .any(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino))
            .then_some(pid)
    })
}

/// Opens `path` for reading, refusing a symlink (as the engine's own reads do).
fn open_nofollow(path: &Path) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Error::foreign(path, "it is a symlink"),
            _ => Error::io("open", path, e),
        })
}

/// The whole of an open file.
fn read_all(mut file: &File, path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(bytes)
}

impl DbId {
    /// The identity's 16 bytes in hex.
    pub(crate) fn to_hex_string(self) -> String {
        let bytes = self.encode();
        bytes
            .get(8..24)
            .unwrap_or_default()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Whether the generation snapshot `dir` is still read-only: a writer deleting it without
/// privileges clears the flag before it unlinks anything, and never sets it again.
pub(crate) fn still_readonly(dir: &Path) -> bool {
    BtrfsFs.is_readonly(dir).unwrap_or(false)
}
