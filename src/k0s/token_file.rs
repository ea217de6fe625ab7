//! What stays in a joined host's token file. The real join token is invalidated after the join;
//! the file must not be left empty: k0s v1.35.1 workers read and decode it at every start and exit
//! when it is missing, empty or not a token (k0s `cmd/worker/worker.go` and
//! `cmd/internal/tokendata.go` at v1.35.1, k0s issue #7202). k0sctl writes a placeholder for the
//! same reason (k0sctl `phase/ensure_join_token_workaround.go`); so does k0sform, for every host.

use super::TokenRole;
use base64::Engine as _;
use std::io::Write as _;

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
}
