//! `files:` sources with glob characters, matched as k0sctl's matcher (doublestar) matches
//! them: which local files a glob `src` names.

use std::path::{Path, PathBuf};

/// Does a `src` ask for a glob? k0sctl's `isGlob` (`cluster/uploadfile.go`) also counts `%`,
/// which doublestar matches literally; k0sform reads such a path as the file or folder it names.
pub fn is_glob(src: &str) -> bool {
    src.contains(['*', '?', '[', ']', '{', '}'])
}

/// The regular files matching `pattern` (an absolute path with glob characters), as
/// doublestar (k0sctl's matcher) finds them: the base is the folder before the first segment
/// with a glob character (`SplitPattern`), `*` `?` `[…]` (`[!…]`, `[^…]`) match within one
/// segment, `**` any number of folders, `{a,b}` alternatives, `\` escapes; dot files
/// match too; folders are skipped (k0sctl `glob`). Returns the base and the matches' paths
/// below it (`/`-separated), sorted and without repeats.
pub fn glob(pattern: &Path) -> Result<(PathBuf, Vec<String>), String> {
    let text = pattern.to_string_lossy();
    let segs: Vec<&str> = text.split('/').collect();
    let first = segs.iter().position(|s| is_glob(s)).unwrap_or(segs.len());
    let base = if first == 0 {
        PathBuf::from(".")
    } else {
        PathBuf::from(segs[..first].join("/"))
    };
    let base = if base.as_os_str().is_empty() {
        PathBuf::from("/")
    } else {
        base
    };
    let mut out = Vec::new();
    // Alternatives may hold a `/` (`{a/*.tar,b}`), so they are expanded before the split.
    for alt in braces(&segs[first..].join("/")) {
        let rest: Vec<String> = alt
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| s.to_string())
            .collect();
        glob_walk(&base, "", &rest, &mut out).map_err(|e| format!("{}: {e}", base.display()))?;
    }
    out.sort();
    out.dedup();
    Ok((base, out))
}

fn glob_walk(
    base: &Path,
    rel: &str,
    segs: &[String],
    out: &mut Vec<String>,
) -> std::io::Result<()> {
    let here = if rel.is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    };
    let Some((seg, more)) = segs.split_first() else {
        if here.is_file() {
            out.push(rel.to_string());
        }
        return Ok(());
    };
    let entries = match std::fs::read_dir(&here) {
        Ok(e) => e,
        // Not a folder (or gone): nothing below it matches.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || here.is_file() => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut names: Vec<(String, bool)> = Vec::new();
    for e in entries {
        let e = e?;
        // Folders are entered through their own name only, not through symlinks (no loops).
        let dir = e.file_type()?.is_dir();
        names.push((e.file_name().to_string_lossy().into_owned(), dir));
    }
    names.sort();
    let sub = |n: &str| {
        if rel.is_empty() {
            n.to_string()
        } else {
            format!("{rel}/{n}")
        }
    };
    if seg == "**" {
        glob_walk(base, rel, more, out)?;
        for (n, dir) in &names {
            if *dir {
                glob_walk(base, &sub(n), segs, out)?;
            }
        }
        return Ok(());
    }
    let alts = braces(seg);
    for (n, _) in &names {
        if alts.iter().any(|a| seg_match(a.as_bytes(), n.as_bytes())) {
            glob_walk(base, &sub(n), more, out)?;
        }
    }
    Ok(())
}

/// `{a,b}` alternatives expanded (nested ones too); a lone brace is literal.
fn braces(p: &str) -> Vec<String> {
    let b = p.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'{' => {
                let (mut depth, mut j, mut parts, mut start) = (0, i + 1, Vec::new(), i + 1);
                while j < b.len() {
                    match b[j] {
                        b'\\' => j += 1,
                        b'{' => depth += 1,
                        b'}' if depth == 0 => break,
                        b'}' => depth -= 1,
                        b',' if depth == 0 => {
                            parts.push(&p[start..j]);
                            start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                if j >= b.len() {
                    return vec![p.to_string()];
                }
                parts.push(&p[start..j]);
                let (pre, post) = (&p[..i], &p[j + 1..]);
                return parts
                    .iter()
                    .flat_map(|m| braces(&format!("{pre}{m}{post}")))
                    .collect();
            }
            _ => i += 1,
        }
    }
    vec![p.to_string()]
}

/// One path segment against one brace-free pattern segment.
fn seg_match(p: &[u8], n: &[u8]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some(b'*') => (0..=n.len()).any(|k| seg_match(&p[1..], &n[k..])),
        Some(b'?') => !n.is_empty() && seg_match(&p[1..], &n[1..]),
        Some(b'[') => {
            let Some(&c) = n.first() else { return false };
            let mut i = 1;
            let neg = matches!(p.get(1), Some(b'!' | b'^'));
            if neg {
                i += 1;
            }
            let mut hit = false;
            let mut first = true;
            while i < p.len() && (first || p[i] != b']') {
                first = false;
                let mut lo = p[i];
                if lo == b'\\' && i + 1 < p.len() {
                    i += 1;
                    lo = p[i];
                }
                let mut hi = lo;
                if p.get(i + 1) == Some(&b'-') && p.get(i + 2).is_some_and(|&h| h != b']') {
                    hi = p[i + 2];
                    i += 2;
                }
                hit |= lo <= c && c <= hi;
                i += 1;
            }
            if i >= p.len() {
                // No closing `]`: a literal `[`.
                return c == b'[' && seg_match(&p[1..], &n[1..]);
            }
            hit != neg && seg_match(&p[i + 1..], &n[1..])
        }
        Some(b'\\') if p.len() > 1 => n.first() == Some(&p[1]) && seg_match(&p[2..], &n[1..]),
        Some(&c) => n.first() == Some(&c) && seg_match(&p[1..], &n[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_segments_match_as_doublestar_does() {
        let m = |p: &str, n: &str| {
            braces(p)
                .iter()
                .any(|a| seg_match(a.as_bytes(), n.as_bytes()))
        };
        assert!(m("*.tar", "a.tar") && m("*.tar", ".a.tar") && !m("*.tar", "a.tgz"));
        assert!(m("?.tar", "a.tar") && !m("?.tar", "ab.tar"));
        assert!(m("[a-c].tar", "b.tar") && !m("[a-c].tar", "d.tar"));
        assert!(m("[!a].tar", "b.tar") && !m("[^a].tar", "a.tar"));
        assert!(m("{a,b{c,d}}.tar", "bd.tar") && !m("{a,b}.tar", "c.tar"));
        assert!(m("\\*.tar", "*.tar") && !m("\\*.tar", "a.tar"));
        assert!(m("[.tar", "[.tar"));
        let d = tempfile::tempdir().unwrap();
        for f in ["x/a.tar", "x/y/b.tar", "x/y/z/c.tar", "x/y.tar/n"] {
            std::fs::create_dir_all(d.path().join(f).parent().unwrap()).unwrap();
            std::fs::write(d.path().join(f), f).unwrap();
        }
        let g = |p: &str| glob(&d.path().join(p)).unwrap();
        assert_eq!(
            g("x/**/*.tar"),
            (
                d.path().join("x"),
                vec!["a.tar".into(), "y/b.tar".into(), "y/z/c.tar".into()]
            )
        );
        // The base is the folder before the first glob segment; folders never match.
        assert_eq!(
            g("x/y*/*"),
            (d.path().join("x"), vec!["y.tar/n".into(), "y/b.tar".into()])
        );
        assert_eq!(g("x/*.tar").1, vec!["a.tar".to_string()]);
        assert_eq!(
            g("x/{y/*.tar,*.tar}"),
            (d.path().join("x"), vec!["a.tar".into(), "y/b.tar".into()])
        );
        assert!(g("nowhere/*.tar").1.is_empty());
    }
}
