//! Secrets in k0s.yaml (a kine DSN with its password, helm repository passwords, tokens) must
//! not reach the plan text, `-json` or saved plans. The config diff is made of redacted texts:
//! a secret value shows as `(secret, sha256 1a2b3c4d)`, so a change is still visible as a
//! changed line and a changed short hash; `show_secrets` (for a `-show-secrets` flag) skips it.

use crate::hash::sha256_hex;

/// The unified diff of k0s.yaml from `have` (on the host) to `want`, secret values redacted
/// unless `show_secrets`.
pub fn config_diff(
    have: &str,
    want: &str,
    have_label: &str,
    want_label: &str,
    show_secrets: bool,
) -> String {
    let (have, want) = if show_secrets {
        (have.to_string(), want.to_string())
    } else {
        (redact(have), redact(want))
    };
    similar::TextDiff::from_lines(have.as_str(), want.as_str())
        .unified_diff()
        .context_radius(3)
        .header(have_label, want_label)
        .to_string()
}

/// Is a YAML key's value a secret? Names that say so (password, token, secret, a DSN, a
/// private key, credentials); names of files, paths and references to secrets are not.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    if ["file", "path", "ref", "name", "dir"]
        .iter()
        .any(|s| k.ends_with(s))
    {
        return false;
    }
    [
        "password",
        "passwd",
        "secret",
        "token",
        "datasource",
        "privatekey",
        "credential",
        "apikey",
    ]
    .iter()
    .any(|s| k.contains(s))
        || matches!(k.as_str(), "key" | "auth" | "dsn")
}

/// What a secret value is shown as.
fn placeholder(value: &str) -> String {
    format!("(secret, sha256 {})", &sha256_hex(value)[..8])
}

/// `yaml` with the value of every secret key replaced by a placeholder, line by line, in
/// block style (`key: value`, `- key: value`) and flow style (`{user: u, password: p}`). A
/// secret key whose value continues on the following lines (a block scalar `|`, a nested
/// mapping or list) has those deeper lines replaced too.
pub fn redact(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    // The indentation of a secret key whose value spans the following, deeper lines.
    let mut secret_block: Option<usize> = None;
    for line in yaml.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let indent = body.len() - body.trim_start_matches(' ').len();
        if let Some(level) = secret_block {
            let own_list = indent == level && body[indent..].starts_with('-');
            if body.trim().is_empty() || indent > level || own_list {
                if body.trim().is_empty() {
                    out.push_str(body);
                } else {
                    out.push_str(&body[..indent]);
                    out.push_str(&placeholder(body[indent..].trim_end()));
                }
                out.push_str(nl);
                continue;
            }
            secret_block = None;
        }
        let (text, opens_block) = redact_line(body);
        if let Some(key_indent) = opens_block {
            secret_block = Some(key_indent);
        }
        out.push_str(&text);
        out.push_str(nl);
    }
    out
}

/// One line with its secret values replaced; `Some(indent)` when a secret key's value starts on
/// the next lines (nothing, `|` or `>` after the colon).
fn redact_line(line: &str) -> (String, Option<usize>) {
    let mut out = String::new();
    let mut rest = line;
    let mut opens = None;
    // Each `key:` on the line, left to right; a secret's value runs to the next `,` or `}` in
    // flow style, else to the end of the line.
    while let Some((key, key_end)) = next_key(rest) {
        let value_start = key_end + 1;
        out.push_str(&rest[..value_start]);
        rest = &rest[value_start..];
        if !is_secret_key(key) {
            continue;
        }
        let in_flow = out.contains('{');
        let end = if in_flow {
            rest.find([',', '}']).unwrap_or(rest.len())
        } else {
            rest.len()
        };
        let value = rest[..end].trim();
        let bare = value.trim_start_matches(['|', '>', '-', '+']);
        if value.is_empty() || (bare.trim().is_empty() && !in_flow) {
            opens = Some(line.len() - line.trim_start_matches([' ', '-']).len());
            out.push_str(&rest[..end]);
        } else {
            out.push(' ');
            out.push_str(&placeholder(value));
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out, opens)
}

/// The next `key:` (a colon followed by a space or the end) in `s`: the key without quotes and
/// the colon's byte offset.
fn next_key(s: &str) -> Option<(&str, usize)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            let before = &s[..i];
            let start = before.rfind([' ', '{', ',', '-']).map_or(0, |p| p + 1);
            let key = before[start..].trim_matches(|c| c == '"' || c == '\'');
            if !key.is_empty() {
                return Some((key, i));
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "\
spec:
  storage:
    type: kine
    kine:
      dataSource: mysql://k0s:hunter2@db.example:3306/k0s
  extensions:
    helm:
      repositories:
      - name: private
        url: https://charts.example
        username: ci
        password: \"pa55word\"
      charts:
      - name: app
        values: |
          adminPassword: topsecret
          replicas: 2
  api:
    sans: [10.0.0.1]
";

    #[test]
    fn known_secret_fields_are_replaced_by_a_short_hash() {
        let r = redact(CONFIG);
        for secret in ["hunter2", "pa55word", "topsecret"] {
            assert!(!r.contains(secret), "{secret} in\n{r}");
        }
        assert!(r.contains("      dataSource: (secret, sha256 "), "{r}");
        assert!(r.contains("        username: ci\n"), "{r}");
        assert!(r.contains("          replicas: 2\n"), "{r}");
        assert!(r.contains("    sans: [10.0.0.1]\n"), "{r}");
        assert_eq!(r.lines().count(), CONFIG.lines().count());
        // Same secret, same placeholder: an unchanged secret makes no diff line.
        assert_eq!(redact(CONFIG), r);
    }

    #[test]
    fn flow_style_and_block_values() {
        let r = redact("a: {user: u, password: p1, x: 1}\ntoken: |\n  abc\n  def\nnext: 1\n");
        assert!(
            !r.contains("p1") && !r.contains("abc") && !r.contains("def"),
            "{r}"
        );
        assert!(r.contains("user: u,") && r.contains("x: 1}"), "{r}");
        assert!(r.ends_with("next: 1\n"), "{r}");
        assert!(!is_secret_key("tokenFile") && !is_secret_key("secretName"));
        // A list at the key's own indentation belongs to the key.
        let r = redact("token:\n- abc\nnext: 1\n");
        assert!(!r.contains("abc") && r.ends_with("next: 1\n"), "{r}");
    }

    #[test]
    fn the_diff_says_changed_without_the_values() {
        let want = CONFIG.replace("hunter2", "correct-horse");
        let d = config_diff(CONFIG, &want, "have", "want", false);
        assert!(
            !d.contains("hunter2") && !d.contains("correct-horse"),
            "{d}"
        );
        assert!(d.contains("-      dataSource: (secret, sha256 "), "{d}");
        assert!(d.contains("+      dataSource: (secret, sha256 "), "{d}");
        let shown = config_diff(CONFIG, &want, "have", "want", true);
        assert!(shown.contains("hunter2") && shown.contains("correct-horse"));
    }
}
