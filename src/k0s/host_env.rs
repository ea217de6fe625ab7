//! A host's `environment` in `/etc/environment`, as k0sctl puts it there besides the k0s
//! service (k0sctl phase/prepare_hosts.go `updateEnvironment` → configurer/linux.go
//! `UpdateEnvironment`): for each variable, the first line that starts with `NAME=` becomes
//! `NAME=VALUE`, else the line is appended; a missing file is created 0644; nothing is ever
//! removed. k0sctl then reconnects, so that what it runs on the host later (the host's own
//! download of k0s, hooks) sees the values, and exports the same values into its session: here
//! `with_env` gives those commands the spec's values (what k0sctl exports), whatever the host's
//! PAM setup makes of the file.

use crate::transport::RemoteCommand;
use std::collections::BTreeMap;
use std::time::Duration;

/// The file (pam_env reads it at every login).
pub const ETC_ENVIRONMENT: &str = "/etc/environment";

/// What `/etc/environment` says for each variable as k0sctl's update finds it: the first line
/// that starts with `NAME=` (rig remotefs `ByPrefix`, `ReplaceOrAppend`), its rest after the
/// `=`, as name → sha256 (values may be secrets and never leave this function). Lines that are
/// not `NAME=…` (comments, `export …`) are no variable here, as for k0sctl's update.
pub fn parse_etc_environment(text: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for line in text.lines() {
        // rig's PatchFile works on CRLF files as on LF ones.
        let line = line.strip_suffix('\r').unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if crate::spec::valid_env_name(name) && !env.contains_key(name) {
            env.insert(name.to_string(), crate::hash::sha256_hex(value));
        }
    }
    env
}

/// The variables of `want` whose line in `/etc/environment` (`have`, from
/// `parse_etc_environment`) is missing or says another value, in name order.
pub fn etc_environment_changes(
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
) -> Vec<String> {
    want.iter()
        .filter(|(k, v)| have.get(*k) != Some(&crate::hash::sha256_hex(v.as_str())))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Update `/etc/environment` with `env` as k0sctl does (see the module): the values come on
/// stdin as `NAME=VALUE` lines (never in an argv), the new file is written beside the old one
/// and renamed over it with the old one's mode (0644 for a new file), only when it changes
/// (rewritten in place where it cannot be renamed over: a bind mount).
pub fn write_etc_environment(env: &BTreeMap<String, String>) -> RemoteCommand {
    const SCRIPT: &str = r#"f=$1
if [ -e "$f" ] && [ ! -f "$f" ]; then echo "k0sform: $f is not a regular file" >&2; exit 1; fi
tmp=$(mktemp "$f.k0sform-XXXXXX") || exit 1
trap 'rm -f -- "$tmp"' EXIT
src=/dev/null mode=644
if [ -f "$f" ]; then src=$f; mode=$(stat -c %a -- "$f") || exit 1; fi
awk 'NR == FNR { n++; p[n] = substr($0, 1, index($0, "=")); l[n] = $0; next }
{ for (j = 1; j <= n; j++) if (!d[j] && index($0, p[j]) == 1) { d[j] = 1; print l[j]; next }; print }
END { for (j = 1; j <= n; j++) if (!d[j]) print l[j] }' - "$src" > "$tmp" || exit 1
if [ -f "$f" ] && cmp -s -- "$tmp" "$f"; then exit 0; fi
chmod "$mode" -- "$tmp" || exit 1
# A file bind-mounted into place (containers do so with files of /etc) cannot be renamed over:
# its content is then rewritten where it is.
mv -f -- "$tmp" "$f" 2>/dev/null || cat -- "$tmp" > "$f"
"#;
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    RemoteCommand::new(["sh", "-c", SCRIPT, "k0sform-environment", ETC_ENVIRONMENT])
        .stdin(env_lines(env))
        .timeout(Duration::from_secs(30))
        .shown_as(format!(
            "update {ETC_ENVIRONMENT} ({}; values hidden)",
            names.join(" ")
        ))
}

/// `NAME=VALUE` lines (the spec's values hold no line break: `spec::validate`).
fn env_lines(env: &BTreeMap<String, String>) -> Vec<u8> {
    env.iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect::<String>()
        .into_bytes()
}

/// `cmd` run with `env` exported first, as k0sctl exports a host's `environment` into its
/// session (configurer/linux.go `UpdateEnvironment`) before it downloads k0s on the host or
/// runs hooks. The values come on stdin ahead of `cmd`'s own stdin (the shell's `read` takes
/// a pipe byte by byte, so what follows them is left for `cmd`), never in an argv other users
/// of the host can read; logs and errors name `cmd` as before.
pub fn with_env(cmd: RemoteCommand, env: &BTreeMap<String, String>) -> RemoteCommand {
    if env.is_empty() {
        return cmd;
    }
    const LOADER: &str = r#"n=$1; shift
while [ "$n" -gt 0 ] && IFS= read -r kv; do export "$kv" || exit 1; n=$((n - 1)); done
exec "$@""#;
    let shown = cmd
        .shown_as
        .clone()
        .unwrap_or_else(|| crate::quote::join(&cmd.argv));
    let mut argv = vec![
        "sh".to_string(),
        "-c".into(),
        LOADER.into(),
        "k0sform-env".into(),
        env.len().to_string(),
    ];
    argv.extend(cmd.argv.iter().cloned());
    let mut stdin = env_lines(env);
    stdin.extend(cmd.stdin.clone().unwrap_or_default());
    RemoteCommand {
        argv,
        stdin: Some(stdin),
        shown_as: Some(shown),
        ..cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Runs `cmd` locally with `sh` (these scripts are plain POSIX shell and awk).
    fn run_local(cmd: &RemoteCommand) -> std::process::Output {
        let mut c = Command::new(&cmd.argv[0]);
        c.args(&cmd.argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        {
            use std::io::Write;
            let mut i = child.stdin.take().unwrap();
            i.write_all(cmd.stdin.as_deref().unwrap_or_default())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    #[test]
    fn parse_takes_the_first_line_of_each_name_as_k0sctl_matches_it() {
        let got = parse_etc_environment(
            "# comment\nPATH=\"/usr/bin\"\r\nHTTPS_PROXY=http://a\nHTTPS_PROXY=http://b\nexport X=1\nBAD-NAME=2\nnoequals\n",
        );
        assert_eq!(got.len(), 2);
        assert_eq!(got["HTTPS_PROXY"], crate::hash::sha256_hex("http://a"));
        assert_eq!(got["PATH"], crate::hash::sha256_hex("\"/usr/bin\""));
        let want = env(&[
            ("HTTPS_PROXY", "http://a"),
            ("X", "1"),
            ("PATH", "/usr/bin"),
        ]);
        assert_eq!(etc_environment_changes(&want, &got), vec!["PATH", "X"]);
    }

    /// The script on a real file: first matching line replaced, others kept, new ones
    /// appended, mode kept; nothing written when nothing changes; the values never in argv.
    #[test]
    fn write_replaces_the_first_line_appends_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("environment");
        std::fs::write(&f, "PATH=/usr/bin\nA=old\nA=second\nAB=keep\n# A=comment\n").unwrap();
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
        let want = env(&[("A", "new value $HOME 'q'"), ("NO_PROXY", "10.0.0.0/8")]);
        let mut cmd = write_etc_environment(&want);
        assert!(!cmd.argv.concat().contains("new value"));
        assert!(!cmd.shown_as.clone().unwrap().contains("new value"));
        *cmd.argv.last_mut().unwrap() = f.to_str().unwrap().to_string();
        let out = run_local(&cmd);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "PATH=/usr/bin\nA=new value $HOME 'q'\nA=second\nAB=keep\n# A=comment\nNO_PROXY=10.0.0.0/8\n"
        );
        let meta = std::fs::metadata(&f).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o640
        );
        let parsed = parse_etc_environment(&std::fs::read_to_string(&f).unwrap());
        assert!(etc_environment_changes(&want, &parsed).is_empty());
        // Unchanged: not rewritten (same inode), and no temp file left.
        let ino = std::os::unix::fs::MetadataExt::ino(&meta);
        assert!(run_local(&cmd).status.success());
        let meta = std::fs::metadata(&f).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&meta), ino);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A missing file is created 0644.
        let g = dir.path().join("new");
        *cmd.argv.last_mut().unwrap() = g.to_str().unwrap().to_string();
        assert!(run_local(&cmd).status.success());
        assert_eq!(
            std::fs::read_to_string(&g).unwrap(),
            "A=new value $HOME 'q'\nNO_PROXY=10.0.0.0/8\n"
        );
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&g).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o644);
    }

    /// The wrapped command sees the variables and still gets its own stdin.
    #[test]
    fn with_env_exports_then_hands_on_stdin() {
        let cmd = RemoteCommand::new([
            "sh",
            "-c",
            r#"IFS= read -r line; printf '%s|%s|%s\n' "$HTTPS_PROXY" "$B" "$line""#,
        ])
        .stdin("from stdin\n");
        let wrapped = with_env(
            cmd.clone(),
            &env(&[("HTTPS_PROXY", "http://p:3128"), ("B", "x y")]),
        );
        assert!(!wrapped.argv.concat().contains("http://p:3128"));
        assert_eq!(
            wrapped.shown_as.as_deref(),
            Some(crate::quote::join(&cmd.argv).as_str())
        );
        let out = run_local(&wrapped);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "http://p:3128|x y|from stdin\n"
        );
        assert_eq!(with_env(cmd.clone(), &BTreeMap::new()), cmd);
    }
}
