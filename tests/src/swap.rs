//! The hostile-swap tier's tracer (`tests/tests/hostile_swap.rs`, docs/reliability.md §4.1).
//!
//! [`trace`] runs a command, and every process and thread it starts, under `ptrace`, stopping
//! each at the entry of every system call. Of the calls that name a path it keeps those whose
//! lookup walks through the shared directory (a directory another user can write): an absolute
//! path below it, or a path relative to a working directory or a directory handle that *is*
//! that directory. A path relative to a handle below it (`openat(fd, "compact")`), or
//! `/proc/self/fd/N/.` (the kernel's magic link to an open directory), names nothing in it and
//! is not kept. Each kept call is reported with the entry of the shared directory its lookup
//! goes through: the component another user can rename and replace by a symlink.
//!
//! With a stop point `k`, the tracer holds the thread about to make the `k`-th such call (the
//! swap points are numbered as [`SwapPoints`] says) and runs a callback, the swap, before it
//! lets the call go on. x86-64 Linux only (the system call numbers and registers below).

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Event, Options};
use nix::sys::signal::{self, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// A system call that names a path through the shared directory.
#[derive(Debug, Clone)]
pub struct SharedCall {
    /// The system call's name.
    pub syscall: &'static str,
    /// The path as the kernel will walk it (absolute: the base joined with the argument).
    pub path: PathBuf,
    /// The entry of the shared directory the walk looks up.
    pub entry: OsString,
    /// The thread that made it.
    pub tid: i32,
}

/// How the traced command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Exit status.
    Exited(i32),
    /// Killed by this signal.
    Signaled(String),
    /// Killed by the tracer after its time limit.
    TimedOut,
}

impl Ended {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        *self == Ended::Exited(0)
    }
}

/// What [`trace`] saw.
#[derive(Debug)]
pub struct Traced {
    /// Every call through the shared directory, in the order the tracer saw them.
    pub calls: Vec<SharedCall>,
    /// How the command ended.
    pub ended: Ended,
    /// Standard output and error.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// The call the tracer stopped before (if it was given a stop point the run reached).
    pub stopped_before: Option<SharedCall>,
}

/// The swap points among a run's calls: a call is the *resolution* of its entry if no earlier
/// call went through that entry (the command looks the user's path up for the first time: a
/// symlink there is what the user named), and a *swap point* otherwise (the command looks up
/// again a name it has already resolved: another user may have replaced it in between).
#[derive(Debug, Default)]
pub struct SwapPoints {
    seen: BTreeSet<OsString>,
    /// Resolutions so far.
    pub resolutions: usize,
    /// Swap points so far.
    pub points: usize,
}

impl SwapPoints {
    /// Classifies the next call: `Some(n)` if it is swap point `n` (from 1).
    pub fn next(&mut self, call: &SharedCall) -> Option<usize> {
        if self.seen.insert(call.entry.clone()) {
            self.resolutions += 1;
            None
        } else {
            self.points += 1;
            Some(self.points)
        }
    }
}

/// What to run and where.
#[derive(Debug)]
pub struct Run<'a> {
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    /// Its working directory.
    pub cwd: &'a Path,
    /// A file for its standard input (else `/dev/null`).
    pub stdin: Option<&'a Path>,
    /// Where its standard output and error go (two files, `<scratch>/stdout`, `stderr`).
    pub scratch: &'a Path,
    /// The shared directory (canonical path).
    pub shared: &'a Path,
    /// Killed after this long.
    pub limit: Duration,
    /// The user (and group) it runs as; `None`: this process's.
    pub uid: Option<u32>,
}

/// Where [`trace`] holds the command: the swap point's number and the swap to run there.
pub type StopAt<'a> = (usize, &'a mut dyn FnMut(&SharedCall));

/// A system call's path arguments: (index of its directory descriptor argument, if any; index
/// of its path argument).
type PathArgs = &'static [(Option<usize>, usize)];

/// The x86-64 system calls that look a path up, with their path arguments.
fn path_syscall(nr: u64) -> Option<(&'static str, PathArgs)> {
    const P0: PathArgs = &[(None, 0)];
    const AT1: PathArgs = &[(Some(0), 1)];
    Some(match nr {
        2 => ("open", P0),
        4 => ("stat", P0),
        6 => ("lstat", P0),
        21 => ("access", P0),
        59 => ("execve", P0),
        76 => ("truncate", P0),
        80 => ("chdir", P0),
        82 => ("rename", &[(None, 0), (None, 1)]),
        83 => ("mkdir", P0),
        84 => ("rmdir", P0),
        85 => ("creat", P0),
        86 => ("link", &[(None, 0), (None, 1)]),
        87 => ("unlink", P0),
        88 => ("symlink", &[(None, 1)]),
        89 => ("readlink", P0),
        90 => ("chmod", P0),
        92 => ("chown", P0),
        94 => ("lchown", P0),
        132 => ("utime", P0),
        133 => ("mknod", P0),
        137 => ("statfs", P0),
        161 => ("chroot", P0),
        165 => ("mount", &[(None, 0), (None, 1)]),
        166 => ("umount2", P0),
        188 => ("setxattr", P0),
        189 => ("lsetxattr", P0),
        191 => ("getxattr", P0),
        192 => ("lgetxattr", P0),
        194 => ("listxattr", P0),
        195 => ("llistxattr", P0),
        197 => ("removexattr", P0),
        198 => ("lremovexattr", P0),
        235 => ("utimes", P0),
        254 => ("inotify_add_watch", &[(None, 1)]),
        257 => ("openat", AT1),
        258 => ("mkdirat", AT1),
        259 => ("mknodat", AT1),
        260 => ("fchownat", AT1),
        261 => ("futimesat", AT1),
        262 => ("newfstatat", AT1),
        263 => ("unlinkat", AT1),
        264 => ("renameat", &[(Some(0), 1), (Some(2), 3)]),
        265 => ("linkat", &[(Some(0), 1), (Some(2), 3)]),
        266 => ("symlinkat", &[(Some(1), 2)]),
        267 => ("readlinkat", AT1),
        268 => ("fchmodat", AT1),
        269 => ("faccessat", AT1),
        280 => ("utimensat", AT1),
        301 => ("fanotify_mark", &[(Some(3), 4)]),
        303 => ("name_to_handle_at", AT1),
        316 => ("renameat2", &[(Some(0), 1), (Some(2), 3)]),
        322 => ("execveat", AT1),
        332 => ("statx", AT1),
        428 => ("open_tree", AT1),
        429 => ("move_mount", &[(Some(0), 1), (Some(2), 3)]),
        437 => ("openat2", AT1),
        439 => ("faccessat2", AT1),
        442 => ("mount_setattr", AT1),
        452 => ("fchmodat2", AT1),
        _ => return None,
    })
}

/// `AT_FDCWD` as the kernel reads a directory descriptor argument (an `int`).
const AT_FDCWD: i32 = -100;

/// The entry of `shared` that walking `path` from `base` looks up, if any (lexically: `..`
/// goes to the parent, symlinks inside the walk are not followed here).
pub fn entry_looked_up(shared: &Path, base: &Path, path: &Path) -> Option<OsString> {
    let mut cur = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    for c in path.components() {
        match c {
            Component::RootDir => cur = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(name) => {
                if cur == shared {
                    return Some(name.to_os_string());
                }
                cur.push(name);
            }
        }
    }
    None
}

/// Reads a NUL-terminated string of at most 4096 bytes at `addr` in `tid`'s memory.
fn read_cstring(mem: &File, addr: u64) -> Option<OsString> {
    let mut out = Vec::new();
    let mut buf = [0u8; 256];
    while out.len() < 4096 {
        let at = addr + out.len() as u64;
        let n = mem.read_at(&mut buf, at).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some(OsStr::from_bytes(&out).to_os_string());
        }
        out.extend_from_slice(&buf[..n]);
    }
    None
}

/// The shared-directory calls among the path arguments of the call `nr` that `tid` is entering.
fn shared_calls(
    tid: Pid,
    nr: u64,
    args: [u64; 6],
    shared: &Path,
    mem: &mut HashMap<Pid, File>,
) -> Option<SharedCall> {
    let (name, path_args) = path_syscall(nr)?;
    for &(dirfd, at) in path_args {
        if args[at] == 0 {
            continue;
        }
        let file = match mem.entry(tid) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(File::open(format!("/proc/{tid}/mem")).ok()?)
            }
        };
        let Some(text) = read_cstring(file, args[at]) else {
            continue;
        };
        let path = PathBuf::from(&text);
        if path.as_os_str().is_empty() {
            continue; // AT_EMPTY_PATH: the descriptor itself, no name.
        }
        let base = if path.is_absolute() {
            PathBuf::from("/")
        } else {
            let fd = dirfd.map_or(AT_FDCWD, |i| args[i] as i32);
            let link = if fd == AT_FDCWD {
                format!("/proc/{tid}/cwd")
            } else {
                format!("/proc/{tid}/fd/{fd}")
            };
            match std::fs::read_link(link) {
                Ok(b) => b,
                Err(_) => continue,
            }
        };
        if let Some(entry) = entry_looked_up(shared, &base, &path) {
            return Some(SharedCall {
                syscall: name,
                path: base.join(&path),
                entry,
                tid: tid.as_raw(),
            });
        }
    }
    None
}

/// Runs `run` under ptrace, listing the calls through the shared directory; with
/// `stop = Some((k, swap))`, calls `swap(call)` with the thread held right before swap point
/// `k` (numbered by [`SwapPoints`]), then lets it go on.
///
/// # Panics
/// If the command cannot be started or traced (the tier cannot run then).
pub fn trace(run: &Run<'_>, mut stop: Option<StopAt<'_>>) -> Traced {
    let stdout_path = run.scratch.join("stdout");
    let stderr_path = run.scratch.join("stderr");
    let stdin = match run.stdin {
        Some(p) => Stdio::from(File::open(p).expect("open the command's input")),
        None => Stdio::null(),
    };
    // The shell stops itself; once the tracer has seized it, it execs the command, so every
    // call of the command is traced from its first.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("kill -STOP $$; exec \"$0\" \"$@\"")
        .args(&run.argv)
        .current_dir(run.cwd)
        .stdin(stdin)
        .stdout(File::create(&stdout_path).expect("stdout file"))
        .stderr(File::create(&stderr_path).expect("stderr file"))
        .process_group(0);
    if let Some(uid) = run.uid {
        // Run as root, std also clears the supplementary groups.
        cmd.uid(uid).gid(uid);
    }
    let child = cmd.spawn().expect("start the traced command");
    let pid = Pid::from_raw(child.id() as i32);
    match waitpid(pid, Some(WaitPidFlag::WUNTRACED)) {
        Ok(WaitStatus::Stopped(_, Signal::SIGSTOP)) => {}
        other => panic!("the traced shell did not stop itself: {other:?}"),
    }
    let options = Options::PTRACE_O_TRACESYSGOOD
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_EXITKILL;
    ptrace::seize(pid, options).expect("PTRACE_SEIZE the command");
    signal::kill(pid, Signal::SIGCONT).expect("continue the command");

    // A watchdog ends the whole process group after the limit.
    let done = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (done, timed_out, limit) = (done.clone(), timed_out.clone(), run.limit);
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(Ordering::Acquire) {
                if start.elapsed() > limit {
                    timed_out.store(true, Ordering::Release);
                    let _ = signal::killpg(pid, Signal::SIGKILL);
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let mut in_call: HashMap<Pid, bool> = HashMap::new();
    let mut mem: HashMap<Pid, File> = HashMap::new();
    let mut calls = Vec::new();
    let mut points = SwapPoints::default();
    let mut stopped_before = None;
    let mut ended = None;
    loop {
        let status = match waitpid(None, Some(WaitPidFlag::__WALL)) {
            Ok(s) => s,
            Err(Errno::ECHILD) => break,
            Err(Errno::EINTR) => continue,
            Err(e) => panic!("waitpid: {e}"),
        };
        match status {
            WaitStatus::Exited(p, code) => {
                in_call.remove(&p);
                mem.remove(&p);
                if p == pid {
                    ended = Some(Ended::Exited(code));
                }
            }
            WaitStatus::Signaled(p, sig, _) => {
                in_call.remove(&p);
                mem.remove(&p);
                if p == pid {
                    ended = Some(Ended::Signaled(format!("{sig:?}")));
                }
            }
            WaitStatus::PtraceSyscall(p) => {
                let entering = !in_call.get(&p).copied().unwrap_or(false);
                in_call.insert(p, entering);
                if entering {
                    if let Ok(regs) = ptrace::getregs(p) {
                        let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
                        if let Some(call) =
                            shared_calls(p, regs.orig_rax, args, run.shared, &mut mem)
                        {
                            let point = points.next(&call);
                            if let (Some(n), Some((k, swap))) = (point, stop.as_mut()) {
                                if n == *k && stopped_before.is_none() {
                                    swap(&call);
                                    stopped_before = Some(call.clone());
                                }
                            }
                            calls.push(call);
                        }
                    }
                }
                let _ = ptrace::syscall(p, None);
            }
            WaitStatus::PtraceEvent(p, _, event) => {
                if event == Event::PTRACE_EVENT_EXEC as i32 {
                    // The process image changed: its memory file too.
                    mem.remove(&p);
                }
                let _ = ptrace::syscall(p, None);
            }
            WaitStatus::Stopped(p, sig) => {
                // A signal on its way to the tracee: deliver it.
                let _ = ptrace::syscall(p, Some(sig));
            }
            WaitStatus::Continued(_) | WaitStatus::StillAlive => {}
        }
    }
    done.store(true, Ordering::Release);
    let _ = watchdog.join();
    drop(child);
    let ended = if timed_out.load(Ordering::Acquire) {
        Ended::TimedOut
    } else {
        ended.unwrap_or(Ended::Signaled("unknown".into()))
    };
    Traced {
        calls,
        ended,
        stdout: std::fs::read(&stdout_path).unwrap_or_default(),
        stderr: std::fs::read(&stderr_path).unwrap_or_default(),
        stopped_before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_through_the_shared_directory() {
        let s = Path::new("/m/s");
        let e = |base: &str, path: &str| {
            entry_looked_up(s, Path::new(base), Path::new(path)).map(|e| e.into_string().unwrap())
        };
        assert_eq!(e("/", "/m/s/a/db"), Some("a".into()));
        assert_eq!(e("/x", "/m/s"), None);
        assert_eq!(e("/m/s", "b/c"), Some("b".into()));
        assert_eq!(e("/m/s/a", "db"), None, "relative to a handle below it");
        assert_eq!(e("/m/s/a", "../b"), Some("b".into()));
        assert_eq!(e("/", "/proc/self/fd/3/."), None);
        assert_eq!(e("/m", "s/./a"), Some("a".into()));
    }

    #[test]
    fn the_first_lookup_of_an_entry_resolves_it() {
        let call = |entry: &str| SharedCall {
            syscall: "openat",
            path: PathBuf::new(),
            entry: entry.into(),
            tid: 1,
        };
        let mut p = SwapPoints::default();
        assert_eq!(p.next(&call("a")), None);
        assert_eq!(p.next(&call("b")), None);
        assert_eq!(p.next(&call("a")), Some(1));
        assert_eq!(p.next(&call("b")), Some(2));
        assert_eq!((p.resolutions, p.points), (2, 2));
    }
}
