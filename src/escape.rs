//! Text that came from a host (hostnames, remote stderr, config diffs, node names) is shown to
//! the person about to type `yes`. Terminal control characters in it could hide, move or
//! rewrite plan lines, so every such string goes through `escape` where human output is
//! rendered. JSON output is not escaped here: serde_json already escapes control characters.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control character made visible (`\e` → `\x1b`, C1 controls → `\u{9b}`,
/// newlines → `\n`), and Unicode bidirectional overrides, which reorder what is displayed, as
/// `\u{202e}` and the like. Tabs stay. Text without any of these is returned unchanged.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !needs_escape(c) {
            out.push(c);
        } else if c == '\n' {
            out.push_str("\\n");
        } else if c == '\r' {
            out.push_str("\\r");
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// `escape` applied line by line: the line breaks of a multi-line text stay, nothing else does.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    let lines: Vec<Cow<str>> = s.split('\n').map(escape).collect();
    Cow::Owned(lines.join("\n"))
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(escape("c1"), "c1");
        assert!(matches!(escape("plain text\twith tab"), Cow::Borrowed(_)));
        assert_eq!(escape("c1\x1b[2K\r"), "c1\\x1b[2K\\r");
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("x\u{7f}"), "x\\x7f");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("ünïcode ok"), "ünïcode ok");
    }

    #[test]
    fn lines_keep_their_breaks() {
        assert_eq!(escape_lines("a\nb\n"), "a\nb\n");
        assert_eq!(escape_lines("a\x1b[1A\nb\r\n"), "a\\x1b[1A\nb\\r\n");
    }
}
