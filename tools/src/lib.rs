//! The `butter` tool's commands, as functions: each checks its input, does its work through
//! the engine's [`butter_db::admin`] API, and returns what it found for `main.rs` to print.
//! `btrfs send` and `btrfs receive` (btrfs-progs, root) carry copies between filesystems.
//!
//! The operator's guide, with every command's output on a real database: `docs/operator.md`.

use std::fs::File;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use butter_db::admin::{self, CopyInfo, DirInfo, NewCopy, Removed, Snapshot, Verified};
use serde::Serialize;

pub mod compact;
pub mod dumpload;
pub mod exit;
pub mod handle;
pub mod plain;

/// Everything a command can fail with; each prints as one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The engine refused or failed (not a database, corrupt, locked, bad destination, ...).
    #[error(transparent)]
    Engine(#[from] butter_db::Error),
    /// A key bound of `dump` is not hex.
    #[error("{what} {given:?} is not hexadecimal: {source}")]
    BadHex {
        /// Which bound.
        what: &'static str,
        /// As given.
        given: String,
        /// Why.
        #[source]
        source: hex::FromHexError,
    },
    /// A stream file could not be created, opened or written.
    #[error("{op} {path}: {source}")]
    StreamFile {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The stream file named for `backup --stream` exists already.
    #[error("stream file {0} exists; nothing was changed (remove it or name another)")]
    StreamExists(PathBuf),
    /// `btrfs send` or `btrfs receive` could not run or failed; what it said is kept.
    #[error("btrfs {command} failed ({status}): {stderr}; {left}")]
    Btrfs {
        /// `send` or `receive`.
        command: &'static str,
        /// Its exit status, or why it did not start.
        status: String,
        /// Its last error line.
        stderr: String,
        /// What was left (nothing, in every case the tool can tell).
        left: &'static str,
    },
    /// `restore` was given nothing to restore, or a directory among streams.
    #[error("{0}")]
    BadSources(String),
    /// Writing the output failed (a closed pipe, a full disk).
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    /// The path given as a database is a file or something else that is not a directory.
    #[error("{0} is not a directory: a butter_db database is a directory")]
    NotADirectory(PathBuf),
    /// A table named on the command line does not exist; the ones that do are listed.
    #[error("no table {name:?} in this database; its tables: {tables}")]
    NoSuchTable {
        /// The name given.
        name: String,
        /// The tables there are, comma-separated (`none` for none).
        tables: String,
    },
    /// The input of `load` is not a dump `load` reads; nothing was left.
    #[error("not a butter dump at line {line}: {reason}; nothing was loaded or left behind")]
    BadDump {
        /// The line (from 1).
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// `remove` refused a database that `slasher-bench replay --keep-db` kept (its marker is an
    /// entry the engine did not make); the message names the command that removes it.
    #[error("{0}")]
    BenchKept(String),
    /// `backup --plain` refused its destination (not empty, not a directory, inside the
    /// database); nothing was changed.
    #[error("{0}")]
    PlainDestination(String),
    /// `restore --plain` was given something that is not a plain copy.
    #[error("{0}")]
    NotACopy(String),
    /// A plain copy's file differs from its list, or its stream is malformed or cut short; or
    /// a compacting copy differs from its source.
    #[error("{0}")]
    BadCopy(String),
    /// `load` makes a new database, and the directory exists.
    #[error("{0} exists; load makes a new database in a directory that does not exist yet")]
    LoadDestination(PathBuf),
}

/// A command's result.
pub type Result<T, E = ToolError> = std::result::Result<T, E>;

/// One table in `stat`. The manifest gives the segments, their bytes and the entries they
/// store; `--deep` reads the table whole for the rest.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableRow {
    /// Its name.
    pub name: String,
    /// Entries its segments store, deletions and overwritten versions included (the
    /// manifest's count; an upper bound of `entries`).
    pub stored_entries: u64,
    /// Segment files.
    pub segments: usize,
    /// Their bytes.
    pub file_bytes: u64,
    /// `--deep`: keys a reader sees.
    pub entries: Option<u64>,
    /// `--deep`: bytes of those entries.
    pub live_bytes: Option<u64>,
    /// `--deep`: bytes of deletions and overwritten versions, which a merge drops.
    pub dead_bytes: Option<u64>,
    /// `--deep`: stored deletions.
    pub tombstones: Option<u64>,
    /// `--deep`: what reading the table found wrong (the other `--deep` fields are then
    /// absent).
    pub damage: Option<String>,
}

/// `butter stat`.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    /// The directory.
    pub path: PathBuf,
    /// Its identity (32 hex digits; empty if it could not be read).
    pub identity: String,
    /// The manifest's (and the database's) format version.
    pub format_version: u32,
    /// The newest committed generation, which was read.
    pub generation: u64,
    /// Every generation snapshot on disk (older ones are pinned by readers or being deleted).
    pub generations_on_disk: Vec<u64>,
    /// Whether the writer's working subvolume `live/` exists.
    pub live: bool,
    /// Background merge outputs waiting in `compact/`.
    pub merge_outputs: usize,
    /// Their bytes.
    pub merge_output_bytes: u64,
    /// The process holding the writer's lock.
    pub lock_holder: Option<u32>,
    /// The manifest's next segment number.
    pub next_segment: u64,
    /// The manifest's bytes.
    pub manifest_bytes: u64,
    /// Whether the tables were read whole (`--deep`).
    pub deep: bool,
    /// The newest generation could not be opened: why (the tables are then not listed).
    pub damage: Option<String>,
    /// Per table.
    pub tables: Vec<TableRow>,
    /// The filesystem's size, use and space available, in bytes.
    pub filesystem: FsRow,
}

impl Stat {
    /// Whether anything read was damaged.
    pub fn damaged(&self) -> bool {
        self.damage.is_some() || self.tables.iter().any(|t| t.damage.is_some())
    }
}

/// A filesystem's size and use, in bytes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FsRow {
    /// Size.
    pub total: u64,
    /// Used.
    pub used: u64,
    /// Available.
    pub available: u64,
}

/// What `stat` reads.
#[derive(Debug, Clone, Default)]
pub struct StatOptions {
    /// Read every table whole for live and dead bytes, entries and tombstones (the time grows
    /// with the database); otherwise the manifest and the segments' footers only.
    pub deep: bool,
    /// Only this table.
    pub table: Option<String>,
}

/// `butter stat DIR [TABLE] [--deep]`, beside a live writer. A damaged table (with `--deep`)
/// or a newest generation that cannot be opened is reported in the result, not as an error,
/// with what could be read beside it ([`Stat::damaged`]).
///
/// # Errors
/// [`ToolError::NotADirectory`], [`ToolError::NoSuchTable`], [`ToolError::Engine`] for a
/// directory that is not a database or cannot be read.
pub fn stat(dir: &Path, opts: &StatOptions) -> Result<Stat> {
    handle::through_handle(dir, |h| stat_via(dir, &h.via, opts))
}

/// [`stat`] of `dir` (named in the result) reached at `via`.
fn stat_via(dir: &Path, via: &Path, opts: &StatOptions) -> Result<Stat> {
    let info: DirInfo = admin::inspect_dir(via)?;
    let mut stat = Stat {
        path: dir.into(),
        identity: info.identity.clone().unwrap_or_default(),
        format_version: 0,
        generation: info.generations.last().copied().unwrap_or_default(),
        generations_on_disk: info.generations.clone(),
        live: info.live,
        merge_outputs: info.merge_outputs.0,
        merge_output_bytes: info.merge_outputs.1,
        lock_holder: info.lock_holder,
        next_segment: 0,
        manifest_bytes: 0,
        deep: opts.deep,
        damage: None,
        tables: Vec::new(),
        filesystem: FsRow {
            total: info.fs.total,
            used: info.fs.used,
            available: info.fs.available,
        },
    };
    let snap = match Snapshot::open(via) {
        Ok(snap) => snap,
        Err(e) => {
            let e = ToolError::from(e.rebased(via, dir));
            if e.exit_code() != exit::CORRUPT {
                return Err(e);
            }
            stat.damage = Some(e.to_string());
            return Ok(stat);
        }
    };
    stat.identity = snap.identity();
    stat.format_version = snap.format_version();
    stat.generation = snap.generation();
    stat.next_segment = snap.next_seq();
    stat.manifest_bytes = snap.manifest_len();
    let all = snap.tables();
    if let Some(name) = &opts.table {
        if !all.iter().any(|t| t.name == *name) {
            return Err(ToolError::NoSuchTable {
                name: name.clone(),
                tables: all
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    for t in all {
        if opts.table.as_ref().is_some_and(|n| *n != t.name) {
            continue;
        }
        let mut row = TableRow {
            stored_entries: t.segments.iter().map(|s| s.entries).sum(),
            segments: t.segments.len(),
            file_bytes: t.segments.iter().map(|s| s.file_len).sum(),
            ..TableRow::default()
        };
        if opts.deep {
            match snap.table_stats(&t.name) {
                Ok(s) => {
                    row.entries = Some(s.entries);
                    row.live_bytes = Some(s.live_bytes);
                    row.dead_bytes = Some(s.dead_bytes);
                    row.tombstones = Some(s.tombstones);
                }
                Err(e) => {
                    let e = ToolError::from(e.rebased(via, dir));
                    if e.exit_code() != exit::CORRUPT {
                        return Err(e);
                    }
                    row.damage = Some(e.to_string());
                }
            }
        }
        row.name = t.name;
        stat.tables.push(row);
    }
    Ok(stat)
}

/// `butter check`'s result.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    /// The generation checked.
    pub generation: u64,
    /// What was read.
    pub verified: Verified,
    /// How long it took.
    pub elapsed: Duration,
}

/// `butter check DIR`: the newest generation's identity and manifest (at open) and every
/// segment's blocks, index and footer, read-only, beside a live writer.
///
/// # Errors
/// The first problem found, as [`ToolError::Engine`].
pub fn check(dir: &Path) -> Result<Checked> {
    let t = Instant::now();
    handle::through_handle(dir, |h| {
        let snap = Snapshot::open(&h.via)?;
        let verified = snap.verify()?;
        Ok(Checked {
            generation: snap.generation(),
            verified,
            elapsed: t.elapsed(),
        })
    })
}

/// Parses a hex key bound of `dump`.
///
/// # Errors
/// [`ToolError::BadHex`].
pub fn parse_hex(what: &'static str, given: &str) -> Result<Vec<u8>> {
    hex::decode(given).map_err(|source| ToolError::BadHex {
        what,
        given: given.into(),
        source,
    })
}

/// `butter remove DIR`.
///
/// # Errors
/// [`ToolError::Engine`]: not a database, foreign entries, locked; nothing changed.
pub fn remove(dir: &Path) -> Result<Removed> {
    Ok(admin::remove_database(dir)?)
}

/// Where `backup` writes a `btrfs send` stream of the copy.
#[derive(Debug, Clone)]
pub struct StreamTarget {
    /// A file (created, never overwritten), or `None` for standard output.
    pub file: Option<PathBuf>,
    /// An earlier copy whose generation the stream is incremental from.
    pub parent: Option<PathBuf>,
}

/// `butter backup`'s result.
#[derive(Debug, Clone)]
pub struct BackedUp {
    /// The copy.
    pub copy: CopyInfo,
    /// How long the copy took.
    pub copy_time: Duration,
    /// The stream's bytes and time, if one was written.
    pub stream: Option<(u64, Duration)>,
    /// The parent generation of an incremental stream.
    pub parent_generation: Option<u64>,
}

/// `butter backup DIR DEST [--stream FILE|- [--parent PREV]]`: makes DEST a new database
/// holding a copy of DIR's newest committed generation (btrfs snapshots: instant, no data
/// copied, no root; same filesystem), then, with a stream target, writes DEST's generation as a
/// `btrfs send` stream (root), incremental from the earlier copy PREV.
///
/// # Errors
/// [`ToolError::Engine`] (DIR not a database, DEST not empty or inside DIR or on another
/// filesystem, PREV not a copy), [`ToolError::StreamExists`], [`ToolError::Btrfs`]; nothing
/// is left behind.
pub fn backup(dir: &Path, dest: &Path, stream: Option<&StreamTarget>) -> Result<BackedUp> {
    let mut parent = None;
    let mut stream_dir = None;
    if let Some(s) = stream {
        if let Some(file) = &s.file {
            stream_dir = Some(StreamDir::open(file)?);
        }
        if let Some(prev) = &s.parent {
            // PREV is looked up once and its generation opened through its handle.
            parent = Some(handle::through_handle(prev, |h| {
                let snap = Snapshot::open(&h.via)?;
                let dir = butter_db::fs::open_dir_nofollow(snap.dir()).map_err(|source| {
                    ToolError::StreamFile {
                        op: "open",
                        path: prev.clone(),
                        source,
                    }
                })?;
                let id = butter_db::fs::subvolume_id(dir.as_fd()).map_err(|source| {
                    ToolError::StreamFile {
                        op: "look up the subvolume of",
                        path: prev.clone(),
                        source,
                    }
                })?;
                Ok((snap.generation(), id))
            })?);
        }
    }
    let t = Instant::now();
    // DEST is opened once and checked here; the copy, the stream and any removal on failure
    // reach it through that handle only. The copy becomes a database (its `butter.id`) only
    // once the stream, if any, was written.
    // DIR too is looked up once (`handle`), and read through its handle.
    let copy = handle::through_handle(dir, |h| Ok(admin::prepare_backup(&h.via, dest)?))?;
    let copy_time = t.elapsed();
    if stream.is_none() {
        return Ok(BackedUp {
            copy: copy.finish()?,
            copy_time,
            stream: None,
            parent_generation: None,
        });
    }
    let t = Instant::now();
    // On an error the copy is dropped, which removes it through its handle.
    let gen = copy.open_generation_dir()?;
    let bytes = send(&gen, parent.map(|(_, id)| id), stream_dir.as_ref())?;
    let stream_time = t.elapsed();
    Ok(BackedUp {
        copy: copy.finish()?,
        copy_time,
        stream: Some((bytes, stream_time)),
        parent_generation: parent.map(|(generation, _)| generation),
    })
}

/// The last non-empty line of a tool's stderr.
fn last_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no message)")
        .trim()
        .to_string()
}

/// Runs `btrfs receive` on the stream `input` into the open subvolume `into`, which the child
/// sees mounted at [`butter_db::fs::PRIVATE_MOUNT`] in a mount namespace of its own:
/// `btrfs receive` works by path (it resolves its argument with `realpath` and makes every file
/// by its full path), and there no component of any path it uses can be renamed or replaced by
/// another user. Its last error line is kept for the error, naming `into` as `shown`; a parent
/// it cannot reach is [`ToolError::BadSources`], naming the stream `name`.
fn receive_stream(
    into: std::os::fd::BorrowedFd<'_>,
    shown: &Path,
    name: &str,
    input: Stdio,
    left: &'static str,
) -> Result<()> {
    const COMMAND: &str = "receive";
    let mut cmd = Command::new("btrfs");
    cmd.arg(COMMAND)
        .arg(butter_db::fs::PRIVATE_MOUNT)
        .stdin(input)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out =
        butter_db::fs::output_in_private_mount(&mut cmd, into).map_err(|e| ToolError::Btrfs {
            command: COMMAND,
            status: "did not start".into(),
            stderr: format!(
            "{e} (is btrfs-progs installed? btrfs receive runs in a mount namespace of its own, \
             which needs CAP_SYS_ADMIN)"
        ),
            left,
        })?;
    // btrfs receive run without privilege prints "Operation not permitted" (an ERROR line)
    // and still exits 0: a message like that is a failure too.
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && !said.contains("ERROR") && !said.contains("Operation not permitted")
    {
        return Ok(());
    }
    if said.contains("not reachable") {
        // btrfs receive looks an incremental stream's parent up by identity on the whole
        // filesystem, and can only use one inside the mount: one received earlier in this
        // restore.
        return Err(ToolError::BadSources(format!(
            "{name} is an incremental stream whose parent is not among the streams restored \
             before it: give the full stream first, then the incremental ones oldest first. \
             (If they were in that order, another subvolume received from the same stream is \
             on this filesystem and btrfs receive took it for the parent: a restore killed \
             before it finished leaves one in its DEST/{}; `butter remove` that DEST.) {left}",
            butter_db::admin::RECEIVE_DIR
        )));
    }
    // Its messages name the private mount; the user knows the directory as `shown`.
    let stderr =
        last_line(&out.stderr).replace(butter_db::fs::PRIVATE_MOUNT, &shown.to_string_lossy());
    Err(ToolError::Btrfs {
        command: COMMAND,
        status: out.status.to_string(),
        stderr,
        left,
    })
}

/// The directory a `--stream FILE` is written in, opened once (and checked: nobody but the
/// caller and root may write it, unless it is sticky), and the file's name there.
#[derive(Debug)]
struct StreamDir {
    dir: std::os::fd::OwnedFd,
    name: std::ffi::OsString,
    path: PathBuf,
}

impl StreamDir {
    fn open(file: &Path) -> Result<StreamDir> {
        use rustix::fs::{Mode, OFlags};
        let err = |op, source| ToolError::StreamFile {
            op,
            path: file.into(),
            source,
        };
        let Some(name) = file.file_name() else {
            return Err(err("create", std::io::ErrorKind::InvalidInput.into()));
        };
        let parent = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir = rustix::fs::open(
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| err("open the directory of", e.into()))?;
        if let Some(reason) = admin::shared_reason(std::os::fd::AsFd::as_fd(&dir))
            .map_err(|e| err("stat the directory of", e))?
        {
            return Err(ToolError::Engine(butter_db::Error::SharedDirectory {
                path: parent.into(),
                reason,
            }));
        }
        let stream = StreamDir {
            dir,
            name: name.to_os_string(),
            path: file.into(),
        };
        if rustix::fs::statat(
            &stream.dir,
            &stream.name,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .is_ok()
        {
            return Err(ToolError::StreamExists(file.into()));
        }
        Ok(stream)
    }

    /// Creates the file (`O_CREAT | O_EXCL | O_NOFOLLOW`; mode 0666 less the umask, as before)
    /// in the directory.
    fn create(&self) -> Result<File> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::openat(
            &self.dir,
            &self.name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        )
        .map_err(|e| ToolError::StreamFile {
            op: "create",
            path: self.path.clone(),
            source: e.into(),
        })?;
        Ok(File::from(fd))
    }

    /// Removes the file `made` (open) if the name in the directory still leads to it.
    fn remove(&self, made: &File) {
        let Ok(mine) = rustix::fs::fstat(made) else {
            return;
        };
        let same = rustix::fs::statat(&self.dir, &self.name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_dev == mine.st_dev && st.st_ino == mine.st_ino);
        if same {
            let _ = rustix::fs::unlinkat(&self.dir, &self.name, rustix::fs::AtFlags::empty());
        }
    }
}

/// Sends the generation open as `gen` (the difference from the subvolume `parent`, a root id,
/// if given) as a `btrfs send` stream into the stream file (created) or standard output, with
/// the kernel's `BTRFS_IOC_SEND`; returns the bytes written to a file (0 for standard output).
/// A failed send removes the file.
fn send(gen: &OwnedFd, parent: Option<u64>, file: Option<&StreamDir>) -> Result<u64> {
    let left = "the copy and the stream file were removed";
    let failed = |e: std::io::Error| ToolError::Btrfs {
        command: "send",
        status: "the BTRFS_IOC_SEND ioctl failed".into(),
        stderr: e.to_string(),
        left,
    };
    let Some(stream) = file else {
        let out = std::io::stdout();
        let _lock = out.lock();
        return butter_db::fs::send(gen.as_fd(), out.as_fd(), parent)
            .map(|()| 0)
            .map_err(failed);
    };
    let out = stream.create()?;
    let sent = butter_db::fs::send(gen.as_fd(), out.as_fd(), parent)
        .map_err(failed)
        .and_then(|()| {
            out.metadata().map_err(|source| ToolError::StreamFile {
                op: "stat",
                path: stream.path.clone(),
                source,
            })
        });
    match sent {
        Ok(meta) => Ok(meta.len()),
        Err(e) => {
            stream.remove(&out);
            Err(e)
        }
    }
}

/// `butter restore`'s result.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The new database's generation and identity.
    pub copy: CopyInfo,
    /// What `check` read of it before it was made openable.
    pub verified: Verified,
    /// How long it all took.
    pub elapsed: Duration,
}

/// `butter restore SOURCE... DEST`: DEST becomes a new database from a copy (one directory,
/// as `backup`) or from `btrfs send` streams (files, `-` for standard input; a full stream then
/// the incremental ones in order, root), received in `DEST/butter.receive/`. The result is
/// checked whole before it is made openable (its `butter.id` written last).
///
/// # Errors
/// [`ToolError::BadSources`], [`ToolError::Btrfs`] (a truncated or damaged stream),
/// [`ToolError::Engine`]; DEST is left as it was (absent, or empty).
pub fn restore(sources: &[PathBuf], dest: &Path) -> Result<Restored> {
    let t = Instant::now();
    let [first, ..] = sources else {
        return Err(ToolError::BadSources("nothing to restore from".into()));
    };
    // Each source is looked up once: opened here, then read through what was opened (a
    // directory through its handle, a stream file as `btrfs receive`'s standard input).
    let mut opened = sources
        .iter()
        .map(|s| open_source(s))
        .collect::<Result<Vec<_>>>()?;
    let from_dir = matches!(opened.first(), Some(Some((_, true))));
    if from_dir && sources.len() > 1 {
        return Err(ToolError::BadSources(
            "restore takes one database directory, or stream files".into(),
        ));
    }
    let held = match opened.first_mut() {
        Some(first @ Some((_, true))) => first.take().map(|(dir, _)| handle::Held::from_fd(dir)),
        _ => None,
    };
    let src = held.as_ref().map_or(first.as_path(), |h| h.via.as_path());
    let rebase = |e: butter_db::Error| match &held {
        Some(h) => h.name_as_given(e.into(), first),
        None => e.into(),
    };
    if from_dir {
        if src.join(plain::COPY_MANIFEST).exists() {
            return Err(ToolError::BadSources(format!(
                "{} is a plain copy (it holds {}): restore it with `butter restore --plain`; \
                 nothing was changed",
                first.display(),
                plain::COPY_MANIFEST
            )));
        }
        Snapshot::open(src).map_err(rebase)?;
    } else if let Some((s, _)) = sources
        .iter()
        .zip(&opened)
        .find(|(_, o)| matches!(o, Some((_, true))))
    {
        return Err(ToolError::BadSources(format!(
            "{} is a directory among streams",
            s.display()
        )));
    }
    if !from_dir && !effective_root() {
        return Err(ToolError::BadSources(
            "restoring from btrfs send streams needs root (btrfs receive sets the received \
             subvolume's identity, which only root may); nothing was changed. Run it as root, or \
             restore from a copy directory made by `butter backup`, which needs no root"
                .into(),
        ));
    }
    // DEST is opened once and checked; from here on it is reached through that handle (the
    // `btrfs receive` child through `/proc/<pid>/fd/N`), never through the path again.
    let mut copy = NewCopy::create(dest)?;
    if from_dir {
        copy.install_newest_of(src).map_err(rebase)?;
    } else {
        receive_streams(&mut copy, sources, opened, dest)?;
    }
    let verified = copy.verify()?;
    let info = copy.finish()?;
    Ok(Restored {
        copy: info,
        verified,
        elapsed: t.elapsed(),
    })
}

/// One source of `restore`, opened to be read (with whether it is a directory); `None` for
/// `-`, standard input.
fn open_source(s: &Path) -> Result<Option<(OwnedFd, bool)>> {
    if s.as_os_str() == "-" {
        return Ok(None);
    }
    let opened = handle::open_to_read(s).map_err(|source| ToolError::StreamFile {
        op: "open",
        path: s.to_path_buf(),
        source,
    })?;
    Ok(Some(opened))
}

/// Receives the streams (`opened` as [`open_source`] opened them) one by one into DEST's
/// receive subvolume, each of which must bring a generation newer than the one before, and
/// installs the newest.
fn receive_streams(
    copy: &mut NewCopy,
    sources: &[PathBuf],
    opened: Vec<Option<(OwnedFd, bool)>>,
    dest: &Path,
) -> Result<()> {
    let received = copy.receive_subvolume()?;
    let shown = dest.join(butter_db::admin::RECEIVE_DIR);
    let left = "nothing was left in the destination";
    let mut newest = None;
    // The generation each stream brought, which must grow from stream to stream.
    let mut last: Option<(u64, String)> = None;
    for (s, file) in sources.iter().zip(opened) {
        let before = copy.received()?;
        // A stream file is read from what was opened above (receive's standard input).
        let input = file.map_or_else(Stdio::inherit, |(f, _)| Stdio::from(f));
        let name = if s.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            s.display().to_string()
        };
        receive_stream(received.as_fd(), &shown, &name, input, left)?;
        let after = copy.received()?;
        let Some(new) = after.into_iter().find(|p| !before.contains(p)) else {
            return Err(ToolError::BadSources(format!(
                "{name} held no new generation (btrfs receive reported no error); nothing \
                 was left in the destination"
            )));
        };
        let generation = copy.open_received(&new)?.generation();
        if let Some((previous, from)) = &last {
            if generation <= *previous {
                return Err(ToolError::BadSources(format!(
                    "streams out of order: {name} holds generation {generation}, not newer \
                     than generation {previous} from {from}; give the full stream first, \
                     then the incremental ones oldest first; nothing was left in the \
                     destination"
                )));
            }
        }
        last = Some((generation, name));
        newest = Some(new);
    }
    let Some(gen) = newest else {
        return Err(ToolError::BadSources(
            "the streams held no new generation".into(),
        ));
    };
    let snap = copy.open_received(&gen)?;
    copy.install(&snap)?;
    Ok(())
}

/// Whether this process's effective user is root (from `/proc/self/status`).
fn effective_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
