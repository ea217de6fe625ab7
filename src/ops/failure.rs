//! One failure type for every command: what to print and which exit code to return.

use crate::exit::Exit;
use crate::plan::Refusal;
use crate::state::StateError;

/// A command-level failure: what to print and which exit code to return.
#[derive(Debug)]
pub struct Failure {
    code: Exit,
    message: String,
}

impl Failure {
    pub fn new(code: Exit, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
    /// Exit 1.
    pub fn error(message: impl Into<String>) -> Self {
        Failure::new(Exit::Error, message)
    }
    /// The exit code this failure ends the run with.
    pub fn code(&self) -> Exit {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The same failure with its message passed through `f`.
    pub fn map_message(self, f: impl FnOnce(&str) -> String) -> Self {
        Failure {
            message: f(&self.message),
            ..self
        }
    }
    /// Print the failure (`Error: …` on stderr) and return its exit code. Messages quote what
    /// hosts, states and lock files say (stderr lines, names, addresses): always escaped, line
    /// breaks kept. With a debug log (`runlog`), the message goes there too and names it, as
    /// k0sctl's "apply failed - log file saved to …" (cmd/apply.go).
    pub fn exit(self) -> Exit {
        if !self.message.is_empty() {
            let message = crate::escape::escape_lines(&self.message);
            eprintln!("Error: {message}");
            crate::runlog::line(&format!("error: {message:?}"));
            if let Some(log) = crate::runlog::path() {
                eprintln!("The debug log of this run is in {}", log.display());
            }
        }
        self.code
    }
}

impl From<StateError> for Failure {
    fn from(e: StateError) -> Self {
        Failure::new(e.exit(), e.to_string())
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        let mut message = format!("refused: {}", r.message);
        for d in &r.details {
            message.push_str("\n  ");
            message.push_str(d);
        }
        Failure::new(r.exit(), message)
    }
}
