//! What `warmpath` prints: progress lines and the banner, on stdout, flushed at once.

/// Prints `warmpath: MSG` on stdout, flushed. Errors are ignored: a closed stdout (the
/// reader of a pipe went away) must not panic `warmpath` before it stops its children.
pub fn say(msg: impl std::fmt::Display) {
    out(&format!("warmpath: {msg}"));
}

/// Writes `text` and a newline to stdout and flushes, ignoring errors (see [`say`]).
pub fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{text}");
    let _ = o.flush();
}
