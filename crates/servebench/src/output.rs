//! The one place that prints: report lines to stdout (or to a [`Sink`] a test reads), errors
//! to stderr.
//!
//! Printing goes through here so that a closed pipe (`servebench ... | head`) ends the program
//! quietly instead of panicking, and errors show their whole chain.

use std::fmt::Display;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};

/// Where a run's report goes: stdout, or memory that a test reads back. A run hands clones of
/// it to the load engine, whose progress lines come from its tasks, so it is shared, not
/// borrowed.
#[derive(Clone, Debug)]
pub enum Sink {
    Stdout,
    Memory(Arc<Mutex<Vec<u8>>>),
}

impl Sink {
    /// A sink that keeps what is written, for [`Sink::text`].
    pub fn memory() -> Sink {
        Sink::Memory(Arc::default())
    }

    /// What a memory sink holds (empty for stdout).
    pub fn text(&self) -> String {
        match self {
            Sink::Stdout => String::new(),
            Sink::Memory(m) => String::from_utf8_lossy(&m.lock().unwrap_or_else(PoisonError::into_inner)).into_owned(),
        }
    }

    /// Writes text as is (the caller supplies newlines), at once.
    pub fn out(&self, text: &str) -> io::Result<()> {
        self.bytes(text.as_bytes())
    }

    fn bytes(&self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stdout => {
                let mut stdout = io::stdout().lock();
                stdout.write_all(bytes)?;
                stdout.flush()
            }
            Sink::Memory(m) => {
                m.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// Writes one line.
    pub fn line(&self, text: impl Display) -> io::Result<()> {
        self.out(&format!("{text}\n"))
    }
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
