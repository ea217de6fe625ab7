//! Asking before a plan runs: `yes` for an apply, the cluster's name for a destroy; refused
//! without a terminal or with `-input=false`.

use crate::ops::Failure;
use std::io::{BufRead, IsTerminal, Write};

/// Confirm `plan` before it runs: a destroy by typing the cluster's name, anything else `yes`.
pub fn approve(input: bool, json: bool, plan: &crate::plan::Plan) -> Result<(), Failure> {
    if plan.destroy {
        confirm_destroy(input, json, &plan.cluster_name)
    } else {
        confirm(input, json)
    }
}

/// Ask for the cluster's name before destroying it; refuse without a terminal or with
/// `-input=false`.
pub fn confirm_destroy(input: bool, json: bool, cluster: &str) -> Result<(), Failure> {
    if !input {
        return Err(Failure::error(
            "destroy needs confirmation but -input=false forbids asking: review the plan and use -auto-approve",
        ));
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::error(
            "destroy needs confirmation but there is no terminal: review the plan and use -auto-approve",
        ));
    }
    let question = format!(
        "\nDo you really want to destroy cluster \"{}\"?\n  Every host above is stopped and reset (k0s reset: etcd data, certificates, containers); this cannot be undone.\n  Only the cluster's name will be accepted to approve.\n\n  Enter the cluster's name: ",
        crate::escape::escape(cluster)
    );
    let answer = ask(&question, json)?;
    if answer.trim_end_matches(['\n', '\r']) != cluster || cluster.is_empty() {
        return Err(Failure::error(
            "destroy cancelled: the answer is not the cluster's name",
        ));
    }
    Ok(())
}

/// Ask for `yes` on a terminal; refuse without one or with `-input=false`. With `-json` the
/// question goes to stderr, so stdout stays JSON lines.
pub fn confirm(input: bool, json: bool) -> Result<(), Failure> {
    if !input {
        return Err(Failure::error(
            "apply needs confirmation but -input=false forbids asking: review the plan and use -auto-approve, or apply a saved plan file",
        ));
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::error(
            "apply needs confirmation but there is no terminal: review the plan and use -auto-approve, or apply a saved plan file",
        ));
    }
    let question = "\nDo you want to perform these actions?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ";
    if ask(question, json)?.trim() != "yes" {
        return Err(Failure::error("apply cancelled"));
    }
    Ok(())
}

/// Print `question` (on stderr with `-json`, so stdout stays JSON lines) and read one line.
fn ask(question: &str, json: bool) -> Result<String, Failure> {
    if json {
        eprint!("{question}");
        let _ = std::io::stderr().flush();
    } else {
        print!("{question}");
        let _ = std::io::stdout().flush();
    }
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::error(format!("cannot read the answer: {e}")))?;
    Ok(answer)
}
