//! Secrets in k0s.yaml (a kine DSN with its password, helm repository passwords, tokens, the
//! credentials of any URL) must not reach the plan text, `-json`, saved plans or `-probe-out`
//! files. The config diff is made of redacted texts: a secret value shows as `(secret)` when it
//! is the same on both sides, and as `(secret, changed: old value)` / `(secret, changed: new
//! value)` when it differs, so a change is still a changed line. No hash of the value is shown:
//! an unsalted hash of a short password is a guess away from the password. `show_secrets` (for a
//! `-show-secrets` flag) skips it.

use std::collections::HashMap;

/// What an unchanged (or not compared) secret value is shown as.
pub const SECRET: &str = "(secret)";

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
        (
            redact_against(have, &secrets_of(want), "old value"),
            redact_against(want, &secrets_of(have), "new value"),
        )
    };
    similar::TextDiff::from_lines(have.as_str(), want.as_str())
        .unified_diff()
        .context_radius(3)
        .header(have_label, want_label)
        .to_string()
}

/// The secret values of `yaml` by key, in the order they appear (a value over several lines
/// counts once per line; URL credentials under the key `://`).
fn secrets_of(yaml: &str) -> HashMap<String, Vec<String>> {
    let mut found: HashMap<String, Vec<String>> = HashMap::new();
    redact_with(yaml, &mut |key, value| {
        found
            .entry(key.to_string())
            .or_default()
            .push(value.to_string());
        String::new()
    });
    found
}

/// `yaml` redacted, each secret compared with the one in the same place of the other text
/// (`other`: its `secrets_of`, matched by key and order): `(secret)` when they are equal, else
/// `(secret, changed: LABEL)`.
fn redact_against(yaml: &str, other: &HashMap<String, Vec<String>>, label: &str) -> String {
    let mut seen: HashMap<String, usize> = HashMap::new();
    redact_with(yaml, &mut |key, value| {
        let n = seen.entry(key.to_string()).or_default();
        let same = other
            .get(key)
            .and_then(|v| v.get(*n))
            .is_some_and(|o| o == value);
        *n += 1;
        if same {
            SECRET.to_string()
        } else {
            format!("(secret, changed: {label})")
        }
    })
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

/// `yaml` with the value of every secret key replaced by `(secret)`, line by line, in block
/// style (`key: value`, `- key: value`) and flow style (`{user: u, password: p}`), and the
/// credentials of every URL (`https://user:pass@host`), under any key. A secret key whose
/// value continues on the following lines (a block scalar `|`, a nested mapping or list) has
/// those deeper lines replaced too.
pub fn redact(yaml: &str) -> String {
    redact_with(yaml, &mut |_, _| SECRET.to_string())
}

/// `text` with the credentials of every URL in it (`scheme://user:pass@host`) replaced by
/// `(secret)`: for messages and warnings that name a URL.
pub fn hide_url_credentials(text: &str) -> String {
    url_credentials(text, &mut |_, _| SECRET.to_string())
}

/// `redact` with the placeholder of each secret from `shown(key, value)`.
fn redact_with(yaml: &str, shown: &mut dyn FnMut(&str, &str) -> String) -> String {
    let mut out = String::with_capacity(yaml.len());
    // The key and indentation of a secret key whose value spans the following, deeper lines.
    let mut secret_block: Option<(String, usize)> = None;
    for line in yaml.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let indent = body.len() - body.trim_start_matches(' ').len();
        if let Some((key, level)) = &secret_block {
            let level = *level;
            let own_list = indent == level && body[indent..].starts_with('-');
            if body.trim().is_empty() || indent > level || own_list {
                if body.trim().is_empty() {
                    out.push_str(body);
                } else {
                    out.push_str(&body[..indent]);
                    out.push_str(&shown(key, body[indent..].trim_end()));
                }
                out.push_str(nl);
                continue;
            }
            secret_block = None;
        }
        let (text, opens_block) = redact_line(body, shown);
        if opens_block.is_some() {
            secret_block = opens_block;
        }
        out.push_str(&url_credentials(&text, shown));
        out.push_str(nl);
    }
    out
}

/// `text` with the user information of each URL (between `://` and the host's `@`) replaced
/// by `shown("://", it)`.
fn url_credentials(text: &str, shown: &mut dyn FnMut(&str, &str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '/' | '?' | '#' | '"' | '\'' | ',' | '}' | ']')
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) if at > 0 => {
                out.push_str(&shown("://", &authority[..at]));
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// One line with its secret values replaced; `Some((key, indent))` when a secret key's value starts on
/// the next lines (nothing, `|` or `>` after the colon).
fn redact_line(
    line: &str,
    shown: &mut dyn FnMut(&str, &str) -> String,
) -> (String, Option<(String, usize)>) {
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
            opens = Some((
                key.to_string(),
                line.len() - line.trim_start_matches([' ', '-']).len(),
            ));
            out.push_str(&rest[..end]);
        } else {
            out.push(' ');
            out.push_str(&shown(key, value));
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
    fn known_secret_fields_are_replaced() {
        let r = redact(CONFIG);
        for secret in ["hunter2", "pa55word", "topsecret"] {
            assert!(!r.contains(secret), "{secret} in\n{r}");
        }
        assert!(r.contains("      dataSource: (secret)\n"), "{r}");
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
        assert!(
            d.contains("-      dataSource: (secret, changed: old value)\n"),
            "{d}"
        );
        assert!(
            d.contains("+      dataSource: (secret, changed: new value)\n"),
            "{d}"
        );
        // The unchanged secrets make no diff line.
        assert!(
            !d.contains("password:") && !d.contains("adminPassword"),
            "{d}"
        );
        let shown = config_diff(CONFIG, &want, "have", "want", true);
        assert!(shown.contains("hunter2") && shown.contains("correct-horse"));
        // Unchanged: no diff at all.
        assert_eq!(config_diff(CONFIG, CONFIG, "a", "b", false), "");
    }

    /// No hash of a secret is shown, not even a short prefix: an unsalted hash of a weak
    /// password is a dictionary away from it.
    #[test]
    fn no_hash_of_a_secret_is_shown() {
        let want = CONFIG.replace("pa55word", "n3w-pa55");
        let d = config_diff(CONFIG, &want, "have", "want", false);
        let r = redact(CONFIG);
        for secret in [
            "hunter2",
            "mysql://k0s:hunter2@db.example:3306/k0s",
            "\"pa55word\"",
            "pa55word",
            "n3w-pa55",
            "topsecret",
            "adminPassword: topsecret",
        ] {
            let sum = crate::hash::sha256_hex(secret);
            for out in [&d, &r] {
                assert!(!out.contains(&sum[..8]), "{secret}'s hash in\n{out}");
            }
        }
    }

    /// The credentials of a URL are redacted whatever the key (or none), the rest of the URL
    /// stays; a change of them shows as a changed line.
    #[test]
    fn url_credentials_are_redacted_under_any_key() {
        let have = "spec:\n  endpoint: https://admin:s3cr3t@registry.example/v2\n  list:\n  - postgres://u:pw@db:5432/x\n  plain: https://charts.example/a@b\n";
        let r = redact(have);
        assert!(
            !r.contains("s3cr3t") && !r.contains("admin:") && !r.contains("u:pw"),
            "{r}"
        );
        assert!(
            r.contains("  endpoint: https://(secret)@registry.example/v2\n"),
            "{r}"
        );
        assert!(r.contains("  - postgres://(secret)@db:5432/x\n"), "{r}");
        assert!(r.contains("  plain: https://charts.example/a@b\n"), "{r}");
        let want = have.replace("s3cr3t", "other");
        let d = config_diff(have, &want, "have", "want", false);
        assert!(!d.contains("s3cr3t") && !d.contains("other"), "{d}");
        assert!(
            d.contains("+  endpoint: https://(secret, changed: new value)@registry.example/v2"),
            "{d}"
        );
        assert_eq!(
            hide_url_credentials("cannot fetch http://me:tok@m.example/k0s: 404"),
            "cannot fetch http://(secret)@m.example/k0s: 404"
        );
    }
}
