//! Join tokens (`k0s token create`): what a token says without its secret.

use super::super::{K0sError, TokenInfo, TokenRole};
use base64::Engine;
use serde::Deserialize;
use std::io::Read;

#[derive(Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedCluster {
    cluster: ClusterEntry,
}

#[derive(Deserialize)]
struct ClusterEntry {
    server: String,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    user: UserEntry,
}

#[derive(Deserialize)]
struct UserEntry {
    #[serde(default)]
    token: Option<String>,
}

/// A join token: base64(gzip(kubeconfig YAML)). Error messages never include the token.
pub fn parse_token(token: &str) -> Result<TokenInfo, K0sError> {
    const WHAT: &str = "join token";
    let compact: String = token.chars().filter(|c| !c.is_whitespace()).collect();
    let gz = base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|_| K0sError::parse(WHAT, "not base64"))?;
    let mut yaml = String::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_string(&mut yaml)
        .map_err(|_| K0sError::parse(WHAT, "not gzip-compressed text"))?;
    let kc: Kubeconfig =
        serde_saphyr::from_str(&yaml).map_err(|_| K0sError::parse(WHAT, "not a kubeconfig"))?;
    let user = kc
        .users
        .first()
        .ok_or_else(|| K0sError::parse(WHAT, "kubeconfig has no user"))?;
    let kind = match user.name.as_str() {
        "controller-bootstrap" => TokenRole::Controller,
        "kubelet-bootstrap" => TokenRole::Worker,
        other => {
            return Err(K0sError::parse(
                WHAT,
                format!("unknown token type {other:?}"),
            ));
        }
    };
    let id = user
        .user
        .token
        .as_deref()
        .and_then(|t| t.split_once('.'))
        .map(|(id, _)| id.to_string())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| K0sError::parse(WHAT, "no bootstrap token in the kubeconfig"))?;
    let server_url = kc
        .clusters
        .first()
        .map(|c| c.cluster.server.clone())
        .ok_or_else(|| K0sError::parse(WHAT, "kubeconfig has no cluster"))?;
    Ok(TokenInfo {
        id,
        server_url,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_of(yaml: &str) -> String {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(yaml.as_bytes()).unwrap();
        base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
    }

    /// testdata/reference/k0s-cli.md §3.4, as client-go writes it.
    const TOKEN_KUBECONFIG: &str = "apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    server: https://10.0.0.1:9443
  name: k0s
contexts:
- context:
    cluster: k0s
    user: controller-bootstrap
  name: k0s
current-context: k0s
kind: Config
preferences: {}
users:
- name: controller-bootstrap
  user:
    token: abcdef.0123456789abcdef
";

    #[test]
    fn token_format() {
        let t = parse_token(&format!("{}\n", token_of(TOKEN_KUBECONFIG))).unwrap();
        assert_eq!(t.id, "abcdef");
        assert_eq!(t.server_url, "https://10.0.0.1:9443");
        assert_eq!(t.kind, TokenRole::Controller);
        let worker = TOKEN_KUBECONFIG
            .replace("controller-bootstrap", "kubelet-bootstrap")
            .replace(":9443", ":6443")
            .replace("abcdef.", "zyx123.");
        let w = parse_token(&token_of(&worker)).unwrap();
        assert_eq!((w.kind, w.id.as_str()), (TokenRole::Worker, "zyx123"));
        let err = parse_token("abcdef.0123456789abcdef")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("0123456789abcdef"), "secret leaked: {err}");
        assert!(parse_token(&token_of("kind: Config\nusers: []\n")).is_err());
    }
}
