//! SIGINT and SIGTERM during `replay`, without `unsafe`: the handlers (from `signal-hook`) only
//! set flags, and the replay loops look at them between batches.
//!
//! - The parent ([`Interrupt::install_parent`]): the first signal sets the flag; the parent
//!   forwards it to the running child, waits for the child to finish its current batch, writes
//!   the report of the batches done (marked interrupted) and exits non-zero. A second signal
//!   ends the parent at once (exit status 128 + signal number); its child then gets SIGTERM
//!   from the kernel (parent-death signal), its second signal, and ends at once too.
//! - A child ([`Interrupt::install_child`]): the first signal sets the flag; the child finishes
//!   its current batch, removes its database (read-only snapshots included) and writes a
//!   partial result. A second signal ends it at once (a batch can take arbitrarily long), and
//!   its database stays for `slasher-bench clean`. It runs in its own process group, so a Ctrl-C at the terminal reaches the parent
//!   alone and the child hears of it once, from the parent. [`Interrupt::die_with_parent`] asks
//!   the kernel for SIGTERM when the parent dies, so no child outlives its parent.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Whether (and by which signal) this process was asked to stop.
#[derive(Debug, Clone)]
pub struct Interrupt {
    flag: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

impl Interrupt {
    /// A flag no signal sets (for callers that do not install handlers).
    pub fn none() -> Self {
        Self {
            flag: Arc::new(AtomicBool::new(false)),
            signal: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn install() -> std::io::Result<Self> {
        let me = Self::none();
        for signal in [SIGINT, SIGTERM] {
            // Registered first, so it sees the flag as it was before this signal: it ends the
            // process on the second signal only.
            let code = 128 + signal;
            flag::register_conditional_shutdown(signal, code, Arc::clone(&me.flag))?;
            let number = usize::try_from(signal).unwrap_or_default();
            flag::register_usize(signal, Arc::clone(&me.signal), number)?;
            flag::register(signal, Arc::clone(&me.flag))?;
        }
        Ok(me)
    }

    /// The parent's handlers: the first signal sets the flag, the second ends the process.
    ///
    /// # Errors
    /// The handlers cannot be installed.
    pub fn install_parent() -> std::io::Result<Self> {
        Self::install()
    }

    /// A child's handlers: the first signal sets the flag (the child cleans up after its
    /// batch), the second ends the process.
    ///
    /// # Errors
    /// The handlers cannot be installed.
    pub fn install_child() -> std::io::Result<Self> {
        Self::install()
    }

    /// Ask the kernel to send this process SIGTERM when its parent dies, then check that the
    /// parent (`parent_pid`) has not died already; if it has, the flag is set.
    ///
    /// # Errors
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    pub fn die_with_parent(&self, parent_pid: u32) -> nix::Result<()> {
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)?;
        if std::os::unix::process::parent_id() != parent_pid {
            self.set_terminated();
        }
        Ok(())
    }

    /// Set the flag as a SIGTERM would (the parent is gone).
    pub fn set_terminated(&self) {
        self.signal.store(
            usize::try_from(SIGTERM).unwrap_or_default(),
            Ordering::SeqCst,
        );
        self.flag.store(true, Ordering::SeqCst);
    }

    /// Whether a signal arrived.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The signal that arrived, as a `nix` signal (SIGTERM if unknown).
    pub fn signal(&self) -> nix::sys::signal::Signal {
        let number = i32::try_from(self.signal.load(Ordering::SeqCst)).unwrap_or_default();
        nix::sys::signal::Signal::try_from(number).unwrap_or(nix::sys::signal::Signal::SIGTERM)
    }

    /// `SIGINT` or `SIGTERM`.
    pub fn signal_name(&self) -> &'static str {
        self.signal().as_str()
    }
}
