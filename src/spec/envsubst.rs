//! `$VAR` / `${VAR}` expansion over the whole file before YAML parsing, as k0sctl does with
//! a8m/envsubst: unset variables expand to "", `$$` is a literal `$`, and `${VAR-d}`, `${VAR:-d}`,
//! `${VAR=d}`, `${VAR:=d}`, `${VAR+a}`, `${VAR:+a}`, `${VAR?msg}`, `${VAR:?msg}` work like the
//! shell. Every output character remembers where it came from, so diagnostics point at the
//! original file even when an expansion is longer or shorter than its `${…}`.

use std::collections::BTreeMap;

/// The expanded text plus, for each output character, its (line, column) in the input (1-based).
#[derive(Debug)]
pub struct Expanded {
    pub text: String,
    origin: Vec<(u32, u32)>,
    out_line_starts: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvsubstError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl Expanded {
    /// Where output position (line, column), both 1-based in characters, came from.
    pub fn origin(&self, line: u64, column: u64) -> (u32, u32) {
        let Some(start) = (line as usize)
            .checked_sub(1)
            .and_then(|l| self.out_line_starts.get(l))
        else {
            return (line as u32, column as u32);
        };
        let idx = start + (column as usize).saturating_sub(1);
        match self.origin.get(idx).or(self.origin.last()) {
            Some(&o) => o,
            None => (line as u32, column as u32),
        }
    }
}

/// How deep `${A:-${B:-…}}` may nest: far beyond any real spec, far below a stack overflow.
const MAX_NESTING: usize = 64;

struct Cursor<'a> {
    chars: Vec<(char, (u32, u32))>,
    pos: usize,
    /// `${…}` expressions open around the current position.
    depth: usize,
    env: &'a dyn Fn(&str) -> Option<String>,
    assigned: BTreeMap<String, String>,
}

/// Expand `input` with variables from `env`.
pub fn expand(
    input: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, EnvsubstError> {
    let mut chars = Vec::with_capacity(input.len());
    let (mut line, mut col) = (1u32, 1u32);
    for c in input.chars() {
        chars.push((c, (line, col)));
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    let mut cur = Cursor {
        chars,
        pos: 0,
        depth: 0,
        env,
        assigned: BTreeMap::new(),
    };
    let mut text = String::with_capacity(input.len());
    let mut origin = Vec::with_capacity(input.len());
    while cur.pos < cur.chars.len() {
        let (c, at) = cur.chars[cur.pos];
        if c == '$' {
            let s = cur.dollar()?;
            for ch in s.chars() {
                text.push(ch);
                origin.push(at);
            }
        } else {
            text.push(c);
            origin.push(at);
            cur.pos += 1;
        }
    }
    let mut out_line_starts = vec![0];
    for (i, c) in text.chars().enumerate() {
        if c == '\n' {
            out_line_starts.push(i + 1);
        }
    }
    Ok(Expanded {
        text,
        origin,
        out_line_starts,
    })
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Cursor<'_> {
    fn peek(&self, off: usize) -> Option<char> {
        self.chars.get(self.pos + off).map(|(c, _)| *c)
    }

    fn lookup(&self, name: &str) -> Option<String> {
        self.assigned
            .get(name)
            .cloned()
            .or_else(|| (self.env)(name))
    }

    fn err(&self, at: (u32, u32), message: String) -> EnvsubstError {
        EnvsubstError {
            line: at.0,
            column: at.1,
            message,
        }
    }

    /// At a `$`: consume the whole expression and return its value.
    fn dollar(&mut self) -> Result<String, EnvsubstError> {
        let at = self.chars[self.pos].1;
        match self.peek(1) {
            Some('$') => {
                self.pos += 2;
                Ok("$".into())
            }
            Some(c) if is_name_start(c) => {
                self.pos += 1;
                let name = self.name();
                Ok(self.lookup(&name).unwrap_or_default())
            }
            Some('{') => {
                if self.depth >= MAX_NESTING {
                    return Err(
                        self.err(at, format!("`${{…}}` nested more than {MAX_NESTING} deep"))
                    );
                }
                self.pos += 2;
                self.depth += 1;
                let value = self.braced(at);
                self.depth -= 1;
                value
            }
            _ => {
                self.pos += 1;
                Ok("$".into())
            }
        }
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek(0).filter(|c| is_name_char(*c)) {
            name.push(c);
            self.pos += 1;
        }
        name
    }

    /// After `${`: NAME, an optional operator and word, and `}`.
    fn braced(&mut self, at: (u32, u32)) -> Result<String, EnvsubstError> {
        if !self.peek(0).is_some_and(is_name_start) {
            return Err(self.err(
                at,
                "bad substitution: `${` must be followed by a variable name".into(),
            ));
        }
        let name = self.name();
        let colon = self.peek(0) == Some(':');
        if colon {
            self.pos += 1;
        }
        let op = match self.peek(0) {
            Some('}') if !colon => {
                self.pos += 1;
                return Ok(self.lookup(&name).unwrap_or_default());
            }
            Some(op @ ('-' | '=' | '+' | '?')) => op,
            None => {
                return Err(self.err(at, format!("unterminated `${{{name}`: missing `}}`")));
            }
            Some(other) => {
                let what = if other.is_whitespace() {
                    "a space or line break".to_string()
                } else {
                    format!("`{other}`")
                };
                return Err(self.err(
                    at,
                    format!("bad substitution `${{{name}`: expected `}}`, found {what}"),
                ));
            }
        };
        self.pos += 1;
        let word = self.word(at, &name)?;
        let value = self.lookup(&name);
        // With `:`, an empty value counts as unset.
        let set = match &value {
            Some(v) => !(colon && v.is_empty()),
            None => false,
        };
        Ok(match op {
            '-' => {
                if set {
                    value.unwrap_or_default()
                } else {
                    word
                }
            }
            '=' => {
                if set {
                    value.unwrap_or_default()
                } else {
                    self.assigned.insert(name, word.clone());
                    word
                }
            }
            '+' => {
                if set {
                    word
                } else {
                    String::new()
                }
            }
            _ => {
                if set {
                    value.unwrap_or_default()
                } else {
                    let msg = if word.is_empty() {
                        "parameter null or not set".to_string()
                    } else {
                        word
                    };
                    return Err(self.err(at, format!("{name}: {msg}")));
                }
            }
        })
    }

    /// The word of `${NAME:-word}` up to the matching `}`, itself expanded.
    fn word(&mut self, at: (u32, u32), name: &str) -> Result<String, EnvsubstError> {
        let mut out = String::new();
        loop {
            match self.peek(0) {
                None => {
                    return Err(self.err(at, format!("unterminated `${{{name}`: missing `}}`")));
                }
                Some('}') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some('$') => out.push_str(&self.dollar()?),
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "K0S_VERSION" => Some("v1.33.4+k0s.0".into()),
            "EMPTY" => Some(String::new()),
            "LONG" => Some("a-much-longer-value".into()),
            _ => None,
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!("{}x{}", "${A:-".repeat(100_000), "}".repeat(100_000));
        let e = expand(&deep, &env).unwrap_err();
        assert!(e.message.contains("nested"), "{e:?}");
        let ok = format!("{}x{}", "${A:-".repeat(10), "}".repeat(10));
        assert_eq!(expand(&ok, &env).unwrap().text, "x");
    }

    fn x(s: &str) -> String {
        expand(s, &env).expect("expands").text
    }

    #[test]
    fn forms() {
        assert_eq!(x("v: $K0S_VERSION"), "v: v1.33.4+k0s.0");
        assert_eq!(x("v: \"${K0S_VERSION}\""), "v: \"v1.33.4+k0s.0\"");
        assert_eq!(x("v: \"$UNSET\""), "v: \"\"");
        assert_eq!(x("${UNSET:-22}"), "22");
        assert_eq!(x("${EMPTY:-22}"), "22");
        assert_eq!(x("${EMPTY-22}"), "");
        assert_eq!(x("${UNSET-22}"), "22");
        assert_eq!(x("${K0S_VERSION:+set}"), "set");
        assert_eq!(x("${UNSET:+set}"), "");
        assert_eq!(x("${UNSET:=a}/${UNSET}"), "a/a");
        assert_eq!(x("${UNSET:-${K0S_VERSION}}"), "v1.33.4+k0s.0");
        assert_eq!(x("pa$$word $ 5$"), "pa$word $ 5$");
    }

    #[test]
    fn errors_have_positions() {
        let e = expand("a: 1\nb: ${OOPS\n", &env).unwrap_err();
        assert_eq!((e.line, e.column), (2, 4));
        assert!(e.message.contains("expected `}`"), "{}", e.message);
        let e = expand("x: ${UNSET:?must be set}", &env).unwrap_err();
        assert_eq!(e.message, "UNSET: must be set");
        assert!(expand("x: ${1}", &env).is_err());
    }

    #[test]
    fn positions_map_back_to_the_input() {
        let e = expand("a: ${LONG} b: c\nd: e", &env).expect("expands");
        // `b` is at column 21 in the output, column 12 in the input.
        let out_col = e.text.lines().next().unwrap().find("b:").unwrap() as u64 + 1;
        assert_eq!(e.origin(1, out_col), (1, 12));
        assert_eq!(e.origin(2, 1), (2, 1));
        // Inside the expansion: the `$`.
        assert_eq!(e.origin(1, 6), (1, 4));
    }

    proptest::proptest! {
        #[test]
        fn text_without_dollars_is_unchanged(s in "[a-z :{}\\n\"-]{0,80}") {
            let e = expand(&s, &env).expect("expands");
            proptest::prop_assert_eq!(&e.text, &s);
            for (i, line) in s.split('\n').enumerate() {
                for col in 1..=line.chars().count() {
                    proptest::prop_assert_eq!(e.origin(i as u64 + 1, col as u64), (i as u32 + 1, col as u32));
                }
            }
        }

        #[test]
        fn text_after_an_expansion_maps_back(pre in "[a-z ]{0,10}", post in "[a-z]{1,10}", var in "(K0S_VERSION|EMPTY|LONG|UNSET)") {
            let input = format!("{pre}${{{var}}}{post}");
            let e = expand(&input, &env).expect("expands");
            let out_col = e.text.chars().count() as u64; // last char of `post`
            proptest::prop_assert_eq!(e.origin(1, out_col), (1, input.chars().count() as u32));
        }
    }
}
