//! Spec diagnostics: one problem found in a spec file, with file:line:column, the dotted field
//! path and a severity. Loading collects all of them instead of stopping at the first.

use std::fmt;
use std::path::PathBuf;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding. `line`/`column` are 1-based; 0 means "no position" (e.g. a file that could not
/// be read). `field` is a dotted path like `spec.hosts[1].ssh.port` (0-based indexes), or empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: u32,
    pub column: u32,
    pub field: String,
    pub message: String,
    pub severity: Severity,
}

impl Diagnostic {
    pub fn error(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        Diagnostic {
            file: file.into(),
            line: 0,
            column: 0,
            field: field.into(),
            message: msg.into(),
            severity: Severity::Error,
        }
    }

    pub fn warning(
        file: impl Into<PathBuf>,
        field: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(file, field, msg)
        }
    }

    pub fn at(mut self, line: u32, column: u32) -> Self {
        self.line = line;
        self.column = column;
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Version of `validate -json`'s object (schema/validate.schema.json).
pub const VALIDATE_FORMAT_VERSION: u32 = 1;

/// `validate -json`: the outcome and the same diagnostics the text form prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ValidationReport {
    pub format_version: u32,
    /// No error (warnings allowed).
    pub valid: bool,
    pub error_count: usize,
    pub warning_count: usize,
    /// Errors and warnings in the order the text form prints them.
    pub diagnostics: Vec<DiagnosticJson>,
    /// The text form's last line, e.g. `The spec is valid: 3 hosts (…) in cluster "prod".`
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct DiagnosticJson {
    pub severity: Severity,
    pub file: String,
    /// 1-based; absent when the problem has no position (e.g. a file that cannot be read).
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// Dotted path like `spec.hosts[1].ssh.port`; empty when the problem is the whole file.
    pub field: String,
    pub message: String,
}

impl From<&Diagnostic> for DiagnosticJson {
    fn from(d: &Diagnostic) -> Self {
        let pos = |n: u32| (d.line > 0).then_some(n);
        DiagnosticJson {
            severity: d.severity,
            file: d.file.display().to_string(),
            line: pos(d.line),
            column: pos(d.column),
            field: d.field.clone(),
            message: d.message.clone(),
        }
    }
}

impl ValidationReport {
    pub fn new(diagnostics: &[Diagnostic], summary: String) -> Self {
        let error_count = diagnostics.iter().filter(|d| d.is_error()).count();
        ValidationReport {
            format_version: VALIDATE_FORMAT_VERSION,
            valid: error_count == 0,
            error_count,
            warning_count: diagnostics.len() - error_count,
            diagnostics: diagnostics.iter().map(DiagnosticJson::from).collect(),
            summary,
        }
    }
}

/// schema/validate.schema.json.
pub fn validate_json_schema() -> String {
    let schema = schemars::schema_for!(ValidationReport);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        write!(f, ": {}: ", self.severity.as_str())?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// Everything `spec::load` found when the spec is not usable: at least one error, plus any
/// warnings, sorted by file, position and field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }
    pub fn error_count(&self) -> usize {
        self.errors().count()
    }
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }
    pub(crate) fn sort(&mut self) {
        // Stable: findings at the same spot keep the order they were found in.
        self.0
            .sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        self.0.dedup();
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Closest candidate by edit distance, if close enough to be a plausible typo.
pub(crate) fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = input.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            // A case-only difference (`keypath`) is always the best guess.
            let d = if c.to_ascii_lowercase() == lower {
                0
            } else {
                // Optimal string alignment: swapping two neighbours counts as one edit (`prot` → `port`).
                strsim::osa_distance(&lower, &c.to_ascii_lowercase())
            };
            (d, c)
        })
        .filter(|(d, c)| *d <= (c.len().max(input.len()) / 3).max(1))
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_position_severity_and_field() {
        let d = Diagnostic::error("k0sctl.yaml", "spec.hosts[1].ssh.port", "bad port").at(7, 15);
        assert_eq!(
            d.to_string(),
            "k0sctl.yaml:7:15: error: spec.hosts[1].ssh.port: bad port"
        );
        let w = Diagnostic::warning("a.yaml", "", "no version");
        assert_eq!(w.to_string(), "a.yaml: warning: no version");
    }

    #[test]
    fn suggestions() {
        let keys = ["address", "user", "port", "keyPath", "bastion"];
        assert_eq!(did_you_mean("keyPth", keys), Some("keyPath"));
        assert_eq!(did_you_mean("keypath", keys), Some("keyPath"));
        assert_eq!(did_you_mean("adress", keys), Some("address"));
        assert_eq!(did_you_mean("prot", keys), Some("port"));
        assert_eq!(did_you_mean("zzzzzz", keys), None);
    }
}
