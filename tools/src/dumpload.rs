//! `butter dump` with a header, `dump --list` / `--all`, and `butter load`, its inverse.
//!
//! The dump format (version 1), one section per table, text, one item a line:
//!
//! ```text
//! butter-dump format=1 table=NAME
//! KEY VALUE
//! ...
//! end entries=N
//! ```
//!
//! KEY and VALUE are lowercase hex (an empty value leaves nothing after the space), keys
//! strictly ascending as the engine orders them (bytewise). A table whose name is not
//! printable ASCII without spaces or `=` is named `table-hex=HEX` instead. The `end` line
//! carries the section's entry count, so that a truncated dump is refused rather than loaded
//! in part. `dump --all` writes every table's section, one after the other; `--raw` writes the
//! entry lines alone (the format before version 1, which `load` does not read).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use butter_db::admin::Snapshot;
use butter_db::{Env, EnvBuilder};

use crate::{Result, ToolError};

/// The dump format's version, in every section's header.
pub const DUMP_FORMAT: u32 = 1;

/// `load` commits after this many bytes of keys and values…
pub const LOAD_COMMIT_BYTES: u64 = 64 << 20;

/// …or this many entries, whichever comes first (a transaction's memory is per entry as much
/// as per byte: 5M small entries make 64 MiB).
pub const LOAD_COMMIT_ENTRIES: u64 = 1_000_000;

/// The first word of a section's header.
const MAGIC: &str = "butter-dump";

/// Opens `dir` for reading, with a clear error for something that is not a directory.
///
/// # Errors
/// [`ToolError::NotADirectory`], [`ToolError::Engine`].
pub fn open_snapshot(dir: &Path) -> Result<Snapshot> {
    require_dir(dir)?;
    Ok(Snapshot::open(dir)?)
}

/// `dir` must be a directory (a database is one): a file gets a clear error instead of the
/// engine's "I/O error during lstat FILE/butter.incomplete: Not a directory".
///
/// # Errors
/// [`ToolError::NotADirectory`]; a missing path is left to the engine (it says "not a
/// butter_db database").
pub fn require_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(ToolError::NotADirectory(dir.to_path_buf())),
        _ => Ok(()),
    }
}

/// The table names of the newest generation, in the manifest's order.
///
/// # Errors
/// As [`open_snapshot`].
pub fn list_tables(dir: &Path) -> Result<Vec<String>> {
    Ok(open_snapshot(dir)?
        .tables()
        .into_iter()
        .map(|t| t.name)
        .collect())
}

fn plain_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b'=')
}

fn check_table(snap: &Snapshot, table: &str) -> Result<()> {
    let names: Vec<String> = snap.tables().into_iter().map(|t| t.name).collect();
    if names.iter().any(|n| n == table) {
        Ok(())
    } else {
        Err(ToolError::NoSuchTable {
            name: table.into(),
            tables: if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
        })
    }
}

/// What [`dump`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpStyle {
    /// Header, entries, end line: what `load` reads.
    Sections,
    /// Entry lines alone.
    Raw,
}

/// `butter dump DIR TABLE...`: each table's entries in `[from, to)` (at most `limit` a table),
/// in the dump format. Returns the entries written.
///
/// # Errors
/// [`ToolError::NoSuchTable`] listing the tables there are, [`ToolError::Engine`],
/// [`ToolError::Output`].
pub fn dump(
    dir: &Path,
    tables: &[String],
    from: Option<&[u8]>,
    to: Option<&[u8]>,
    limit: Option<u64>,
    style: DumpStyle,
    out: &mut dyn Write,
) -> Result<u64> {
    let snap = open_snapshot(dir)?;
    for t in tables {
        check_table(&snap, t)?;
    }
    let mut total = 0;
    for table in tables {
        if style == DumpStyle::Sections {
            if plain_name(table) {
                writeln!(out, "{MAGIC} format={DUMP_FORMAT} table={table}")?;
            } else {
                writeln!(
                    out,
                    "{MAGIC} format={DUMP_FORMAT} table-hex={}",
                    hex::encode(table)
                )?;
            }
        }
        let mut n = 0u64;
        let mut write_error = None;
        snap.scan(table, from, to, |k, v| {
            if limit.is_some_and(|l| n >= l) {
                return false;
            }
            n += 1;
            match writeln!(out, "{} {}", hex::encode(k), hex::encode(v)) {
                Ok(()) => true,
                Err(e) => {
                    write_error = Some(e);
                    false
                }
            }
        })?;
        if let Some(e) = write_error {
            return Err(e.into());
        }
        if style == DumpStyle::Sections {
            writeln!(out, "end entries={n}")?;
        }
        total += n;
    }
    Ok(total)
}

/// What `load` made.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Per table loaded: its name and entries.
    pub tables: Vec<(String, u64)>,
    /// Bytes of keys and values.
    pub bytes: u64,
    /// Transactions committed.
    pub commits: u64,
}

fn bad(line: u64, reason: impl Into<String>) -> ToolError {
    ToolError::BadDump {
        line,
        reason: reason.into(),
    }
}

/// Parses a section header; `None` if the line is not one.
fn parse_header(line_no: u64, line: &str) -> Result<String> {
    let mut words = line.split(' ');
    if words.next() != Some(MAGIC) {
        return Err(bad(
            line_no,
            format!("expected a section header `{MAGIC} format={DUMP_FORMAT} table=NAME`"),
        ));
    }
    let mut format = None;
    let mut table = None;
    for w in words {
        match w.split_once('=') {
            Some(("format", v)) => format = Some(v.to_string()),
            Some(("table", v)) => table = Some(v.to_string()),
            Some(("table-hex", v)) => {
                let raw = hex::decode(v).map_err(|e| bad(line_no, format!("table-hex: {e}")))?;
                table = Some(
                    String::from_utf8(raw).map_err(|_| bad(line_no, "table-hex is not UTF-8"))?,
                );
            }
            _ => return Err(bad(line_no, format!("unknown header field {w:?}"))),
        }
    }
    match format.as_deref() {
        Some(v) if v == DUMP_FORMAT.to_string() => {}
        Some(v) => {
            return Err(bad(
                line_no,
                format!("dump format {v}; this build reads format {DUMP_FORMAT}"),
            ))
        }
        None => return Err(bad(line_no, "the header has no format=")),
    }
    table.ok_or_else(|| bad(line_no, "the header names no table"))
}

/// `butter load DIR`: makes DIR a new database holding the tables of a dump read from
/// `input` (one or more sections). DIR must not exist; it is created, and removed again if
/// anything fails (a malformed or truncated dump, a table given twice, a full disk), so a
/// failed load leaves nothing. Commits every [`LOAD_COMMIT_BYTES`] or [`LOAD_COMMIT_ENTRIES`],
/// whichever comes first, so memory stays bounded.
///
/// # Errors
/// [`ToolError::LoadDestination`], [`ToolError::BadDump`], [`ToolError::Engine`],
/// [`ToolError::Output`] (reading the input).
pub fn load(dir: &Path, input: &mut dyn BufRead) -> Result<Loaded> {
    use std::os::fd::{AsFd, AsRawFd};
    let Some((parent_path, name)) = parent_and_name(dir) else {
        return Err(ToolError::LoadDestination(dir.to_path_buf()));
    };
    // The parent is resolved once and checked; the new directory is made, opened and filled
    // through handles, so that nobody can swap a name for a symlink in between.
    let parent = open_parent(parent_path)?;
    refuse_shared_parent(parent.as_fd(), parent_path)?;
    match rustix::fs::mkdirat(parent.as_fd(), name, rustix::fs::Mode::from_raw_mode(0o700)) {
        Ok(()) => {}
        Err(rustix::io::Errno::EXIST) => return Err(ToolError::LoadDestination(dir.to_path_buf())),
        Err(e) => {
            return Err(ToolError::StreamFile {
                op: "create directory",
                path: dir.to_path_buf(),
                source: e.into(),
            })
        }
    }
    let (db, id) = match open_dir_with_id(parent.as_fd(), name) {
        Ok(made) => made,
        Err(source) => {
            // Somebody else's by now (renamed or replaced since the mkdirat): left alone.
            return Err(ToolError::StreamFile {
                op: "open the new directory",
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let via = PathBuf::from(format!("/proc/self/fd/{}/.", db.as_raw_fd()));
    let result = EnvBuilder::new(&via)
        .open()
        .map_err(ToolError::from)
        .and_then(|env| load_into(&env, input))
        .map_err(|e| match e {
            ToolError::Engine(e) => ToolError::Engine(e.rebased(&via, dir)),
            other => other,
        });
    drop(db);
    if result.is_err() {
        // Ours: made above (its identity checked), and its environment is closed; removed
        // through the parent's handle, only if the name still leads to it.
        let _ = butter_db::fs::BtrfsFs.remove_tree_at(parent.as_fd(), name, Some(id));
    }
    result
}

/// `path` as the directory that holds it (`.` for a bare name) and its name there; `None` for a
/// path without a final name (`/`, `..`).
pub(crate) fn parent_and_name(path: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some((parent, name))
}

/// Opens the directory `name` of the open directory `parent` (a symlink there is not
/// followed), with its identity, so that a later removal can check that the name still leads
/// to it.
pub(crate) fn open_dir_with_id(
    parent: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
) -> std::io::Result<(std::os::fd::OwnedFd, butter_db::fs::FileId)> {
    let fd = butter_db::fs::open_dir_at(parent, name)?;
    let id = butter_db::fs::FileId::of(std::os::fd::AsFd::as_fd(&fd))?;
    Ok((fd, id))
}

/// Opens the directory that will hold a new database (following symlinks in `path`, which is
/// the caller's), once.
pub(crate) fn open_parent(path: &Path) -> Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| ToolError::StreamFile {
        op: "open directory",
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// Refuses (`SharedDirectory`, nothing created) a new database directory whose parent users
/// other than the caller and root can write (unless it is sticky): they could swap the new
/// directory while the database is built in it.
pub(crate) fn refuse_shared_parent(parent: std::os::fd::BorrowedFd<'_>, path: &Path) -> Result<()> {
    match butter_db::admin::shared_reason(parent) {
        Ok(Some(reason)) => Err(ToolError::Engine(butter_db::Error::SharedDirectory {
            path: path.to_path_buf(),
            reason,
        })),
        Ok(None) => Ok(()),
        Err(source) => Err(ToolError::StreamFile {
            op: "stat",
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn load_into(env: &Env, input: &mut dyn BufRead) -> Result<Loaded> {
    let mut loaded = Loaded::default();
    let mut txn = env.begin_write()?;
    let mut pending = 0u64;
    let mut pending_entries = 0u64;
    let mut current: Option<(butter_db::TableHandle, u64, Option<Vec<u8>>)> = None;
    let mut line_no = 0u64;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        line_no += 1;
        let text = line.strip_suffix('\n').unwrap_or(&line);
        let Some((handle, n, last)) = current.as_mut() else {
            if text.is_empty() {
                continue;
            }
            let name = parse_header(line_no, text)?;
            if loaded.tables.iter().any(|(t, _)| *t == name) {
                return Err(bad(line_no, format!("table {name:?} is given twice")));
            }
            let handle = txn.create_table(&name)?;
            loaded.tables.push((name, 0));
            current = Some((handle, 0, None));
            continue;
        };
        if let Some(count) = text.strip_prefix("end entries=") {
            let count: u64 = count
                .parse()
                .map_err(|_| bad(line_no, format!("bad entry count {count:?}")))?;
            if count != *n {
                return Err(bad(
                    line_no,
                    format!("the section ends saying {count} entries; it has {n}"),
                ));
            }
            if let Some(t) = loaded.tables.last_mut() {
                t.1 = *n;
            }
            current = None;
            continue;
        }
        let (k, v) = text
            .split_once(' ')
            .ok_or_else(|| bad(line_no, "expected `KEY VALUE` in hex"))?;
        let key = hex::decode(k).map_err(|e| bad(line_no, format!("key: {e}")))?;
        let value = hex::decode(v).map_err(|e| bad(line_no, format!("value: {e}")))?;
        if last.as_ref().is_some_and(|l| *l >= key) {
            return Err(bad(line_no, "keys are not in ascending order"));
        }
        txn.put(*handle, &key, &value)?;
        let bytes = (key.len() + value.len()) as u64;
        *n += 1;
        *last = Some(key);
        loaded.bytes += bytes;
        pending += bytes;
        pending_entries += 1;
        if pending >= LOAD_COMMIT_BYTES || pending_entries >= LOAD_COMMIT_ENTRIES {
            txn.commit()?;
            loaded.commits += 1;
            txn = env.begin_write()?;
            pending = 0;
            pending_entries = 0;
        }
    }
    if let Some((_, n, _)) = current {
        return Err(bad(
            line_no,
            format!("the input ends inside a section after {n} entries (no `end` line): truncated"),
        ));
    }
    if loaded.tables.is_empty() {
        return Err(bad(line_no, "the input holds no section"));
    }
    txn.commit()?;
    loaded.commits += 1;
    Ok(loaded)
}

/// Where `load` reads: a file, or standard input for `None` or `-`.
///
/// # Errors
/// [`ToolError::StreamFile`].
pub fn open_input(file: Option<&PathBuf>) -> Result<Box<dyn BufRead>> {
    match file.filter(|f| f.as_os_str() != "-") {
        None => Ok(Box::new(std::io::stdin().lock())),
        Some(f) => {
            let file = std::fs::File::open(f).map_err(|source| ToolError::StreamFile {
                op: "open",
                path: f.clone(),
                source,
            })?;
            Ok(Box::new(std::io::BufReader::new(file)))
        }
    }
}
