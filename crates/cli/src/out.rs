//! Output of the commands that keep SIGPIPE ignored because they change the
//! node (`put`, `publish-dir`): a reader that went away (`granary put … | head
//! -c0`) costs the rest of the output, never the work after it (`println!`
//! would panic there, before `publish-dir` tells the daemon of its files).

use std::io::Write;

/// Writes one line to standard output; a closed pipe is not an error.
pub fn say_line(args: std::fmt::Arguments) {
    let r = writeln!(std::io::stdout().lock(), "{args}");
    if let Err(e) = r {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = writeln!(std::io::stderr().lock(), "granary: standard output: {e}");
        }
    }
}

/// Set once a command has printed its JSON answer (a report that says what
/// failed): `main` then does not add `{"error": …}` when the command fails.
static JSON_ANSWERED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints `v` as the command's one JSON answer (see [`json_answered`]).
pub fn json_answer(v: &serde_json::Value) {
    JSON_ANSWERED.store(true, std::sync::atomic::Ordering::Relaxed);
    println!("{v}");
}

/// Records that the command printed its JSON answer itself (a report that
/// may be followed by a failure, such as `catalog check --json`).
pub fn mark_json_answered() {
    JSON_ANSWERED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// True when the command printed its JSON answer already.
pub fn json_answered() -> bool {
    JSON_ANSWERED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Writes one line to standard error; a closed pipe is not an error.
pub fn tell_line(args: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// `println!` that survives a closed standard output.
macro_rules! say {
    ($($t:tt)*) => { $crate::out::say_line(format_args!($($t)*)) };
}

/// `eprintln!` that survives a closed standard error.
macro_rules! tell {
    ($($t:tt)*) => { $crate::out::tell_line(format_args!($($t)*)) };
}

pub(crate) use {say, tell};
