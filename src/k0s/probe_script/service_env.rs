//! The k0s service's environment as the probe reads it from the unit, drop-in or OpenRC script.

use std::collections::BTreeMap;

/// The `Environment=` (systemd: k0s writes `Environment="NAME=VALUE"`, k0sctl's drop-in
/// `Environment=NAME=VALUE` or `Environment='NAME=VALUE'`) and `export NAME=VALUE` (OpenRC) lines
/// of the installed k0s service, in the order systemd reads them, as name → sha256 of the value:
/// the values may be secrets and never leave this function. A later assignment wins and an
/// empty `Environment=` clears the list, as in systemd.
pub fn parse_service_env(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        let rest = if let Some(rest) = line.strip_prefix("Environment=") {
            rest
        } else if let Some(rest) = line.strip_prefix("export ") {
            rest
        } else {
            continue;
        };
        let words = unquote_words(rest)?;
        if words.is_empty() && line.starts_with("Environment=") {
            env.clear();
        }
        for assignment in words {
            let Some((name, value)) = assignment.split_once('=') else {
                return Err(
                    "the k0s service has an environment line without `NAME=` (edited by hand?)"
                        .into(),
                );
            };
            if !crate::spec::valid_env_name(name) {
                return Err(format!(
                    "the k0s service sets an environment variable with an invalid name ({:?})",
                    name.chars().take(64).collect::<String>()
                ));
            }
            env.insert(name.to_string(), crate::hash::sha256_hex(value));
        }
    }
    Ok(env)
}

/// Words as systemd (and a shell) split an `Environment=` value: whitespace separates,
/// `'…'` is literal, `"…"` takes `\"` and `\\` escapes, a backslash outside quotes escapes
/// the next character, and adjacent pieces join (`'a'"'"'b'` is `a'b`).
fn unquote_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("unterminated ' in the service environment".into()),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => w.push(c),
                            None => return Err("unterminated \" in the service environment".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("unterminated \" in the service environment".into()),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    cur.get_or_insert_with(String::new).push(c);
                }
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = cur {
        words.push(w);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unit lines `k0s install -e` writes (pkg/install/systemd_linux.go, openrc_linux.go),
    /// read as name → sha256 of the value; nothing of a value is kept.
    #[test]
    fn service_environment_is_read_as_hashes() {
        let unit = "[Service]\nExecStart=/usr/local/bin/k0s worker\nEnvironment=\"HTTP_PROXY=http://p:3128\"\nEnvironment=\"TOKEN=a=b\"\nRestartSec=10\n";
        let env = parse_service_env(unit).unwrap();
        assert_eq!(env.len(), 2);
        assert_eq!(env["HTTP_PROXY"], crate::hash::sha256_hex("http://p:3128"));
        assert_eq!(env["TOKEN"], crate::hash::sha256_hex("a=b"));
        let openrc = parse_service_env("export EMPTY=\nexport X=1\n").unwrap();
        assert_eq!(openrc["EMPTY"], crate::hash::sha256_hex(""));
        assert!(parse_service_env("").unwrap().is_empty());
        assert!(parse_service_env("Environment=\"NOEQUALS\"\n").is_err());
        // k0sctl's drop-in (rig v2 ServiceEnvironmentContent: shellescape.Quote), read after the
        // unit: its values win; an empty Environment= clears what came before.
        let merged = parse_service_env(
            "Environment=\"A=unit\"\nEnvironment=\"B=unit\"\nEnvironment=A=dropin\nEnvironment='SP=hello world' 'Q=it'\"'\"'s'\n",
        )
        .unwrap();
        assert_eq!(merged["A"], crate::hash::sha256_hex("dropin"));
        assert_eq!(merged["B"], crate::hash::sha256_hex("unit"));
        assert_eq!(merged["SP"], crate::hash::sha256_hex("hello world"));
        assert_eq!(merged["Q"], crate::hash::sha256_hex("it's"));
        let cleared =
            parse_service_env("Environment=\"A=1\"\nEnvironment=\nEnvironment=B=2\n").unwrap();
        assert_eq!(cleared.keys().collect::<Vec<_>>(), ["B"]);
        assert!(parse_service_env("Environment='A=1\n").is_err());
        assert!(parse_service_env("Environment=\"BAD-NAME=1\"\n").is_err());
    }
}
