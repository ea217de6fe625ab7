//! The one place that turns an argv into a remote shell line. sshd hands the command string to the
//! user's login shell, which may not be POSIX (fish reads `\'` inside single quotes as a quote):
//! every argument is POSIX-single-quoted here and nowhere else, and the resulting line is given
//! to a fixed `/bin/sh` in a form every shell passes through unchanged (`for_any_login_shell`).

use crate::transport::RemoteCommand;

/// Quote one argument for a POSIX shell. Plain words stay readable in logs; everything else is
/// wrapped in single quotes, where the shell interprets nothing (an embedded `'` is closed,
/// escaped and reopened). `=` is not plain: an unquoted `A=B` as first word is an assignment.
pub fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./:,+@%".contains(&b));
    if plain {
        return arg.to_string();
    }
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('\'');
    for c in arg.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// Quote every word and join with spaces.
pub fn join(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// Why a command cannot be sent at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandLineError {
    #[error("empty command")]
    Empty,
    #[error("argument {0:?} contains a NUL byte, which no remote shell can receive")]
    Nul(String),
    #[error("environment variable name {0:?} is not a valid shell name")]
    EnvName(String),
}

/// The command string to send for `cmd`: its POSIX line (`posix_line`) for `/bin/sh`, whatever
/// the login shell is.
pub fn command_line(cmd: &RemoteCommand, sudo: bool) -> Result<String, CommandLineError> {
    posix_line(cmd, sudo).map(|l| for_any_login_shell(&l))
}

/// `exec /bin/sh -c 'eval "exec $(printf "<line, octal-escaped>")"'`: the login shell sees one single-quoted
/// word of letters, digits, `-_./=,:+@ `, double quotes and backslash-digit escapes only (no `'`,
/// no `\\`, no `$` outside it), which POSIX shells, fish, csh and tcsh all pass on unchanged;
/// `/bin/sh` then decodes and runs the POSIX line. `printf` is a shell builtin: no extra process.
pub fn for_any_login_shell(posix: &str) -> String {
    let mut escaped = String::with_capacity(posix.len() * 2);
    for b in posix.bytes() {
        if b.is_ascii_alphanumeric() || b" -_./=,:+@".contains(&b) {
            escaped.push(b as char);
        } else {
            escaped.push_str(&format!("\\{b:03o}"));
        }
    }
    // `exec` twice: the command replaces both shells, so a death by signal reaches sshd as a
    // signal (status None), not as a shell's exit code 128+n.
    format!("exec /bin/sh -c 'eval \"exec $(printf \"{escaped}\")\"'")
}

/// The POSIX shell line for `cmd`: `[sudo -n --] timeout -k 5 <secs> [env K=V…] argv…`.
/// `timeout` runs after sudo so it can kill root processes; `env` after sudo because sudo resets
/// the environment.
pub fn posix_line(cmd: &RemoteCommand, sudo: bool) -> Result<String, CommandLineError> {
    if cmd.argv.is_empty() {
        return Err(CommandLineError::Empty);
    }
    let mut words: Vec<String> = Vec::new();
    if sudo {
        words.extend(["sudo", "-n", "--"].map(String::from));
    }
    words.extend(["timeout", "-k", "5"].map(String::from));
    words.push(remote_timeout_secs(cmd.timeout).to_string());
    if !cmd.env.is_empty() {
        words.push("env".into());
        for (k, v) in &cmd.env {
            if !valid_env_name(k) {
                return Err(CommandLineError::EnvName(k.clone()));
            }
            words.push(format!("{k}={v}"));
        }
    }
    words.extend(cmd.argv.iter().cloned());
    if let Some(bad) = words.iter().find(|w| w.contains('\0')) {
        return Err(CommandLineError::Nul(bad.clone()));
    }
    Ok(join(&words))
}

/// Whole seconds for coreutils `timeout`, at least 1.
pub fn remote_timeout_secs(t: std::time::Duration) -> u64 {
    let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
    secs.max(1)
}

fn valid_env_name(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    /// Run the quoted word through a real local `sh` and get back what `printf %s` received.
    fn through_sh(arg: &str) -> Vec<u8> {
        let line = format!("printf %s {}", quote(arg));
        let out = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert!(out.status.success(), "sh failed on {line:?}");
        out.stdout
    }

    #[test]
    fn plain_words_stay_readable() {
        assert_eq!(quote("/usr/local/bin/k0s"), "/usr/local/bin/k0s");
        assert_eq!(quote("--data-dir"), "--data-dir");
        assert_eq!(
            quote("--data-dir=/var/lib/k0s"),
            "'--data-dir=/var/lib/k0s'"
        );
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn hostile_strings_round_trip_through_a_real_shell() {
        let hostile = [
            "; touch /tmp/k0sform-pwned",
            "$(touch /tmp/k0sform-pwned)",
            "`id`",
            "a'b\"c",
            "'",
            "''",
            "\\",
            "line1\nline2\n",
            "$HOME ${PATH} $((1+1))",
            "* ? [a-z] ~ ~root",
            "a && b || c | d > e < f & g",
            "A=B",
            "-n",
            "é ünïcödé \t tab",
            "",
        ];
        for h in hostile {
            assert_eq!(through_sh(h), h.as_bytes(), "round trip of {h:?}");
        }
        assert!(!std::path::Path::new("/tmp/k0sform-pwned").exists());
    }

    #[test]
    fn command_line_wraps_sudo_timeout_env() {
        let cmd = RemoteCommand::new(["k0s", "status", "-o", "json"])
            .timeout(Duration::from_millis(1500))
            .env("KUBECONFIG", "/var/lib/k0s/pki/admin.conf");
        assert_eq!(
            posix_line(&cmd, true).unwrap(),
            "sudo -n -- timeout -k 5 2 env 'KUBECONFIG=/var/lib/k0s/pki/admin.conf' k0s status -o json"
        );
        assert_eq!(
            posix_line(&cmd, false).unwrap(),
            "timeout -k 5 2 env 'KUBECONFIG=/var/lib/k0s/pki/admin.conf' k0s status -o json"
        );
        assert_eq!(
            command_line(&cmd, false).unwrap(),
            for_any_login_shell(&posix_line(&cmd, false).unwrap())
        );
    }

    #[test]
    fn the_sent_line_survives_any_login_shell() {
        // What a non-POSIX login shell could trip over: no `'` inside the outer quotes, no
        // doubled backslash, nothing outside them but a fixed prefix.
        let cmd = RemoteCommand::new([
            "sh",
            "-c",
            "printf '%s|' \"$1\" 'it'\\''s' \\\\ `x`",
            "x",
            "a'b\\c $HOME",
        ]);
        let line = command_line(&cmd, false).unwrap();
        let inner = line
            .strip_prefix("exec /bin/sh -c '")
            .and_then(|l| l.strip_suffix('\''))
            .unwrap();
        assert!(!inner.contains('\'') && !inner.contains("\\\\"), "{line}");
        assert!(!inner.replace("$(printf", "").contains('$'), "{line}");
        assert!(
            line.starts_with("exec /bin/sh -c 'eval \"exec $(printf \""),
            "{line}"
        );
        // And /bin/sh runs exactly the POSIX line.
        let via_sh = |l: &str| Command::new("sh").arg("-c").arg(l).output().unwrap().stdout;
        let direct = via_sh(&posix_line(&cmd, false).unwrap());
        assert!(!direct.is_empty());
        assert_eq!(via_sh(&line), direct);
    }

    #[test]
    fn command_line_rejects_what_cannot_be_sent() {
        let empty = RemoteCommand::new(Vec::<String>::new());
        assert_eq!(posix_line(&empty, false), Err(CommandLineError::Empty));
        assert_eq!(command_line(&empty, false), Err(CommandLineError::Empty));
        let nul = RemoteCommand::new(["echo", "a\0b"]);
        assert!(matches!(
            command_line(&nul, false),
            Err(CommandLineError::Nul(_))
        ));
        let env = RemoteCommand::new(["true"]).env("A;B", "x");
        assert!(matches!(
            command_line(&env, false),
            Err(CommandLineError::EnvName(_))
        ));
    }

    #[test]
    fn timeout_rounds_up_and_is_never_zero() {
        assert_eq!(remote_timeout_secs(Duration::ZERO), 1);
        assert_eq!(remote_timeout_secs(Duration::from_secs(30)), 30);
        assert_eq!(remote_timeout_secs(Duration::from_millis(30_001)), 31);
    }
}
