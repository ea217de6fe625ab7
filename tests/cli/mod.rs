//! The command line without hosts: `init`, `completion`, `validate -json`, `-chdir`,
//! `-input=false` and what `--help` promises (every environment variable k0sform reads).

use crate::support::bin;
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
    let path = Path::new("schema/validate.schema.json");
    let now = k0sform::spec::validate_json_schema();
    if std::env::var_os("K0SFORM_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &now).expect("write schema");
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == now,
        "schema/validate.schema.json is stale: run `K0SFORM_UPDATE_SCHEMA=1 cargo test --test k0sform cli::validate_schema_is_fresh`"
    );
}
