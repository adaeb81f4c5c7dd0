//! How long a database takes to open after its writer was killed (docs/runs/full-window.md):
//! a child process opens DB and commits transactions into a table of its own until the parent
//! SIGKILLs it, at a time that varies from round to round; the parent then drops the page
//! cache (a node restarting after a crash starts cold) and times opening DB, as the writer
//! would reopen it. Each round checks that the opened generation is the last one the child
//! reported committed, or the one after it (killed between the snapshot and its report). A
//! clean open is timed first, for comparison.
//!
//! ```sh
//! cargo run --release -p butter_db --example reopen -- DB [ROUNDS]
//! ```
//!
//! It writes into DB (a table `reopen-probe`): run it on a copy (`butter backup DB COPY`
//! makes one on the same filesystem without copying data, and `butter remove COPY` deletes it
//! afterwards). Dropping the page cache needs root; without it the reopen is timed warm and
//! the line says so. ROUNDS defaults to 3.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use butter_db::Env;

const PROBE: &str = "reopen-probe";

/// The child: commit 4 MiB transactions into `PROBE` forever, printing each committed
/// generation.
fn writer(db: &Path) -> ! {
    let env = Env::open_path(db).expect("open");
    let t = match env.table(PROBE) {
        Some(t) => t,
        None => env.create_table(PROBE).expect("create the probe table"),
    };
    let mut out = std::io::stdout().lock();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let value = [0x5au8; 1024];
    loop {
        let mut w = env.begin_write().expect("begin");
        for _ in 0..4096 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            w.put(t, &seed.to_be_bytes(), &value).expect("put");
        }
        let info = w.commit().expect("commit");
        writeln!(out, "{}", info.generation).expect("report");
        out.flush().expect("report");
    }
}

fn drop_caches() -> bool {
    let synced = Command::new("sync").status().is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

/// Open `db` and close it: (milliseconds, generation).
fn timed_open(db: &Path) -> (f64, u64) {
    let t = Instant::now();
    let env = Env::open_path(db).expect("open");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    (ms, env.generation())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(db) = args.first().map(Path::new) else {
        eprintln!("usage: reopen DB [ROUNDS]");
        std::process::exit(2);
    };
    if args.get(1).map(String::as_str) == Some("--writer") {
        writer(db);
    }
    let rounds: u64 = args.get(1).map_or(3, |r| r.parse().expect("ROUNDS"));
    let cold = drop_caches();
    let (ms, generation) = timed_open(db);
    let cache = if cold {
        "cold"
    } else {
        "warm (no root: page cache not dropped)"
    };
    println!("clean open: {ms:.0} ms, {cache}, generation {generation}");
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .arg(db)
            .arg("--writer")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the writer");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        // Kill after 2 to 6 commits, so that it lands in a commit at a varying point.
        let commits = 2 + round % 5;
        let mut last = 0u64;
        for _ in 0..commits {
            last = lines
                .next()
                .expect("the writer ended early")
                .expect("read")
                .parse()
                .expect("a generation");
        }
        std::thread::sleep(Duration::from_millis(37 * round));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        // What it reported after `commits` lines but before the kill counts too.
        for line in lines.map_while(Result::ok) {
            last = line.parse().unwrap_or(last);
        }
        let cold = drop_caches();
        let (ms, generation) = timed_open(db);
        assert!(
            generation == last || generation == last + 1,
            "round {round}: opened generation {generation}, the writer had committed {last}"
        );
        let cache = if cold { "cold" } else { "warm" };
        println!(
            "round {round}: killed after generation {last}; reopened generation {generation} in {ms:.0} ms ({cache})"
        );
    }
}
