//! What stays in a joined host's token file. The real join token is invalidated after the join;
//! the file must not be left empty: k0s v1.35.1 workers read and decode it at every start and exit
//! when it is missing, empty or not a token (k0s `cmd/worker/worker.go` and
//! `cmd/internal/tokendata.go` at v1.35.1, k0s issue #7202). k0sctl writes a placeholder for the
//! same reason (k0sctl `phase/ensure_join_token_workaround.go`); so does k0sform, for every host.

use super::TokenRole;
use crate::transport::RemoteCommand;
use base64::Engine as _;
use std::io::Write as _;

/// The shell function `token_decodes FILE`: does FILE hold what k0s decodes as a join token
/// (k0s `pkg/token/joindecode.go` `DecodeJoinToken` at v1.35.1: the whole content is standard
/// base64 (Go skips only line breaks, as `base64 -d` does) of gzip data read to its end; an
/// empty file is refused before that, `cmd/internal/tokendata.go`). No kinder than k0s: the
/// base64 is decoded on its own first, so a valid prefix before garbage does not pass. Nothing
/// of the content is printed. Shared by the probe (`token_file` section) and
/// [`ensure_decodable`].
macro_rules! token_decodes_sh {
    () => {
        r#"token_decodes() {
  [ -s "$1" ] && base64 -d < "$1" >/dev/null 2>&1 && base64 -d < "$1" 2>/dev/null | gzip -dc >/dev/null 2>&1
}
"#
    };
}
pub(crate) use token_decodes_sh;

/// A structurally valid join token that grants nothing: a kubeconfig of the role's token type
/// with a bootstrap token that k0s never creates (`k0sfrm.notacredential00`) and a loopback
/// server. k0s only decodes it once the host has joined.
pub fn placeholder_token(role: TokenRole) -> String {
    let (user, port) = match role {
        TokenRole::Controller => ("controller-bootstrap", 9443),
        TokenRole::Worker => ("kubelet-bootstrap", 6443),
    };
    let kubeconfig = format!(
        "# placeholder written by k0sform after the join: not a credential\n\
         apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - cluster:\n    server: https://127.0.0.1:{port}\n  name: k0s\n\
         contexts:\n\
         - context:\n    cluster: k0s\n    user: {user}\n  name: k0s\n\
         current-context: k0s\n\
         users:\n\
         - name: {user}\n  user:\n    token: k0sfrm.notacredential00\n"
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(kubeconfig.as_bytes());
    let bytes = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Before a joined worker restarts on a k0s that decodes its token file at every start
/// (`quirks::worker_decodes_token_file_at_start`): the token file at `path` is replaced by the
/// worker placeholder unless it already decodes as k0s decodes it (base64 of gzip, k0s
/// `pkg/token/joindecode.go`). Hosts k0sctl joined hold `# overwritten by k0sctl after join`
/// there (k0sctl `phase/install_workers.go`), which such a worker refuses; k0sctl ≥ v0.29
/// rewrites a decodable dummy first (`phase/ensure_join_token_workaround.go`), and so does
/// k0sform. The host is joined (its kubelet has its own kubeconfig): the file's content is
/// never used again, so where `base64` or `gzip` is missing the placeholder is written anyway.
/// A missing file is created 0600 (k0s refuses a missing one too); a link is left alone. Prints
/// the path when it wrote it; the file's content never leaves the host.
pub fn ensure_decodable(path: &str) -> RemoteCommand {
    const SCRIPT: &str = concat!(
        token_decodes_sh!(),
        r#"f=$1 ph=$2
if [ -L "$f" ]; then echo "k0sform: $f is a symbolic link: left alone" >&2; exit 0; fi
if token_decodes "$f"; then exit 0; fi
mkdir -p -- "$(dirname -- "$f")" && (umask 077; printf '%s' "$ph" > "$f") && chmod 600 -- "$f" && printf '%s\n' "$f"
"#
    );
    RemoteCommand::new([
        "sh".to_string(),
        "-c".into(),
        SCRIPT.into(),
        "k0sform-token-file".into(),
        path.to_string(),
        placeholder_token(TokenRole::Worker),
    ])
    .timeout(std::time::Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_decodes_as_a_token_of_its_role_and_is_never_empty() {
        for role in [TokenRole::Worker, TokenRole::Controller] {
            let t = placeholder_token(role);
            assert!(!t.is_empty());
            let info = super::super::parse_token(&t).unwrap();
            assert_eq!(info.kind, role);
            assert_eq!(info.id, "k0sfrm");
            assert!(
                info.server_url.starts_with("https://127.0.0.1:"),
                "{info:?}"
            );
        }
    }

    /// The script, run locally: k0sctl's comment and an empty file are replaced, a token that
    /// decodes is kept, a missing file is created 0600, a link is not followed.
    #[test]
    fn ensure_decodable_replaces_only_what_k0s_cannot_decode() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().unwrap();
        let run = |p: &std::path::Path| {
            let c = ensure_decodable(p.to_str().unwrap());
            let out = std::process::Command::new(&c.argv[0])
                .args(&c.argv[1..])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let ph = placeholder_token(TokenRole::Worker);
        let k0sctl = d.path().join("k0sctl");
        std::fs::write(&k0sctl, "# overwritten by k0sctl after join\n").unwrap();
        assert_eq!(run(&k0sctl).trim(), k0sctl.to_str().unwrap());
        assert_eq!(std::fs::read_to_string(&k0sctl).unwrap(), ph);
        assert_eq!(
            std::fs::metadata(&k0sctl).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(run(&k0sctl), "", "a placeholder decodes: left alone");
        let empty = d.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        run(&empty);
        assert_eq!(std::fs::read_to_string(&empty).unwrap(), ph);
        let good = d.path().join("good");
        let other = placeholder_token(TokenRole::Controller);
        std::fs::write(&good, &other).unwrap();
        assert_eq!(run(&good), "");
        assert_eq!(std::fs::read_to_string(&good).unwrap(), other);
        let missing = d.path().join("etc/k0s/k0stoken");
        run(&missing);
        assert_eq!(std::fs::read_to_string(&missing).unwrap(), ph);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&k0sctl, &link).unwrap();
        std::fs::write(&k0sctl, "#").unwrap();
        assert_eq!(run(&link), "");
        assert_eq!(std::fs::read_to_string(&k0sctl).unwrap(), "#");
    }
}
