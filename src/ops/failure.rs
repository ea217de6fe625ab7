//! One failure type for every command: what to print and which exit code to return.

use crate::exit::Exit;
use crate::plan::Refusal;
use crate::state::StateError;

/// A command-level failure: what to print and which exit code to return.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn error(message: impl Into<String>) -> Self {
        Failure {
            exit: Exit::Error,
            message: message.into(),
        }
    }
    /// Print the failure (`Error: …` on stderr) and return its exit code. Messages quote what
    /// hosts answered (stderr lines, names): escaped, line breaks kept.
    /// With a debug log (`runlog`), the message goes there too and names it, as k0sctl's
    /// "apply failed - log file saved to …" (cmd/apply.go).
    pub fn report(self) -> Exit {
        if !self.message.is_empty() {
            let message = crate::ui::escape_lines(&self.message);
            eprintln!("Error: {message}");
            crate::runlog::line(&format!("error: {message:?}"));
            if let Some(log) = crate::runlog::path() {
                eprintln!("The debug log of this run is in {}", log.display());
            }
        }
        self.exit
    }
}

impl From<StateError> for Failure {
    fn from(e: StateError) -> Self {
        Failure {
            exit: e.exit(),
            message: e.to_string(),
        }
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        let mut message = format!("refused: {}", r.message);
        for d in &r.details {
            message.push_str("\n  ");
            message.push_str(d);
        }
        Failure {
            exit: r.exit(),
            message,
        }
    }
}
