//! No module circles (issue 29, "Structure"): reads src/, builds the graph of modules from the
//! paths the code names (`use crate::x`, `crate::x::`, `super::`, `self::`, a child module's
//! name; comments, strings and `#[cfg(test)]` items excluded) and fails on a cycle, naming each
//! edge of it with the file and line that makes it.
//!
//! Checked: the top-level modules of the crate, and the files inside `apply/steps/` and `ssh/`
//! (the runner and the step files, the session and its parts). A `pub use child::X` in a
//! `mod.rs` is a name, not a dependency: a sibling's `super::X` counts as an edge to `child`.
//!
//! No crate API: it reads the source as text, with the lexer in `support/rust_lex.rs`.

use crate::support::rust_lex::{Tok, tokenize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module file: its path from the crate root (`["apply", "steps", "runner"]`) and source.
struct ModFile {
    path: Vec<String>,
    file: String,
    src: String,
}

/// A reference from one module to a path, and where it was written.
struct Reference {
    from: Vec<String>,
    to: Vec<String>,
    file: String,
    line: usize,
}

/// Every module file under `src/`, with its module path.
fn module_files(src: &Path) -> Vec<ModFile> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read src dir")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(src).expect("under src");
            let mut path: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if path.last().is_some_and(|l| l == "mod") {
                path.pop();
            }
            if path == ["lib"] {
                path.clear();
            } else if path == ["main"] {
                return None; // the binary, not a module of the library
            }
            Some(ModFile {
                path,
                file: format!("src/{}", rel.display()),
                src: std::fs::read_to_string(&p).expect("read source"),
            })
        })
        .collect()
}

/// The paths one file names, resolved from the crate root. `children` lists each module's
/// child modules (file-based), for paths that start with a child's name.
fn references(
    m: &ModFile,
    children: &BTreeMap<Vec<String>, BTreeSet<String>>,
) -> (Vec<Reference>, Vec<(String, Vec<String>)>) {
    let toks = tokenize(&m.src);
    let mut refs = Vec::new();
    let mut reexports = Vec::new();
    // Inline modules (`mod x { … }`) open at a brace depth.
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let here = |scope: &Vec<(String, usize)>| {
            let mut p = m.path.clone();
            p.extend(scope.iter().map(|(n, _)| n.clone()));
            p
        };
        match &toks[i].0 {
            Tok::Punct('#') => {
                // An attribute: skipped; `#[cfg(test)]` skips the item after it too.
                let mut j = i + 1;
                if toks.get(j).map(|t| &t.0) == Some(&Tok::Punct('!')) {
                    j += 1;
                }
                if toks.get(j).map(|t| &t.0) != Some(&Tok::Punct('[')) {
                    i += 1;
                    continue;
                }
                let end = matching(&toks, j);
                let body: Vec<&Tok> = toks[j + 1..end].iter().map(|t| &t.0).collect();
                let is_test = body
                    == [
                        &Tok::Ident("cfg".into()),
                        &Tok::Punct('('),
                        &Tok::Ident("test".into()),
                        &Tok::Punct(')'),
                    ];
                i = end + 1;
                if is_test && toks.get(j - 1).map(|t| &t.0) != Some(&Tok::Punct('!')) {
                    i = item_end(&toks, i);
                }
                continue;
            }
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if scope.last().is_some_and(|(_, d)| *d == depth) {
                    scope.pop();
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    scope.push((name.clone(), depth));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(kw) if kw == "pub" && scope.is_empty() => {
                // `pub use child::…;` (any visibility) in a module: re-exports, resolved later.
                let mut j = i + 1;
                if toks.get(j).map(|t| &t.0) == Some(&Tok::Punct('(')) {
                    j = matching(&toks, j) + 1;
                }
                if let Some((Tok::Ident(u), _)) = toks.get(j)
                    && u == "use"
                    && let Some((Tok::Ident(first), _)) = toks.get(j + 1)
                    && children.get(&m.path).is_some_and(|c| c.contains(first))
                {
                    let end = item_end(&toks, j);
                    let mut leaves = Vec::new();
                    use_tree(&toks, j + 1, end, m.path.clone(), &mut leaves);
                    for (name, target) in leaves {
                        reexports.push((name, target));
                    }
                    i = end;
                    continue;
                }
            }
            Tok::Ident(first) => {
                let prev = i.checked_sub(1).map(|p| &toks[p].0);
                let starts = !matches!(prev, Some(Tok::PathSep));
                let followed = toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep);
                let in_vis = matches!(prev, Some(Tok::Ident(p)) if p == "in");
                if starts && followed && !in_vis {
                    let cur = here(&scope);
                    let base = match first.as_str() {
                        "crate" => Some(Vec::new()),
                        "self" => Some(cur.clone()),
                        "super" => {
                            let mut b = cur.clone();
                            b.pop();
                            Some(b)
                        }
                        name if children.get(&cur).is_some_and(|c| c.contains(name)) => {
                            let mut b = cur.clone();
                            b.push(name.to_string());
                            Some(b)
                        }
                        _ => None,
                    };
                    if let Some(mut base) = base {
                        let mut j = i + 1;
                        // `super::super::…`
                        while toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep)
                            && toks.get(j + 1).map(|t| &t.0) == Some(&Tok::Ident("super".into()))
                        {
                            base.pop();
                            j += 2;
                        }
                        let end = path_end(&toks, j);
                        let mut leaves = Vec::new();
                        use_tree(&toks, j, end, base, &mut leaves);
                        for (_, to) in leaves {
                            refs.push(Reference {
                                from: cur.clone(),
                                to,
                                file: m.file.clone(),
                                line: toks[i].1,
                            });
                        }
                        i = end;
                        continue;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    (refs, reexports)
}

/// The index of the token that closes the bracket opened at `open`.
fn matching(toks: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0;
    for (k, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

/// The index just past the item starting at `i`: its `;`, or its outermost `{ … }` block.
fn item_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    while i < toks.len() {
        match toks[i].0 {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('{') => return matching(toks, i) + 1,
            Tok::Punct('(' | '[') => i = matching(toks, i) + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index just past a path's tail starting at `i` (`::a::b`, `::{a, b::c}`, `::*`).
fn path_end(toks: &[(Tok, usize)], mut i: usize) -> usize {
    while toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
        match toks.get(i + 1).map(|t| &t.0) {
            Some(Tok::Ident(_)) | Some(Tok::Punct('*')) => i += 2,
            Some(Tok::Punct('{')) => return matching(toks, i + 1) + 1,
            // `::<T>` turbofish: the path ends before it.
            _ => return i,
        }
    }
    i
}

/// The leaves of a use tree (or a plain path) in `toks[i..end]`, with `prefix` before them:
/// (the name it is known by, its full path).
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    end: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(String, Vec<String>)>,
) {
    let leaf = |prefix: &Vec<String>, out: &mut Vec<(String, Vec<String>)>| {
        out.push((prefix.last().cloned().unwrap_or_default(), prefix.clone()));
    };
    while i < end {
        match &toks[i].0 {
            Tok::PathSep => i += 1,
            Tok::Ident(s) if s == "as" => {
                if let Some((Tok::Ident(alias), _)) = toks.get(i + 1) {
                    out.push((alias.clone(), prefix.clone()));
                }
                return;
            }
            Tok::Ident(s) if s == "self" => i += 1,
            Tok::Ident(s) => {
                prefix.push(s.clone());
                i += 1;
            }
            Tok::Punct('{') => {
                let close = matching(toks, i);
                let mut start = i + 1;
                let mut k = start;
                let mut depth = 0;
                while k < close {
                    match toks[k].0 {
                        Tok::Punct('{') => depth += 1,
                        Tok::Punct('}') => depth -= 1,
                        Tok::Punct(',') if depth == 0 => {
                            if k > start {
                                use_tree(toks, start, k, prefix.clone(), out);
                            }
                            start = k + 1;
                        }
                        _ => {}
                    }
                    k += 1;
                }
                if close > start {
                    use_tree(toks, start, close, prefix.clone(), out);
                }
                return;
            }
            _ => break,
        }
    }
    leaf(&prefix, out);
}

/// The whole graph: for each (from, to) module pair, one place that makes the edge.
struct Graph {
    modules: BTreeSet<Vec<String>>,
    refs: Vec<Reference>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = module_files(&src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.path.clone()).collect();
    let mut children: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for m in &modules {
        if let Some((last, parent)) = m.split_last() {
            children
                .entry(parent.to_vec())
                .or_default()
                .insert(last.clone());
        }
    }
    let mut refs = Vec::new();
    let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for f in &files {
        let (r, x) = references(f, &children);
        refs.extend(r);
        for (name, target) in x {
            reexports
                .entry(f.path.clone())
                .or_default()
                .insert(name, target);
        }
    }
    Graph {
        modules,
        refs,
        reexports,
    }
}

impl Graph {
    /// The module file a path lands in: its longest module prefix, through a `pub use child::X`
    /// of that module to the child.
    fn module_of(&self, path: &[String]) -> Vec<String> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let m = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| self.modules.contains(p))
                .unwrap_or_default();
            let target = path
                .get(m.len())
                .and_then(|name| self.reexports.get(&m)?.get(name));
            match target {
                Some(t) if t != &path[..=m.len()] => {
                    let mut next = t.clone();
                    next.extend_from_slice(&path[m.len() + 1..]);
                    path = next;
                }
                _ => return m,
            }
        }
        Vec::new()
    }

    /// Edges between the nodes of one scope: the modules directly under `scope` (and `scope`
    /// itself, for what its own file defines), each with one place that makes it.
    fn edges(&self, scope: &[String]) -> BTreeMap<(String, String), String> {
        let node = |p: &[String]| -> Option<String> {
            if !p.starts_with(scope) {
                return None;
            }
            Some(match p.get(scope.len()) {
                Some(child) => child.clone(),
                None if scope.is_empty() => "(lib.rs)".to_string(),
                None => "(mod.rs)".to_string(),
            })
        };
        let mut edges = BTreeMap::new();
        for r in &self.refs {
            let to = self.module_of(&r.to);
            if let (Some(a), Some(b)) = (node(&r.from), node(&to))
                && a != b
            {
                edges
                    .entry((a, b))
                    .or_insert_with(|| format!("{}:{}", r.file, r.line));
            }
        }
        edges
    }
}

/// The strongly connected components with more than one node (Tarjan), each sorted.
fn cycles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    struct T<'a> {
        adj: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for &w in &t.adj[v] {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        adj: &adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in adj.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// A readable failure: each circle with every edge inside it and where it is made.
fn describe(scope: &str, edges: &BTreeMap<(String, String), String>) -> Option<String> {
    let found = cycles(edges);
    if found.is_empty() {
        return None;
    }
    let mut msg = format!("module circles in {scope}:\n");
    for comp in found {
        msg += &format!("  {{{}}} import each other:\n", comp.join(", "));
        for ((a, b), at) in edges {
            if comp.contains(a) && comp.contains(b) {
                msg += &format!("    {a} -> {b}  ({at})\n");
            }
        }
    }
    Some(msg)
}

fn check(scope: &[&str]) {
    let scope: Vec<String> = scope.iter().map(|s| s.to_string()).collect();
    let g = graph();
    assert!(
        scope.is_empty() || g.modules.contains(&scope),
        "no module {scope:?} in src/"
    );
    let edges = g.edges(&scope);
    let name = if scope.is_empty() {
        "the crate's top-level modules".to_string()
    } else {
        format!("src/{}/", scope.join("/"))
    };
    if let Some(msg) = describe(&name, &edges) {
        panic!("{msg}");
    }
}

#[test]
fn no_circles_between_top_level_modules() {
    check(&[]);
    // The layers, lowest first (each module above everything it imports), for
    // `cargo test --test module_graph -- --nocapture`.
    for (n, layer) in layers(&graph().edges(&[])).iter().enumerate() {
        println!("layer {n}: {}", layer.join(" "));
    }
}

/// Each node's layer: 0 for one that imports nothing, else one above the highest it imports.
/// Only called on a graph without circles.
fn layers(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&str> = BTreeSet::new();
    for (a, b) in edges.keys() {
        nodes.insert(a);
        nodes.insert(b);
    }
    let mut level: BTreeMap<&str, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for _ in 0..nodes.len() {
        for (a, b) in edges.keys() {
            let above = level[b.as_str()] + 1;
            let l = level.get_mut(a.as_str()).expect("node");
            *l = (*l).max(above);
        }
    }
    let mut out: Vec<Vec<String>> = Vec::new();
    for (n, l) in level {
        if out.len() <= l {
            out.resize(l + 1, Vec::new());
        }
        out[l].push(n.to_string());
    }
    out
}

#[test]
fn no_circles_inside_apply_steps() {
    check(&["apply", "steps"]);
}

#[test]
fn no_circles_inside_ssh() {
    check(&["ssh"]);
}

/// The checker itself: a circle in a made-up tree is found, comments and strings are not paths.
#[test]
fn the_checker_sees_paths_and_skips_comments_and_strings() {
    let toks =
        tokenize("// crate::a::X\nlet s = \"crate::b\"; r#\"crate::c\"#; 'x'; 'a; crate::d::Y");
    let idents: Vec<_> = toks
        .iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(idents, ["let", "s", "crate", "d", "Y"]);

    let files = [
        (
            vec!["a".to_string()],
            "use crate::b::X;\n#[cfg(test)]\nmod tests { use crate::c::Z; }",
        ),
        (vec!["b".to_string()], "fn f() { crate::a::g(); }"),
        (vec!["c".to_string()], "use super::a::{self, Y};"),
    ];
    let children = BTreeMap::from([(
        Vec::new(),
        BTreeSet::from(["a".to_string(), "b".to_string(), "c".to_string()]),
    )]);
    let mut refs = Vec::new();
    for (path, src) in files {
        let m = ModFile {
            path,
            file: "x.rs".into(),
            src: src.into(),
        };
        refs.extend(references(&m, &children).0);
    }
    let g = Graph {
        modules: children[&Vec::new()]
            .iter()
            .map(|c| vec![c.clone()])
            .collect(),
        refs,
        reexports: BTreeMap::new(),
    };
    let edges = g.edges(&[]);
    let keys: Vec<_> = edges.keys().map(|(a, b)| format!("{a}->{b}")).collect();
    assert_eq!(keys, ["a->b", "b->a", "c->a"]);
    assert_eq!(cycles(&edges), [vec!["a".to_string(), "b".to_string()]]);
}
