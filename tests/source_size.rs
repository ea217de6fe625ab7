//! Issue 29's done-when for the size of the code: no source file under `src/` or `tests/` over
//! 1,000 lines, and no function under `src/` over 120 lines outside tests and big `match`es
//! (the functions under `tests/` are tests and their fixtures: not counted).
//!
//! A function's lines run from its `fn` line to its closing brace. Not counted: the items
//! under `#[cfg(test)]` or `#[test]` (test modules and their functions), and a function whose
//! body is mostly one `match` (the `match` spans at least three quarters of the function's
//! lines: a table of arms reads best in one place). A file's lines are all of its lines,
//! its tests too: a long test module goes into a file of its own.
//!
//! It reads the source as text with the lexer in `support/rust_lex.rs` (shared with
//! `module_graph`), which skips comments, strings, raw strings and character literals, so
//! braces in them do not count.

use crate::support::rust_lex::{self, tokenize};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 120;
/// A function is "mostly one match" when one `match` spans at least this share of its lines.
const MATCH_SHARE: (usize, usize) = (3, 4);

#[test]
fn no_long_files_or_functions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(
        files.len() > 10,
        "no sources found under {}",
        root.display()
    );
    // Files of `#[cfg(test)] mod name;` hold tests only: their functions are not counted.
    let mut scanned = Vec::new();
    let mut test_files = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (long, test_mods) = scan(&text);
        let dir = match file.file_stem().and_then(|s| s.to_str()) {
            Some("mod" | "lib" | "main") => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for m in test_mods {
            test_files.push(dir.join(format!("{m}.rs")));
            test_files.push(dir.join(m).join("mod.rs"));
        }
        scanned.push((file, text.lines().count(), long));
    }
    let mut offenders = Vec::new();
    for (file, lines, long) in scanned {
        let shown = file.strip_prefix(root.parent().unwrap()).unwrap().display();
        if lines > MAX_FILE_LINES {
            offenders.push(format!("{shown}: {lines} lines (at most {MAX_FILE_LINES})"));
        }
        if test_files.contains(file) {
            continue;
        }
        for f in long {
            offenders.push(format!(
                "{shown}:{}: fn {} has {} lines (at most {MAX_FN_LINES})",
                f.line, f.name, f.lines
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "split these (issue 29):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_long_test_files() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&manifest.join("tests"), &mut files);
    assert!(files.len() > 10, "no tests found under tests/");
    let mut offenders = Vec::new();
    for file in &files {
        let shown = file.strip_prefix(manifest).unwrap().display().to_string();
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        if lines > MAX_FILE_LINES {
            offenders.push(format!("{shown}: {lines} lines (at most {MAX_FILE_LINES})"));
        }
    }
    assert!(
        offenders.is_empty(),
        "split these into a folder of topic files (issue 29):\n{}",
        offenders.join("\n")
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[derive(Debug, PartialEq)]
struct LongFn {
    name: String,
    line: usize,
    lines: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

/// The identifiers and punctuation of Rust source, each with its line; comments, strings,
/// raw strings, byte strings, character literals, numbers and lifetimes are left out.
fn tokens(src: &str) -> Vec<Tok> {
    tokenize(src)
        .into_iter()
        .filter_map(|(tok, line)| {
            let text = match tok {
                rust_lex::Tok::Ident(word) => word,
                rust_lex::Tok::PathSep => "::".into(),
                rust_lex::Tok::Punct(ch) => ch.to_string(),
                rust_lex::Tok::Lit => return None,
            };
            Some(Tok { text, line })
        })
        .collect()
}

/// The index of the token that closes the bracket opened at `open`.
fn closing(t: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, tok) in t.iter().enumerate().skip(open) {
        match tok.text.as_str() {
            "{" | "(" | "[" => depth += 1,
            "}" | ")" | "]" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    t.len() - 1
}

/// From `from`, the first `{` or `;` outside parentheses and brackets (the start of an item's
/// body, or the end of a body-less item).
fn body_or_end(t: &[Tok], from: usize) -> usize {
    let mut k = from;
    while k < t.len() {
        match t[k].text.as_str() {
            "{" | ";" => return k,
            "(" | "[" => k = closing(t, k),
            _ => {}
        }
        k += 1;
    }
    t.len() - 1
}

/// Whether the attribute starting at `t[at]` (`#`) is `#[test]` or `#[cfg(test)]`, and where
/// it ends.
fn test_attribute(t: &[Tok], at: usize) -> Option<(bool, usize)> {
    if t.get(at + 1)?.text != "[" {
        return None;
    }
    let end = closing(t, at + 1);
    let inner: Vec<&str> = t[at + 2..end].iter().map(|x| x.text.as_str()).collect();
    Some((inner == ["test"] || inner == ["cfg", "(", "test", ")"], end))
}

/// The functions of `src` longer than `MAX_FN_LINES`, outside test items and big matches.
fn long_functions(src: &str) -> Vec<LongFn> {
    scan(src).0
}

/// The long functions of `src`, and the names of its `#[cfg(test)] mod name;` (test modules
/// in files of their own).
fn scan(src: &str) -> (Vec<LongFn>, Vec<String>) {
    let t = tokens(src);
    let mut long = Vec::new();
    let mut test_mods = Vec::new();
    let mut k = 0;
    while k < t.len() {
        if t[k].text == "#" {
            if let Some((is_test, end)) = test_attribute(&t, k) {
                k = if is_test {
                    // Skip the whole item: further attributes, then its body or `;`.
                    let body = body_or_end(&t, end + 1);
                    if t[body].text == "{" {
                        closing(&t, body)
                    } else {
                        if t[body - 2].text == "mod" {
                            test_mods.push(t[body - 1].text.clone());
                        }
                        body
                    }
                } else {
                    end
                };
            }
        } else if t[k].text == "fn" && t.get(k + 1).is_some_and(|n| is_ident(&n.text)) {
            let body = body_or_end(&t, k + 2);
            if t[body].text == "{" {
                let end = closing(&t, body);
                let lines = t[end].line - t[k].line + 1;
                if lines > MAX_FN_LINES && !mostly_one_match(&t[body..=end], lines) {
                    long.push(LongFn {
                        name: t[k + 1].text.clone(),
                        line: t[k].line,
                        lines,
                    });
                }
            }
            // Go on inside the body: a function may hold other functions.
        }
        k += 1;
    }
    (long, test_mods)
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Whether one `match` in `body` spans at least `MATCH_SHARE` of the function's `lines`.
fn mostly_one_match(body: &[Tok], lines: usize) -> bool {
    (0..body.len()).any(|k| {
        if body[k].text != "match" {
            return false;
        }
        let open = body_or_end(body, k + 1);
        if body[open].text != "{" {
            return false;
        }
        let span = body[closing(body, open)].line - body[k].line + 1;
        span * MATCH_SHARE.1 >= lines * MATCH_SHARE.0
    })
}

#[test]
fn the_counter_skips_strings_comments_tests_and_big_matches() {
    let long_body = |n: usize| "    x();\n".repeat(n);
    // 2 lines of signature and brace + 119 = 121 lines.
    let src = format!("fn too_long() {{\n{}}}\n", long_body(119));
    assert_eq!(
        long_functions(&src),
        [LongFn {
            name: "too_long".into(),
            line: 1,
            lines: 121
        }]
    );
    let src = format!("fn just_right() {{\n{}}}\n", long_body(118));
    assert_eq!(long_functions(&src), []);
    // Braces in strings, raw strings, chars and comments do not end the body early.
    let src = format!(
        "/* {{ */ fn tricky<'a>(s: &'a str) {{\n    let _ = \"}}\"; let _ = r#\"}}\"#;\n    let _ = '}}'; let _ = b'}}'; // }}\n{}}}\n",
        long_body(118)
    );
    assert_eq!(long_functions(&src).len(), 1, "{src}");
    // Test modules and test functions are not counted.
    let src = format!(
        "#[cfg(test)]\nmod tests {{\n    fn helper() {{\n{}    }}\n}}\n",
        long_body(130)
    );
    assert_eq!(long_functions(&src), []);
    let src = format!("#[test]\nfn a_test() {{\n{}}}\n", long_body(130));
    assert_eq!(long_functions(&src), []);
    assert_eq!(scan("#[cfg(test)]\nmod tests;\nmod other;\n").1, ["tests"]);
    // A function that is one big match is not counted; a big one with a small match is.
    let arms = "        A => {\n            x();\n        }\n".repeat(45);
    let src = format!("fn table(v: V) -> u8 {{\n    match v {{\n{arms}    }}\n}}\n");
    assert_eq!(long_functions(&src), []);
    let src = format!(
        "fn mixed(v: V) {{\n{}    match v {{\n        A => x(),\n    }}\n}}\n",
        long_body(130)
    );
    assert_eq!(long_functions(&src).len(), 1);
    // Function pointer types and trait declarations are no functions with a body.
    let src = "trait T { fn f(&self); }\nstruct S { f: fn(u8) -> u8 }\n";
    assert_eq!(long_functions(src), []);
}
