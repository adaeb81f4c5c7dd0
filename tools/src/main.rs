//! `butter`: look at, check, copy, restore and remove butter_db databases.
//!
//! Every subcommand reads DIR without its lock and writes nothing there (except `remove`), so
//! it runs beside a live writer. Errors are one line on stderr, `butter: <what>`; exit status
//! 0 on success, 1 on an error, 2 on a usage error. `docs/operator.md` shows each command's
//! output on the mainnet sample's database.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use butter_tools::{Stat, StreamTarget, ToolError};
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
    /// Per table: entries, live and dead bytes, tombstones, segments. Also the generations on
    /// disk, the process holding the writer's lock, the filesystem's usage, the format version
    /// and the identity. Reads every segment of the newest generation, beside a live writer.
    Stat {
        /// The database directory.
        dir: PathBuf,
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
    /// Copy the newest committed generation into a new database (and a send stream)
    ///
    /// Makes DEST a new database holding DIR's newest committed generation while the writer
    /// goes on: btrfs snapshots on the same filesystem (instant, no data copied, no root). The
    /// copy gets an identity of its own. With --stream, also writes DEST's generation as a
    /// `btrfs send` stream (root); with --parent, one holding only what changed since an
    /// earlier copy.
    Backup {
        /// The database directory.
        dir: PathBuf,
        /// The copy: a new or empty directory on DIR's btrfs filesystem, outside DIR.
        dest: PathBuf,
        /// Also write a `btrfs send` stream of the copy to FILE (created; `-` for standard
        /// output), for `restore` on another filesystem or machine. Needs root.
        #[arg(long, value_name = "FILE|-")]
        stream: Option<PathBuf>,
        /// With --stream: an earlier copy (the DEST of an earlier backup, kept as it was);
        /// the stream then holds only what changed since it.
        #[arg(long, value_name = "PREV", requires = "stream")]
        parent: Option<PathBuf>,
    },
    /// Make a new database from a copy or from send streams
    ///
    /// Makes DEST a new database from a copy (a directory) or from `btrfs send` streams (files,
    /// or `-` for standard input: the full stream first, then incremental ones in order;
    /// root). The result is checked whole before it can be opened; a failed restore leaves
    /// nothing.
    Restore {
        /// A copy made by `backup`, or stream files.
        #[arg(required = true, num_args = 1..)]
        sources: Vec<PathBuf>,
        /// The new database: a new or empty directory on btrfs.
        dest: PathBuf,
    },
    /// Print a table's entries in hex
    ///
    /// One `key value` line per entry, in key order, as a reader of the newest generation
    /// sees them; --from and --to bound the keys.
    Dump {
        /// The database directory.
        dir: PathBuf,
        /// The table's name (`butter stat` lists them).
        table: String,
        /// First key (hex, inclusive).
        #[arg(long, value_name = "HEX")]
        from: Option<String>,
        /// End key (hex, exclusive).
        #[arg(long, value_name = "HEX")]
        to: Option<String>,
        /// At most N entries.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
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

fn print_stat(s: &Stat, out: &mut impl Write) -> std::io::Result<()> {
    let gens: Vec<String> = s.generations_on_disk.iter().map(u64::to_string).collect();
    writeln!(out, "database     {}", s.path.display())?;
    writeln!(out, "identity     {}", s.identity)?;
    writeln!(out, "format       {}", s.format_version)?;
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
    writeln!(
        out,
        "manifest     {} bytes, next segment {}",
        s.manifest_bytes, s.next_segment
    )?;
    writeln!(
        out,
        "filesystem   {} MiB, {} MiB used, {} MiB available",
        mib(s.filesystem.total),
        mib(s.filesystem.used),
        mib(s.filesystem.available)
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<28} {:>12} {:>10} {:>10} {:>11} {:>8} {:>10}",
        "table", "entries", "live MiB", "dead MiB", "tombstones", "segments", "file MiB"
    )?;
    let total = s.tables.iter().fold(
        butter_tools::TableRow {
            name: "total".into(),
            ..Default::default()
        },
        |mut sum, t| {
            sum.entries += t.entries;
            sum.live_bytes += t.live_bytes;
            sum.dead_bytes += t.dead_bytes;
            sum.tombstones += t.tombstones;
            sum.segments += t.segments;
            sum.file_bytes += t.file_bytes;
            sum
        },
    );
    for t in s.tables.iter().chain(std::iter::once(&total)) {
        writeln!(
            out,
            "{:<28} {:>12} {:>10} {:>10} {:>11} {:>8} {:>10}",
            t.name,
            t.entries,
            mib(t.live_bytes),
            mib(t.dead_bytes),
            t.tombstones,
            t.segments,
            mib(t.file_bytes)
        )?;
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), ToolError> {
    let mut out = std::io::stdout().lock();
    match cli.command {
        Cmd::Stat { dir, json } => {
            let s = butter_tools::stat(&dir)?;
            if json {
                serde_json::to_writer_pretty(&mut out, &s).map_err(std::io::Error::from)?;
                writeln!(out)?;
            } else {
                print_stat(&s, &mut out)?;
            }
        }
        Cmd::Check { dir } => {
            let c = butter_tools::check(&dir)?;
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
        }
        Cmd::Backup {
            dir,
            dest,
            stream,
            parent,
        } => {
            let target = stream.map(|s| StreamTarget {
                file: (s.as_os_str() != "-").then_some(s),
                parent,
            });
            let b = butter_tools::backup(&dir, &dest, target.as_ref())?;
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
                writeln!(
                    report,
                    "stream ({kind}) written to {to}: {bytes} bytes in {:.3} s",
                    time.as_secs_f64()
                )?;
            }
        }
        Cmd::Restore { sources, dest } => {
            let r = butter_tools::restore(&sources, &dest)?;
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
        }
        Cmd::Dump {
            dir,
            table,
            from,
            to,
            limit,
        } => {
            let from = from
                .map(|h| butter_tools::parse_hex("--from", &h))
                .transpose()?;
            let to = to
                .map(|h| butter_tools::parse_hex("--to", &h))
                .transpose()?;
            let mut buffered = std::io::BufWriter::new(out);
            butter_tools::dump(
                &dir,
                &table,
                from.as_deref(),
                to.as_deref(),
                limit,
                &mut buffered,
            )?;
            buffered.flush()?;
        }
        Cmd::Remove { dir } => {
            let r = butter_tools::remove(&dir)?;
            writeln!(
                out,
                "removed {}: {} generations, {} other subvolumes, {} merge outputs",
                dir.display(),
                r.generations,
                r.other_subvolumes,
                r.merge_outputs
            )?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(ToolError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "butter: {e}");
            ExitCode::FAILURE
        }
    }
}
