//! The one place that prints: report lines to stdout, errors to stderr.
//!
//! Printing goes through these functions so that a closed pipe (`servebench ... | head`) ends
//! the program quietly instead of panicking, and errors show their whole chain.

use std::fmt::Display;
use std::io::{self, Write};

/// Writes text to stdout as is (the caller supplies newlines).
pub fn out(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

/// Writes one line to stdout.
pub fn line(text: impl Display) -> io::Result<()> {
    out(&format!("{text}\n"))
}

/// Writes one line of progress or a note to stderr; a closed stderr is ignored.
pub fn note(text: impl Display) {
    let _ = writeln!(io::stderr(), "{text}");
}

/// Prints an error and its causes to stderr.
pub fn error(e: &(dyn std::error::Error + 'static)) {
    let mut msg = format!("Error: {e}");
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(&format!("\n  caused by: {s}"));
        source = s.source();
    }
    let _ = writeln!(io::stderr(), "{msg}");
}

/// Whether an error, or one of its causes, came from writing to a closed pipe.
pub fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source())
        .any(|c| c.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe))
}
