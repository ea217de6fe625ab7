//! `$VAR` / `${VAR}` expansion over the whole file before YAML parsing, as k0sctl does with
//! a8m/envsubst: unset variables expand to "", `$$` is a literal `$`, and `${VAR-d}`, `${VAR:-d}`,
//! `${VAR=d}`, `${VAR:=d}`, `${VAR+a}`, `${VAR:+a}`, `${VAR?msg}`, `${VAR:?msg}` work like the
//! shell. Every output character remembers where it came from, so diagnostics point at the
//! original file even when an expansion is longer or shorter than its `${…}`.

use std::collections::BTreeMap;

/// The expanded text, and where each part of it came from: copied runs of the input map
/// character for character, an expansion maps to its `$`. Kept as runs (a few per `${…}`), not
/// a position per character: a 50,000-host spec is ~11 MB, and a position per character cost
/// ~20 bytes each.
#[derive(Debug)]
pub struct Expanded<'a> {
    pub text: String,
    /// Sorted by `out`; a run lasts until the next one starts.
    runs: Vec<Run>,
    /// Byte offsets where the input's and the output's lines start.
    in_line_starts: Vec<usize>,
    out_line_starts: Vec<usize>,
    /// The input, for character columns.
    input: &'a str,
}

#[derive(Debug, Clone, Copy)]
struct Run {
    /// Byte offset in the output where the run starts.
    out: usize,
    /// Byte offset in the input: where the copied run starts, or the expansion's `$`.
    input: usize,
    copied: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvsubstError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// (line, column), 1-based, column in characters, of byte offset `at` of `text`.
fn position(text: &str, starts: &[usize], at: usize) -> (u32, u32) {
    let line = starts.partition_point(|&s| s <= at).max(1);
    let start = starts[line - 1];
    let column = text.get(start..at).map_or(0, |t| t.chars().count()) + 1;
    (line as u32, column as u32)
}

impl Expanded<'_> {
    /// Where output position (line, column), both 1-based in characters, came from.
    pub fn origin(&self, line: u64, column: u64) -> (u32, u32) {
        let Some(&start) = (line as usize)
            .checked_sub(1)
            .and_then(|l| self.out_line_starts.get(l))
        else {
            return (line as u32, column as u32);
        };
        // The column-th character from the line's start, else the text's last character.
        let rest = &self.text[start..];
        let Some(at) = rest
            .char_indices()
            .nth((column as usize).saturating_sub(1))
            .map(|(i, _)| start + i)
            .or_else(|| self.text.char_indices().last().map(|(i, _)| i))
        else {
            return (line as u32, column as u32);
        };
        let Some(run) = self
            .runs
            .get(self.runs.partition_point(|r| r.out <= at).wrapping_sub(1))
        else {
            return (line as u32, column as u32);
        };
        let input = if run.copied {
            run.input + (at - run.out)
        } else {
            run.input
        };
        position(self.input, &self.in_line_starts, input)
    }
}

/// How deep `${A:-${B:-…}}` may nest: far beyond any real spec, far below a stack overflow.
const MAX_NESTING: usize = 64;

struct Cursor<'a> {
    input: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    /// `${…}` expressions open around the current position.
    depth: usize,
    env: &'a dyn Fn(&str) -> Option<String>,
    assigned: BTreeMap<String, String>,
}

/// Expand `input` with variables from `env`.
pub fn expand<'a>(
    input: &'a str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded<'a>, EnvsubstError> {
    let mut cur = Cursor {
        input,
        pos: 0,
        depth: 0,
        env,
        assigned: BTreeMap::new(),
    };
    let mut text = String::with_capacity(input.len());
    let mut runs: Vec<Run> = Vec::new();
    while cur.pos < input.len() {
        let rest = &input[cur.pos..];
        let n = rest.find('$').unwrap_or(rest.len());
        if n > 0 {
            // Copied: one run with the copy before it when the two are contiguous.
            let contiguous = runs
                .last()
                .is_some_and(|r| r.copied && r.input + (text.len() - r.out) == cur.pos);
            if !contiguous {
                runs.push(Run {
                    out: text.len(),
                    input: cur.pos,
                    copied: true,
                });
            }
            text.push_str(&rest[..n]);
            cur.pos += n;
            continue;
        }
        let at = cur.pos;
        let value = cur.dollar().map_err(|(at, message)| {
            let (line, column) = position(input, &line_starts(input), at);
            EnvsubstError {
                line,
                column,
                message,
            }
        })?;
        runs.push(Run {
            out: text.len(),
            input: at,
            copied: false,
        });
        text.push_str(&value);
    }
    Ok(Expanded {
        in_line_starts: line_starts(input),
        out_line_starts: line_starts(&text),
        text,
        runs,
        input,
    })
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// An error at a byte offset of the input, with its message.
type CursorError = (usize, String);

impl Cursor<'_> {
    fn peek(&self, off: usize) -> Option<char> {
        self.input[self.pos..].chars().nth(off)
    }

    /// Past the next character (`pos` stays on a character boundary).
    fn bump(&mut self) {
        if let Some(c) = self.peek(0) {
            self.pos += c.len_utf8();
        }
    }

    fn lookup(&self, name: &str) -> Option<String> {
        self.assigned
            .get(name)
            .cloned()
            .or_else(|| (self.env)(name))
    }

    fn err(&self, at: usize, message: String) -> CursorError {
        (at, message)
    }

    /// At a `$`: consume the whole expression and return its value.
    fn dollar(&mut self) -> Result<String, CursorError> {
        let at = self.pos;
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
            self.bump();
        }
        name
    }

    /// After `${`: NAME, an optional operator and word, and `}`.
    fn braced(&mut self, at: usize) -> Result<String, CursorError> {
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
    fn word(&mut self, at: usize, name: &str) -> Result<String, CursorError> {
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
                    self.bump();
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
        // Columns count characters, not bytes; a `$$` maps to its first `$`.
        let e = expand("ä: ${LONG} ö$$b\nx: ${UNSET:-ü}y", &env).expect("expands");
        assert_eq!(e.text, "ä: a-much-longer-value ö$b\nx: üy");
        assert_eq!(e.origin(1, 24), (1, 12), "`ö`");
        assert_eq!(e.origin(1, 25), (1, 13), "`$$`");
        assert_eq!(e.origin(1, 26), (1, 15), "`b`");
        assert_eq!(e.origin(2, 4), (2, 4), "the default's `$`");
        assert_eq!(e.origin(2, 5), (2, 15), "`y`");
        // Past the end: the last character.
        assert_eq!(e.origin(2, 99), (2, 15));
        let e = expand("a: ü ${OOPS", &env).unwrap_err();
        assert_eq!((e.line, e.column), (1, 6));
    }

    proptest::proptest! {
        // A failing case is printed; nothing is written into the source tree.
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]
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
