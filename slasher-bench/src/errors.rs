//! How `slasher-bench` prints an error: the message, then each cause once.
//!
//! The typed errors of this crate follow one rule: an error that carries an underlying error
//! returns it from `source()` and does not repeat it in its own message. The printer walks the
//! chain and prints every cause once; it also skips a cause whose text repeats the line before
//! it (wrappers from other crates that both show and return their source).
//!
//! Backtraces: a user error (a bad path, a bad argument, a corrupt file) is printed without
//! one, whatever `RUST_BACKTRACE` says. `slasher-bench --backtrace ...` or
//! `SLASHER_BENCH_BACKTRACE=1` asks for the backtrace of where the error was made. (Panics
//! still follow `RUST_BACKTRACE`, as in every Rust program.)

/// The environment variable that asks for backtraces of errors.
pub const BACKTRACE_ENV: &str = "SLASHER_BENCH_BACKTRACE";

/// Whether the user asked for error backtraces (`--backtrace` or [`BACKTRACE_ENV`] set to
/// anything but empty or `0`).
pub fn backtrace_wanted(flag: bool) -> bool {
    flag || std::env::var(BACKTRACE_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The messages of `e` and its causes, outermost first, each once.
pub fn messages(e: &anyhow::Error) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        let repeated = out
            .last()
            .is_some_and(|prev| prev == &text || prev.ends_with(&format!(": {text}")));
        if !repeated && !text.is_empty() {
            out.push(text);
        }
    }
    out
}

/// The error on one line: messages joined with `: ` (for report rows and warnings).
pub fn chain_text(e: &anyhow::Error) -> String {
    messages(e).join(": ")
}

/// The error as printed to stderr: `error: MESSAGE` and one `  caused by: CAUSE` line per
/// cause; then the backtrace if `backtrace` is set.
pub fn render(e: &anyhow::Error, backtrace: bool) -> String {
    let mut lines = messages(e).into_iter();
    let mut s = format!("error: {}\n", lines.next().unwrap_or_default());
    for cause in lines {
        s.push_str(&format!("  caused by: {cause}\n"));
    }
    if backtrace {
        let bt = e.backtrace();
        match bt.status() {
            std::backtrace::BacktraceStatus::Captured => {
                s.push_str(&format!("error backtrace:\n{bt}\n"));
            }
            _ => s.push_str("error backtrace: not captured\n"),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let e = Err::<(), _>(io)
            .context("open x: gone")
            .context("reading the fixture")
            .expect_err("an error");
        assert_eq!(messages(&e), ["reading the fixture", "open x: gone"]);
        assert_eq!(chain_text(&e), "reading the fixture: open x: gone");
        let text = render(&e, false);
        assert_eq!(text.matches("gone").count(), 1, "{text}");
        assert!(!text.contains("backtrace"));
    }
}
