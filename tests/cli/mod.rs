//! The command line without hosts: `init`, `completion`, `validate -json`, `-chdir`,
//! `-input=false` and what `--help` promises (every environment variable k0sform reads).

use crate::support::bin;
use crate::support::schema_files;
use assert_cmd::Command;
use std::path::Path;

mod commands;
mod hostile;
mod k0sctl_flags;

fn k0sform() -> Command {
    bin::assert_cmd()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn validate_schema_is_fresh() {
    let now = k0sform::spec::validate_json_schema();
    schema_files::checked_in(
        "validate.schema.json",
        &now,
        "cli::validate_schema_is_fresh",
    );
}
