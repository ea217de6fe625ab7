//! The one way tests run the k0sform binary: `k0sform()`, a `Command` for the binary cargo built
//! for this test run, in an environment that does not depend on the caller's: no colour, no
//! `K0SFORM_STATE`, none of k0sctl's variables that change what k0sform does (DEBUG, TRACE,
//! DRY_RUN) and no logging variables, and the user's ssh agent kept out (the lab names its own
//! client key). Tests set what they need on top; a later `env` wins.

use std::process::Command;

/// Variables of the outer environment that must not reach a run under test.
const CLEARED: [&str; 7] = [
    "K0SFORM_STATE",
    "K0SFORM_LOG",
    "K0SFORM_LOG_PATH",
    "DEBUG",
    "TRACE",
    "DRY_RUN",
    "SSH_AUTH_SOCK",
];

/// The k0sform binary, ready for arguments.
pub fn k0sform() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_k0sform"));
    c.env("NO_COLOR", "1");
    for var in CLEARED {
        c.env_remove(var);
    }
    c
}

/// The same as an `assert_cmd::Command` (for `write_stdin`).
pub fn assert_cmd() -> assert_cmd::Command {
    assert_cmd::Command::from_std(k0sform())
}

/// Run `cmd` to its end: exit code (-1 when a signal ended it), stdout, stderr.
pub fn output(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run the k0sform binary");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
