//! `k0sform completion SHELL`: the completion script, generated from the clap definitions so it
//! cannot fall behind the flags.

use crate::cli::{Cli, CompletionArgs};
use crate::exit::Exit;

pub fn run(args: &CompletionArgs) -> Exit {
    match args.shell() {
        Ok(shell) => {
            print!("{}", script(shell));
            Exit::Success
        }
        Err(e) => crate::ops::Failure::error(e).exit(),
    }
}

/// The completion script for `shell`.
pub fn script(shell: clap_complete::Shell) -> String {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "k0sform", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap_complete::Shell;

    #[test]
    fn scripts_name_every_subcommand_and_flag() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let s = script(shell);
            for word in [
                "validate",
                "init",
                "completion",
                "force-unlock",
                "auto-approve",
                "controller-count",
                "chdir",
                "detailed-exitcode",
            ] {
                assert!(s.contains(word), "{shell:?} script lacks {word}");
            }
        }
        assert!(script(Shell::Bash).contains("complete -F _k0sform"));
        assert!(script(Shell::Zsh).starts_with("#compdef k0sform"));
        assert!(script(Shell::Fish).contains("complete -c k0sform"));
    }
}
