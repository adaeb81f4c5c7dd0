//! `butter`: look at, check, copy, restore and remove butter_db databases.
//!
//! Every subcommand reads DIR without its lock and writes nothing there (except `remove`), so
//! it runs beside a live writer. Errors are one line on stderr, `butter: <what>`; the exit
//! status says what kind of failure it was ([`butter_tools::exit`]: 1 other, 2 usage, 3 not a
//! database, 4 corrupt, 5 I/O, 6 busy). `docs/operator.md` shows each command's output on the
//! mainnet sample's database.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use butter_tools::dumpload::{self, DumpStyle};
use butter_tools::plain::{self, PlainSource, PlainTarget};
use butter_tools::{Stat, StatOptions, StreamTarget, ToolError};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "butter", version, about = "Look at, check, copy, restore and remove butter_db databases", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Show tables, generations, the writer, filesystem usage, format and identity
    ///
    /// Per table: segments, their bytes and the entries they store, from the manifest and the
    /// segments' footers (fast, whatever the database's size); with --deep also entries, live
    /// and dead bytes and tombstones, reading every table whole. Also the generations on disk,
    /// the process holding the writer's lock, the filesystem's usage, the format version and
    /// the identity. Beside a live writer. A damaged table is reported on its row (exit status
    /// 4), the others still shown.
    Stat {
        /// The database directory.
        dir: PathBuf,
        /// Only this table.
        table: Option<String>,
        /// Read every table whole: entries, live and dead bytes, tombstones.
        #[arg(long)]
        deep: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Verify the newest generation whole, read-only
    ///
    /// Reads every segment block, index and footer of the newest generation, its manifest and
    /// identity; checks CRCs, key order and counts. Exits 1 naming the first thing wrong.
    /// Writes nothing: runs beside a live writer.
    Check {
        /// The database directory.
        dir: PathBuf,
    },
    /// Copy the newest committed generation: a new database, plain files or a tar stream
    ///
    /// Makes DEST a new database holding DIR's newest committed generation while the writer
    /// goes on: btrfs snapshots on the same filesystem (instant, no data copied, no root). The
    /// copy gets an identity of its own. With --stream, also writes DEST's generation as a
    /// `btrfs send` stream (root); with --parent, one holding only what changed since an
    /// earlier copy. With --plain, DEST is instead a directory on any filesystem (new or
    /// empty) that gets the generation's files and a list of their lengths and SHA-256, read
    /// back before success; `-` writes them as a tar stream to standard output; no root. With
    /// --compact, DEST is a new database on any btrfs filesystem holding only the entries a
    /// reader sees (no overwritten or deleted ones), compared entry for entry with DIR's.
    Backup {
        /// The database directory.
        dir: PathBuf,
        /// The copy: a new or empty directory on DIR's btrfs filesystem, outside DIR (with
        /// --plain: on any filesystem, or `-`; with --compact: on any btrfs filesystem).
        #[arg(value_name = "DEST|-")]
        dest: PathBuf,
        /// Also write a `btrfs send` stream of the copy to FILE (created; `-` for standard
        /// output), for `restore` on another filesystem or machine. Needs root.
        #[arg(long, value_name = "FILE|-")]
        stream: Option<PathBuf>,
        /// With --stream: an earlier copy (the DEST of an earlier backup, kept as it was);
        /// the stream then holds only what changed since it.
        #[arg(long, value_name = "PREV", requires = "stream")]
        parent: Option<PathBuf>,
        /// Write the generation's files as plain files into DEST, on any filesystem, or as a
        /// tar stream to standard output with DEST `-`; `restore --plain` makes a database of
        /// either. No root, no btrfs at DEST.
        #[arg(long, conflicts_with_all = ["stream", "compact"])]
        plain: bool,
        /// Write a new database holding only live entries (like `mdb_copy -c`), on any btrfs
        /// filesystem.
        #[arg(long, conflicts_with_all = ["stream", "plain"])]
        compact: bool,
    },
    /// Make a new database from a copy, a plain copy or send streams
    ///
    /// Makes DEST a new database from a copy (a directory) or from `btrfs send` streams (files,
    /// or `-` for standard input: the full stream first, then incremental ones in order;
    /// root). With --plain, from what `backup --plain` wrote: its directory, a tar file, or
    /// `-` for a tar stream on standard input; each file is checked against the copy's list;
    /// no root. The result is checked whole before it can be opened; a failed restore leaves
    /// nothing.
    Restore {
        /// A copy made by `backup`, or stream files (with --plain: one plain copy directory,
        /// tar file, or `-`).
        #[arg(required = true, num_args = 1..)]
        sources: Vec<PathBuf>,
        /// The new database: a new or empty directory on btrfs.
        dest: PathBuf,
        /// The source is a plain copy (`backup --plain`): a directory, a tar file or `-`.
        #[arg(long)]
        plain: bool,
    },
    /// Print tables' entries in hex, in the format `load` reads
    ///
    /// For each table a header `butter-dump format=1 table=NAME`, one `key value` line per
    /// entry in key order as a reader of the newest generation sees them, and `end entries=N`.
    /// --from and --to bound the keys; --raw prints the entry lines alone.
    Dump {
        /// The database directory.
        dir: PathBuf,
        /// The tables (`--list` lists them).
        #[arg(required_unless_present_any = ["list", "all"], conflicts_with_all = ["list", "all"])]
        tables: Vec<String>,
        /// List the table names, one a line, and nothing else.
        #[arg(long)]
        list: bool,
        /// Every table.
        #[arg(long, conflicts_with = "list")]
        all: bool,
        /// The entry lines alone, without header and end line (`load` does not read this).
        #[arg(long)]
        raw: bool,
        /// First key (hex, inclusive).
        #[arg(long, value_name = "HEX")]
        from: Option<String>,
        /// End key (hex, exclusive).
        #[arg(long, value_name = "HEX")]
        to: Option<String>,
        /// At most N entries of each table.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
    },
    /// Make a new database from a dump
    ///
    /// Reads what `dump` (or `dump --all`) wrote, from standard input or --input, into a new
    /// database in DIR, which must not exist. Refuses a malformed or truncated dump (each
    /// section ends with its entry count), keys out of order, a table given twice; on any
    /// failure DIR is removed again, so nothing is left.
    Load {
        /// The new database directory.
        dir: PathBuf,
        /// Read this file instead of standard input.
        #[arg(long, value_name = "FILE|-")]
        input: Option<PathBuf>,
    },
    /// Delete a database with its read-only snapshots
    ///
    /// Deletes DIR with its read-only snapshots, which `rm -rf` cannot, also without root.
    /// Refuses, changing nothing, a directory that is not a butter database (or holds anything
    /// else), and one a process has open. Finishes a copy or removal that was interrupted.
    Remove {
        /// The database directory.
        dir: PathBuf,
    },
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// Prints `stat`'s table: the database's lines, then a row per table (and a total for more
/// than one), or the damage that kept its generation from opening.
fn print_stat(s: &Stat, out: &mut impl Write) -> std::io::Result<()> {
    print_stat_database(s, out)?;
    if let Some(d) = &s.damage {
        writeln!(out, "DAMAGED      {d}")?;
        return Ok(());
    }
    writeln!(out)?;
    print_stat_tables(s, out)
}

/// Prints `stat`'s lines about the database as a whole: identity, format, generations, the
/// writer, `live/` and `compact/`, the manifest and the filesystem.
fn print_stat_database(s: &Stat, out: &mut impl Write) -> std::io::Result<()> {
    let gens: Vec<String> = s.generations_on_disk.iter().map(u64::to_string).collect();
    writeln!(out, "database     {}", s.path.display())?;
    writeln!(out, "identity     {}", s.identity)?;
    // Without an opened generation there is no format, manifest or table to show.
    let opened = s.damage.is_none();
    if opened {
        writeln!(out, "format       {}", s.format_version)?;
    } else {
        writeln!(
            out,
            "format       unknown (the generation could not be opened)"
        )?;
    }
    writeln!(
        out,
        "generation   {} (on disk: {})",
        s.generation,
        gens.join(", ")
    )?;
    writeln!(
        out,
        "writer       {}",
        match s.lock_holder {
            Some(pid) => format!("pid {pid} holds the lock"),
            None => "none (the lock is free)".into(),
        }
    )?;
    writeln!(
        out,
        "live/        {}; compact/ {} merge outputs ({} MiB)",
        if s.live { "present" } else { "absent" },
        s.merge_outputs,
        mib(s.merge_output_bytes)
    )?;
    if opened {
        writeln!(
            out,
            "manifest     {} bytes, next segment {}",
            s.manifest_bytes, s.next_segment
        )?;
    }
    writeln!(
        out,
        "filesystem   {} MiB, {} MiB used, {} MiB available",
        mib(s.filesystem.total),
        mib(s.filesystem.used),
        mib(s.filesystem.available)
    )
}

/// Prints `stat`'s table of tables: the header, a row per table with its damage if any, and
/// the total row when there is more than one table (`--deep` adds its columns to each).
fn print_stat_tables(s: &Stat, out: &mut impl Write) -> std::io::Result<()> {
    let opt = |v: Option<u64>, f: &dyn Fn(u64) -> String| v.map_or_else(|| "-".into(), f);
    if s.deep {
        writeln!(
            out,
            "{:<28} {:>8} {:>10} {:>12} {:>12} {:>10} {:>10} {:>11}",
            "table",
            "segments",
            "file MiB",
            "stored",
            "entries",
            "live MiB",
            "dead MiB",
            "tombstones"
        )?;
    } else {
        writeln!(
            out,
            "{:<28} {:>8} {:>10} {:>12}",
            "table", "segments", "file MiB", "stored"
        )?;
    }
    let total = total_row(s);
    let rows: Vec<&butter_tools::TableRow> = if s.tables.len() > 1 {
        s.tables.iter().chain(std::iter::once(&total)).collect()
    } else {
        s.tables.iter().collect()
    };
    for t in rows {
        write!(
            out,
            "{:<28} {:>8} {:>10} {:>12}",
            t.name,
            t.segments,
            mib(t.file_bytes),
            t.stored_entries
        )?;
        if s.deep {
            write!(
                out,
                " {:>12} {:>10} {:>10} {:>11}",
                opt(t.entries, &|v| v.to_string()),
                opt(t.live_bytes, &mib),
                opt(t.dead_bytes, &mib),
                opt(t.tombstones, &|v| v.to_string())
            )?;
        }
        writeln!(out)?;
        if let Some(d) = &t.damage {
            writeln!(out, "  DAMAGED: {d}")?;
        }
    }
    Ok(())
}

/// The `total` row of `stat`: the tables' figures added up (a `--deep` figure only while
/// every table has it).
fn total_row(s: &Stat) -> butter_tools::TableRow {
    let mut total = butter_tools::TableRow {
        name: "total".into(),
        ..Default::default()
    };
    let add = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a + b);
    if s.deep {
        (
            total.entries,
            total.live_bytes,
            total.dead_bytes,
            total.tombstones,
        ) = (Some(0), Some(0), Some(0), Some(0));
    }
    for t in &s.tables {
        total.stored_entries += t.stored_entries;
        total.segments += t.segments;
        total.file_bytes += t.file_bytes;
        total.entries = add(total.entries, t.entries);
        total.live_bytes = add(total.live_bytes, t.live_bytes);
        total.dead_bytes = add(total.dead_bytes, t.dead_bytes);
        total.tombstones = add(total.tombstones, t.tombstones);
    }
    total
}

/// The marker `slasher-bench replay` leaves in a database it keeps (`--keep-db`).
const BENCH_MARKER: &str = ".slasher-bench-db";

/// `remove` refuses a database holding the bench's marker (an entry the engine did not make);
/// the error then says which tool removes it.
fn bench_hint(dir: &Path, e: ToolError) -> ToolError {
    if dir.join(BENCH_MARKER).is_file() && e.exit_code() == butter_tools::exit::NOT_A_DATABASE {
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        return ToolError::BenchKept(format!(
            "{e} (it holds {BENCH_MARKER}: `slasher-bench replay --keep-db` kept it; remove it \
             with `slasher-bench clean {}` or `slasher-bench clean {}`)",
            dir.display(),
            parent.display()
        ));
    }
    e
}

/// Runs a command; `Some(status)` for a command that succeeded but must end with another
/// status (`stat` on a damaged database).
fn run(cli: Cli) -> Result<Option<u8>, ToolError> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Cmd::Stat {
            dir,
            table,
            deep,
            json,
        } => return stat(&dir, table, deep, json, &mut out),
        Cmd::Check { dir } => check(&dir, &mut out)?,
        Cmd::Backup {
            dir,
            dest,
            plain: true,
            ..
        } => backup_plain(&dir, &dest, out)?,
        Cmd::Backup {
            dir,
            dest,
            compact: true,
            ..
        } => backup_compact(&dir, &dest, &mut out)?,
        Cmd::Backup {
            dir,
            dest,
            stream,
            parent,
            ..
        } => backup(&dir, &dest, stream, parent, out)?,
        Cmd::Restore {
            sources,
            dest,
            plain,
        } => restore(&sources, &dest, plain, &mut out)?,
        Cmd::Dump {
            dir,
            tables,
            list,
            all,
            raw,
            from,
            to,
            limit,
        } => dump(&dir, tables, list, all, raw, from, to, limit, &mut out)?,
        Cmd::Load { dir, input } => load(&dir, input, &mut out)?,
        Cmd::Remove { dir } => remove(&dir, &mut out)?,
    }
    Ok(None)
}

/// `stat`: prints the table (or JSON); `Some(CORRUPT)` if anything was found damaged.
fn stat(
    dir: &Path,
    table: Option<String>,
    deep: bool,
    json: bool,
    out: &mut impl Write,
) -> Result<Option<u8>, ToolError> {
    let s = butter_tools::stat(dir, &StatOptions { deep, table })?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &s).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        print_stat(&s, out)?;
    }
    if s.damaged() {
        return Ok(Some(butter_tools::exit::CORRUPT));
    }
    Ok(None)
}

/// `check`: verifies the newest generation and prints what it read.
fn check(dir: &Path, out: &mut impl Write) -> Result<(), ToolError> {
    let c = butter_tools::check(dir)?;
    let v = c.verified;
    writeln!(
        out,
        "ok: {} generation {}: {} tables, {} segments, {} blocks, {} entries, {} MiB read in {:.2} s",
        dir.display(),
        c.generation,
        v.tables,
        v.segments,
        v.blocks,
        v.entries,
        mib(v.bytes),
        c.elapsed.as_secs_f64()
    )?;
    Ok(())
}

/// `backup --plain`: copies the generation as plain files into DEST, or as a tar stream to
/// standard output for DEST `-` (the report then goes to stderr).
fn backup_plain(dir: &Path, dest: &Path, out: impl Write) -> Result<(), ToolError> {
    let target = if dest.as_os_str() == "-" {
        PlainTarget::Stdout
    } else {
        PlainTarget::Dir(dest.to_path_buf())
    };
    let b = plain::backup_plain(dir, &target)?;
    let m = &b.manifest;
    // With the tar stream on standard output, the report goes to stderr.
    let mut report: Box<dyn Write> = match target {
        PlainTarget::Stdout => Box::new(std::io::stderr()),
        PlainTarget::Dir(_) => Box::new(out),
    };
    let (to, checked) = match (&target, b.verify_time) {
        (PlainTarget::Dir(d), Some(v)) => (
            d.display().to_string(),
            format!("; read back and checked in {:.3} s", v.as_secs_f64()),
        ),
        _ => (
            format!("standard output (tar, {} bytes)", b.written),
            String::new(),
        ),
    };
    writeln!(
        report,
        "copied generation {} of {} (identity {}) as plain files to {to}: {} files, {} MiB, in {:.3} s{checked}",
        m.generation,
        dir.display(),
        m.identity,
        m.files.len(),
        mib(m.bytes()),
        b.copy_time.as_secs_f64()
    )?;
    Ok(())
}

/// `backup --compact`: writes a new database of the live entries and prints what it holds.
fn backup_compact(dir: &Path, dest: &Path, out: &mut impl Write) -> Result<(), ToolError> {
    let c = butter_tools::compact::compact(dir, dest)?;
    writeln!(
        out,
        "compacted generation {} of {} (identity {}, {} MiB of segments) into {} (identity {}, generation {}): {} tables, {} entries, {} MiB of segments, written in {} commits in {:.3} s; read back and compared entry for entry in {:.3} s",
        c.source_generation,
        dir.display(),
        c.source_identity,
        mib(c.source_bytes),
        dest.display(),
        c.copy.identity,
        c.copy.generation,
        c.tables,
        c.entries,
        mib(c.copy.bytes),
        c.commits,
        c.copy_time.as_secs_f64(),
        c.verify_time.as_secs_f64()
    )?;
    Ok(())
}

/// `backup`: copies the generation by snapshots, with `--stream` also writing a send stream
/// (the report goes to stderr when the stream goes to standard output).
fn backup(
    dir: &Path,
    dest: &Path,
    stream: Option<PathBuf>,
    parent: Option<PathBuf>,
    out: impl Write,
) -> Result<(), ToolError> {
    let target = stream.map(|s| StreamTarget {
        file: (s.as_os_str() != "-").then_some(s),
        parent,
    });
    let b = butter_tools::backup(dir, dest, target.as_ref())?;
    // With the stream on standard output, the report goes to stderr.
    let mut report: Box<dyn Write> = if target.as_ref().is_some_and(|t| t.file.is_none()) {
        Box::new(std::io::stderr())
    } else {
        Box::new(out)
    };
    writeln!(
        report,
        "copied generation {} of {} (identity {}) to {} (identity {}): {} MiB shared, in {:.3} s",
        b.copy.generation,
        dir.display(),
        b.copy.source_identity,
        dest.display(),
        b.copy.identity,
        mib(b.copy.bytes),
        b.copy_time.as_secs_f64()
    )?;
    if let (Some((bytes, time)), Some(t)) = (b.stream, &target) {
        let to = t
            .file
            .as_ref()
            .map_or("standard output".into(), |f| f.display().to_string());
        let kind = match b.parent_generation {
            Some(g) => format!("incremental from generation {g}"),
            None => "full".into(),
        };
        // Bytes are counted for a file; on standard output they pass by uncounted.
        let size = if t.file.is_some() {
            format!(": {bytes} bytes")
        } else {
            String::new()
        };
        writeln!(
            report,
            "stream ({kind}) written to {to}{size} in {:.3} s",
            time.as_secs_f64()
        )?;
    }
    Ok(())
}

/// `restore`: makes DEST from a copy or streams, or with `--plain` from one plain copy, and
/// prints what was checked.
fn restore(
    sources: &[PathBuf],
    dest: &Path,
    plain: bool,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let r = if plain {
        let [source] = sources else {
            return Err(ToolError::BadSources(
                "restore --plain takes one plain copy: a directory, a tar file or -".into(),
            ));
        };
        plain::restore_plain(&PlainSource::from_arg(source), dest)?
    } else {
        butter_tools::restore(sources, dest)?
    };
    let v = r.verified;
    writeln!(
        out,
        "restored generation {} (identity {}) as {} (identity {}); checked {} segments, {} entries, {} MiB; in {:.3} s",
        r.copy.generation,
        r.copy.source_identity,
        dest.display(),
        r.copy.identity,
        v.segments,
        v.entries,
        mib(v.bytes),
        r.elapsed.as_secs_f64()
    )?;
    Ok(())
}

/// `dump`: prints the tables' entries (every table with `--all`), or with `--list` their
/// names; the key bounds are checked first either way.
#[allow(clippy::too_many_arguments)]
fn dump(
    dir: &Path,
    tables: Vec<String>,
    list: bool,
    all: bool,
    raw: bool,
    from: Option<String>,
    to: Option<String>,
    limit: Option<u64>,
    out: &mut impl Write,
) -> Result<(), ToolError> {
    let from = from
        .map(|h| butter_tools::parse_hex("--from", &h))
        .transpose()?;
    let to = to
        .map(|h| butter_tools::parse_hex("--to", &h))
        .transpose()?;
    // DIR is looked up once; the listing and the dump read it through the handle.
    butter_tools::handle::through_handle(dir, |held| {
        let via = held.via.as_path();
        if list {
            for name in dumpload::list_tables(via)? {
                writeln!(out, "{name}")?;
            }
            return Ok(());
        }
        let tables = if all {
            dumpload::list_tables(via)?
        } else {
            tables
        };
        let mut buffered = std::io::BufWriter::new(&mut *out);
        dumpload::dump(
            via,
            &tables,
            from.as_deref(),
            to.as_deref(),
            limit,
            if raw {
                DumpStyle::Raw
            } else {
                DumpStyle::Sections
            },
            &mut buffered,
        )?;
        buffered.flush()?;
        Ok(())
    })
}

/// `load`: makes a new database from a dump and prints what it loaded.
fn load(dir: &Path, input: Option<PathBuf>, out: &mut impl Write) -> Result<(), ToolError> {
    let mut reader = dumpload::open_input(input.as_ref())?;
    let l = dumpload::load(dir, &mut reader)?;
    let tables: Vec<String> = l
        .tables
        .iter()
        .map(|(t, n)| format!("{t} ({n} entries)"))
        .collect();
    writeln!(
        out,
        "loaded {} into {}: {}; {} MiB of keys and values in {} commits",
        input.map_or("standard input".into(), |p| p.display().to_string()),
        dir.display(),
        tables.join(", "),
        mib(l.bytes),
        l.commits
    )?;
    Ok(())
}

/// `remove`: deletes the database with its snapshots and prints what went.
fn remove(dir: &Path, out: &mut impl Write) -> Result<(), ToolError> {
    let r = butter_tools::remove(dir).map_err(|e| bench_hint(dir, e))?;
    writeln!(
        out,
        "removed {}: {} generations, {} other subvolumes, {} merge outputs",
        dir.display(),
        r.generations,
        r.other_subvolumes,
        r.merge_outputs
    )?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(status)) => ExitCode::from(status),
        Err(ToolError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "butter: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
