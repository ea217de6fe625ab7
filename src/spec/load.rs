//! Reading a spec from files, folders or stdin into a `Spec`: envsubst, YAML/JSON parsing into a
//! positioned tree, splitting documents (one k0sctl Cluster, k0s ClusterConfig documents merged
//! into spec.k0s.config, everything else kept as manifests), the structural check against the
//! raw model's schema, resolution with defaults and the offline validation. Every finding is
//! collected; the spec is returned only when there is no error.

use crate::spec::check::Checker;
use crate::spec::diag::{Diagnostic, Diagnostics};
use crate::spec::envsubst;
use crate::spec::model::Spec;
use crate::spec::node::{Node, NodeKind};
use crate::spec::raw::{self, RawCluster, RawHost};
use crate::spec::resolve::{self, Env, Sink};
use crate::spec::validate;
use std::path::{Path, PathBuf};

pub const CLUSTER_API_VERSION: &str = "k0sctl.k0sproject.io/v1beta1";
pub const K0S_API_VERSION: &str = "k0s.k0sproject.io/v1beta1";

/// A spec that loaded without errors.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub spec: Spec,
    /// sha256 (hex) over the canonical JSON of the resolved spec: changes exactly when what
    /// k0sform would do from this spec can change.
    pub sha256: String,
    /// Warnings found while loading (unsupported-but-harmless fields…), sorted.
    pub warnings: Vec<Diagnostic>,
    /// The files read, in order (`-` for stdin).
    pub files: Vec<PathBuf>,
}

impl Loaded {
    /// The folder of the first spec file (where the state file lives by default); the current
    /// folder for stdin.
    pub fn folder(&self) -> PathBuf {
        self.files
            .first()
            .filter(|f| f.as_os_str() != "-")
            .and_then(|f| f.parent())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// The spec files to read when no `-c` is given: `k0sctl.yaml`, else `k0sctl.yml`, in the
/// current folder (k0sctl's lookup). Names `k0sctl.yaml` when neither exists, so the error
/// says what was looked for.
pub fn default_paths() -> Vec<PathBuf> {
    let yml = PathBuf::from("k0sctl.yml");
    if !Path::new("k0sctl.yaml").exists() && yml.exists() {
        vec![yml]
    } else {
        vec![PathBuf::from("k0sctl.yaml")]
    }
}

/// What loading reads from the process: environment variables (for `${VAR}` and `~`) and stdin.
pub struct LoadOptions<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Content for the path `-`; None reads the real stdin.
    pub stdin: Option<&'a str>,
}

/// Load the spec from these paths (files, folders, or `-` for stdin) with the process
/// environment. Empty `paths` means `default_paths()`.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, Diagnostics> {
    let env = |k: &str| std::env::var(k).ok();
    load_with(
        paths,
        &LoadOptions {
            env: &env,
            stdin: None,
        },
    )
}

struct Doc {
    file: PathBuf,
    node: Node,
}

/// `load` with an explicit environment and stdin (for tests and embedding).
pub fn load_with(paths: &[PathBuf], opts: &LoadOptions) -> Result<Loaded, Diagnostics> {
    let defaults;
    let paths = if paths.is_empty() {
        defaults = default_paths();
        &defaults[..]
    } else {
        paths
    };
    // Every value taken from the environment is remembered, to keep it out of output.
    let used = std::cell::RefCell::new(std::collections::BTreeMap::<String, String>::new());
    let recording = |k: &str| {
        let v = (opts.env)(k);
        if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
            used.borrow_mut().insert(k.to_string(), v.clone());
        }
        v
    };
    // Only `$VAR` expansion records: `HOME` looked up for a `~` in a path is no secret, and
    // recording it showed every `/root` in output as `${HOME}`.
    let expanding = &LoadOptions {
        env: &recording,
        stdin: opts.stdin,
    };
    let mut diags = Vec::new();
    let files = expand_paths(paths, &mut diags);
    let mut docs = Vec::new();
    for file in &files {
        let text = if file.as_os_str() == "-" {
            match opts.stdin {
                Some(s) => s.to_string(),
                None => match std::io::read_to_string(std::io::stdin()) {
                    Ok(s) => s,
                    Err(e) => {
                        diags.push(Diagnostic::error(
                            display_name(file),
                            "",
                            format!("cannot read stdin: {e}"),
                        ));
                        continue;
                    }
                },
            }
        } else {
            match std::fs::read_to_string(file) {
                Ok(s) => s,
                Err(e) => {
                    diags.push(Diagnostic::error(
                        file,
                        "",
                        format!("cannot read the spec: {e}"),
                    ));
                    continue;
                }
            }
        };
        parse_file(&display_name(file), &text, expanding, &mut docs, &mut diags);
    }
    let result = assemble(&files, docs, opts, &mut diags);
    // Diagnostics show values from the environment as written (`${VAR}`), as plans do.
    let shown = crate::spec::model::shown_values(used.borrow().clone());
    for d in &mut diags {
        d.message = crate::spec::model::shown_with(&shown, &d.message);
    }
    let mut all = Diagnostics(diags);
    all.sort();
    match result {
        Some(mut spec) if !all.has_errors() => {
            spec.set_env_values(used.take());
            let canonical = serde_json::to_vec(&spec).unwrap_or_default();
            Ok(Loaded {
                spec,
                sha256: crate::hash::sha256_hex(&canonical),
                warnings: all.0,
                files,
            })
        }
        _ => {
            if !all.has_errors() {
                // Cannot happen (no spec means an error was recorded); never return Ok without one.
                all.0.push(Diagnostic::error(
                    files.first().cloned().unwrap_or_default(),
                    "",
                    "no usable spec",
                ));
            }
            Err(all)
        }
    }
}

fn display_name(file: &Path) -> PathBuf {
    if file.as_os_str() == "-" {
        PathBuf::from("<stdin>")
    } else {
        file.to_path_buf()
    }
}

/// Files and folders (all `*.yaml`/`*.yml` below it, sorted, as k0sctl's `dir/**/*.{yml,yaml}`).
fn expand_paths(paths: &[PathBuf], diags: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            out.push(p.clone());
        } else if p.is_dir() {
            let mut found = Vec::new();
            collect_yaml(p, &mut found, diags);
            found.sort();
            if found.is_empty() {
                diags.push(Diagnostic::error(
                    p,
                    "",
                    "no *.yaml or *.yml files in this folder",
                ));
            }
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            let msg = if p == Path::new("k0sctl.yaml") {
                "not found (nor k0sctl.yml): give the spec with -c PATH".to_string()
            } else {
                "not found".to_string()
            };
            diags.push(Diagnostic::error(p, "", msg));
        }
    }
    out
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>, diags: &mut Vec<Diagnostic>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            diags.push(Diagnostic::error(
                dir,
                "",
                format!("cannot read folder: {e}"),
            ));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_yaml(&path, out, diags);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        // YAML 1.2 booleans only, so `y`/`on` keys in free-form config stay strings; typed
        // boolean fields still accept yes/no (check.rs).
        strict_booleans: true,
        // `perm: 0644` keeps its digits instead of becoming the decimal number 644.
        leading_zero_numbers_as_strings: true,
        // A host is ~20 YAML nodes: the defaults (250,000 nodes, 1,000,000 events) stopped
        // specs at ~12,000 hosts. Room for ~200,000 hosts.
        budget: serde_saphyr::budget! {
            max_nodes: 5_000_000,
            max_events: 10_000_000,
            // Anchors hold a few keys in real specs; the default (1,000,000 recorded events)
            // lets an alias bomb (tests/fuzz.rs) run for seconds before it is refused.
            max_recorded_anchor_events: 100_000,
        },
    }
}

fn parse_file(
    file: &Path,
    text: &str,
    opts: &LoadOptions,
    docs: &mut Vec<Doc>,
    diags: &mut Vec<Diagnostic>,
) {
    let expanded = match envsubst::expand(text, opts.env) {
        Ok(e) => e,
        Err(e) => {
            diags.push(
                Diagnostic::error(file, "", format!("variable expansion: {}", e.message))
                    .at(e.line, e.column),
            );
            return;
        }
    };
    match serde_saphyr::from_multiple_with_options::<Node>(&expanded.text, parse_options()) {
        Ok(nodes) => {
            for mut node in nodes {
                node.remap(&|l, c| expanded.origin(u64::from(l), u64::from(c)));
                docs.push(Doc {
                    file: file.to_path_buf(),
                    node,
                });
            }
        }
        Err(e) => {
            let (line, col) = e
                .location()
                .map(|l| expanded.origin(l.line(), l.column()))
                .unwrap_or((0, 0));
            diags.push(
                Diagnostic::error(file, "", format!("invalid YAML: {}", plain_message(&e)))
                    .at(line, col),
            );
        }
    }
}

/// serde-saphyr's message without its own " at line X column Y" (we print the position).
fn plain_message(e: &serde_saphyr::Error) -> String {
    let s = e.to_string();
    let s = s.lines().next().unwrap_or_default().to_string();
    let s = match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    };
    // Advice aimed at the library's caller, not at someone editing a spec.
    s.trim_end_matches(", set DuplicateKeyPolicy in Options if acceptable")
        .to_string()
}

enum DocKind {
    Cluster,
    ClusterConfig,
    Manifest,
}

fn classify(doc: &Doc, diags: &mut Vec<Diagnostic>) -> Option<DocKind> {
    let node = &doc.node;
    if !matches!(node.kind, NodeKind::Map(_)) {
        diags.push(
            Diagnostic::error(
                &doc.file,
                "",
                format!(
                    "a document must be a mapping with apiVersion and kind, found {}",
                    node.describe()
                ),
            )
            .at(node.line, node.column),
        );
        return None;
    }
    let api = node.get("apiVersion").and_then(Node::as_str);
    let kind = node.get("kind").and_then(Node::as_str);
    let (Some(api), Some(kind)) = (api, kind) else {
        let missing = if api.is_none() { "apiVersion" } else { "kind" };
        diags.push(
            Diagnostic::error(&doc.file, missing, format!("every document needs `apiVersion` and `kind` (k0sctl: {CLUSTER_API_VERSION} Cluster)"))
                .at(node.line, node.column),
        );
        return None;
    };
    if api.starts_with("k0sctl.k0sproject.io/") {
        if api != CLUSTER_API_VERSION {
            let (l, c) = node.locate("apiVersion");
            diags.push(
                Diagnostic::error(
                    &doc.file,
                    "apiVersion",
                    format!("unsupported apiVersion `{api}`: expected `{CLUSTER_API_VERSION}`"),
                )
                .at(l, c),
            );
            return None;
        }
        if !kind.eq_ignore_ascii_case("cluster") {
            let (l, c) = node.locate("kind");
            diags.push(
                Diagnostic::error(
                    &doc.file,
                    "kind",
                    format!("unknown kind `{kind}` for {CLUSTER_API_VERSION}: expected `Cluster`"),
                )
                .at(l, c),
            );
            return None;
        }
        return Some(DocKind::Cluster);
    }
    if api.eq_ignore_ascii_case(K0S_API_VERSION) && kind.eq_ignore_ascii_case("clusterconfig") {
        return Some(DocKind::ClusterConfig);
    }
    Some(DocKind::Manifest)
}

/// A manifest document needs apiVersion, kind and metadata.name that the plan can show, and
/// must not name the same object as an earlier one.
fn check_manifest(doc: &Doc, earlier: &[Doc], diags: &mut Vec<Diagnostic>) {
    let json = doc.node.to_json();
    match crate::manifests::identify(&json) {
        Err(e) => {
            let (l, c) = doc.node.locate("metadata");
            diags.push(
                Diagnostic::error(&doc.file, "metadata", format!("a Kubernetes manifest: {e}"))
                    .at(l, c),
            );
        }
        Ok(id) => {
            if let Some(first) = earlier.iter().find(|d| {
                crate::manifests::identify(&d.node.to_json()).is_ok_and(|o| o.same_object(&id))
            }) {
                let (l, c) = doc.node.locate("metadata");
                diags.push(
                    Diagnostic::error(
                        &doc.file,
                        "metadata",
                        format!(
                            "manifest {id} is given twice (the first is in {}:{})",
                            first.file.display(),
                            first.node.line
                        ),
                    )
                    .at(l, c),
                );
            }
        }
    }
}

/// The spec from the documents of `files`, in named phases: sort the documents, read the
/// Cluster document against the schema, resolve it, validate it, merge the ClusterConfigs.
fn assemble(
    files: &[PathBuf],
    docs: Vec<Doc>,
    opts: &LoadOptions,
    diags: &mut Vec<Diagnostic>,
) -> Option<Spec> {
    let Documents {
        cluster,
        configs,
        manifests,
    } = sort_documents(docs, diags);
    let Some(cluster) = cluster else {
        no_cluster_document(files, diags);
        return None;
    };
    let (raw, hosts, structural_errors) = read_cluster(&cluster, diags)?;
    let env = Env {
        base: base_dir(&cluster.file),
        home: (opts.env)("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
    };
    let mut sink = Sink {
        file: &cluster.file,
        node: &cluster.node,
        diags: Vec::new(),
    };
    let mut spec = resolve::resolve(&raw, &hosts, &env, &mut sink);
    // With a broken host left out, whole-cluster rules (a controller exists, `single` is
    // alone…) would judge an incomplete list: only per-field checks run then.
    let complete =
        !structural_errors && hosts.iter().all(Option::is_some) && spec.hosts.len() == hosts.len();
    validate::validate(&spec, complete, &mut sink);
    diags.append(&mut sink.diags);
    merge_cluster_configs(&mut spec, configs, diags);
    spec.manifests = manifests;
    Some(spec)
}

/// The documents of a spec by kind: the one Cluster, the ClusterConfigs, the other manifests.
struct Documents {
    cluster: Option<Doc>,
    configs: Vec<Doc>,
    manifests: Vec<serde_json::Value>,
}

fn sort_documents(docs: Vec<Doc>, diags: &mut Vec<Diagnostic>) -> Documents {
    let mut cluster: Option<Doc> = None;
    let mut configs = Vec::new();
    let mut manifests: Vec<Doc> = Vec::new();
    for doc in docs {
        match classify(&doc, diags) {
            Some(DocKind::Cluster) => {
                if let Some(first) = &cluster {
                    let (l, c) = doc.node.locate("kind");
                    diags.push(
                        Diagnostic::error(&doc.file, "kind", format!(
                            "a second Cluster document (the first is in {}:{}): give exactly one",
                            first.file.display(),
                            first.node.line
                        ))
                        .at(l, c),
                    );
                } else {
                    cluster = Some(doc);
                }
            }
            Some(DocKind::ClusterConfig) => configs.push(doc),
            Some(DocKind::Manifest) => {
                // k0sctl `kubectl apply`s these at the end of apply (phase/apply_manifests.go);
                // so does k0sform (`manifests`): each needs an identity the plan can name.
                check_manifest(&doc, &manifests, diags);
                manifests.push(doc)
            }
            None => {}
        }
    }
    Documents {
        cluster,
        configs,
        manifests: manifests.iter().map(|d| d.node.to_json()).collect(),
    }
}

/// The error for a spec without a Cluster document, unless an earlier error explains it.
fn no_cluster_document(files: &[PathBuf], diags: &mut Vec<Diagnostic>) {
    if !diags.iter().any(Diagnostic::is_error) {
        let names: Vec<String> = files
            .iter()
            .map(|f| display_name(f).display().to_string())
            .collect();
        diags.push(Diagnostic::error(
            files.first().map(|f| display_name(f)).unwrap_or_default(),
            "",
            format!(
                "no {CLUSTER_API_VERSION} Cluster document in {}",
                if names.is_empty() {
                    "the given paths".to_string()
                } else {
                    names.join(", ")
                }
            ),
        ));
    }
}

/// The Cluster document checked against the schema and read: the cluster, its hosts one by one
/// (`None` for a broken one), and whether the schema check found problems.
fn read_cluster(
    cluster: &Doc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(RawCluster, Vec<Option<RawHost>>, bool)> {
    let schema = serde_json::to_value(raw::schema()).unwrap_or(serde_json::Value::Bool(true));
    let mut checker = Checker::new(&schema);
    let json = checker.check(&schema, &cluster.node, "");
    for p in &checker.problems {
        diags.push(
            Diagnostic::error(&cluster.file, p.field.clone(), p.message.clone())
                .at(p.line, p.column),
        );
    }
    let structural_errors = !checker.problems.is_empty();
    let mut json = json?;
    // Hosts are read one by one so that a broken host is a hole, not a shifted index.
    let host_values = json
        .get_mut("spec")
        .and_then(|s| s.as_object_mut())
        .and_then(|s| s.remove("hosts"));
    let hosts: Vec<Option<RawHost>> = match host_values {
        Some(serde_json::Value::Array(items)) => items
            .into_iter()
            .map(|v| serde_json::from_value(v).ok())
            .collect(),
        _ => Vec::new(),
    };
    let raw: RawCluster = match serde_json::from_value(json) {
        Ok(r) => r,
        Err(e) => {
            diags.push(
                Diagnostic::error(
                    &cluster.file,
                    "",
                    format!("cannot read the Cluster document: {e}"),
                )
                .at(cluster.node.line, cluster.node.column),
            );
            return None;
        }
    };
    Some((raw, hosts, structural_errors))
}

/// The folder relative paths of the spec are read from: the Cluster document's, or the
/// current one for stdin.
fn base_dir(file: &Path) -> PathBuf {
    if file == Path::new("<stdin>") {
        std::env::current_dir().unwrap_or_default()
    } else {
        std::path::absolute(file)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default()
    }
}

/// The ClusterConfig documents merged into `spec.k0s.config` (`merge_keep_existing`).
fn merge_cluster_configs(spec: &mut Spec, configs: Vec<Doc>, diags: &mut Vec<Diagnostic>) {
    for doc in configs {
        match doc.node.to_json() {
            serde_json::Value::Object(src) => {
                let target = spec
                    .k0s
                    .config
                    .get_or_insert_with(|| serde_json::Value::Object(Default::default()));
                if let serde_json::Value::Object(t) = target {
                    merge_keep_existing(t, src);
                }
            }
            other => diags.push(
                Diagnostic::error(
                    &doc.file,
                    "",
                    format!("a ClusterConfig must be a mapping, found {other}"),
                )
                .at(doc.node.line, doc.node.column),
            ),
        }
    }
}

/// k0sctl merges ClusterConfig documents with dig's `Mapping.Merge` without options: mappings
/// merge recursively, a key already set wins, nulls are skipped.
fn merge_keep_existing(
    target: &mut serde_json::Map<String, serde_json::Value>,
    source: serde_json::Map<String, serde_json::Value>,
) {
    use serde_json::Value;
    for (k, v) in source {
        match (target.get_mut(&k), v) {
            (_, Value::Null) => {}
            (Some(Value::Object(t)), Value::Object(s)) => merge_keep_existing(t, s),
            (Some(_), _) => {}
            (None, v) => {
                target.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load_str(yaml: &str) -> Result<Loaded, Diagnostics> {
        let env = |k: &str| match k {
            "K0S_VERSION" => Some("v1.33.4+k0s.0".to_string()),
            _ => None,
        };
        load_with(
            &[PathBuf::from("-")],
            &LoadOptions {
                env: &env,
                stdin: Some(yaml),
            },
        )
    }

    #[test]
    fn zero_drain_durations_are_k0sctls_defaults() {
        let l = load_str(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: controller\n    ssh: {address: 10.0.0.1}\n  options:\n    drain: {gracePeriod: 0s, timeout: 0, skipWaitForDeleteTimeout: 30s}\n",
        )
        .unwrap();
        let d = &l.spec.options.drain;
        assert_eq!(
            (d.grace_period, d.timeout, d.skip_wait_for_delete_timeout),
            (120, 300, 30)
        );
    }

    #[test]
    fn connect_hooks_are_warned_others_run() {
        let l = load_str(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: controller\n    ssh: {address: 10.0.0.1}\n    hooks:\n      connect: {after: [uptime]}\n      backup: {before: [sync]}\n      apply: {before: [date], after: [date]}\n      install: {before: [date]}\n      upgrade: {after: [date]}\n      reset: {before: [date]}\n",
        )
        .unwrap();
        let fields: Vec<&str> = l.warnings.iter().map(|w| w.field.as_str()).collect();
        let hooks: Vec<&str> = fields
            .iter()
            .copied()
            .filter(|f| f.contains("hooks"))
            .collect();
        // `connect.after` runs; `apply` is noted once (run only on changed hosts).
        assert_eq!(hooks, ["spec.hosts[0].hooks.apply"], "{:?}", l.warnings);
        assert_eq!(l.spec.hosts[0].hooks["reset"]["before"], ["date"]);
        assert_eq!(l.spec.hosts[0].hooks["backup"]["before"], ["sync"]);
    }

    /// A diagnostic about a value from the environment shows the `${VAR}` it came from, not
    /// the value (issue 28, item 8).
    #[test]
    fn diagnostics_show_environment_values_as_written() {
        let env = |k: &str| (k == "ROLE").then(|| "s3cret-role".to_string());
        let yaml = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - {role: \"${ROLE}\", ssh: {address: 10.0.0.1}}\n";
        let diags = load_with(
            &[PathBuf::from("-")],
            &LoadOptions {
                env: &env,
                stdin: Some(yaml),
            },
        )
        .expect_err("not a role");
        let text: Vec<String> = diags.0.iter().map(|d| d.to_string()).collect();
        assert!(!text.is_empty());
        assert!(text.iter().all(|t| !t.contains("s3cret-role")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("${ROLE}")), "{text:?}");
    }

    #[test]
    fn merge_is_digs() {
        let mut t = json!({"spec": {"a": 1, "n": {"x": 1}}})
            .as_object()
            .cloned()
            .unwrap();
        let s =
            json!({"spec": {"a": 2, "b": 3, "n": {"y": 2}, "z": null}, "kind": "clusterconfig"})
                .as_object()
                .cloned()
                .unwrap();
        merge_keep_existing(&mut t, s);
        assert_eq!(
            serde_json::Value::Object(t),
            json!({"spec": {"a": 1, "b": 3, "n": {"x": 1, "y": 2}}, "kind": "clusterconfig"})
        );
    }

    #[test]
    fn minimal_spec_gets_k0sctl_defaults() {
        let l = load_str(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: single\n    ssh: {address: 127.0.0.1}\n  k0s: {version: $K0S_VERSION}\n",
        )
        .expect("loads");
        let s = &l.spec;
        assert_eq!(s.name, "k0s-cluster");
        let h = &s.hosts[0];
        assert_eq!((h.ssh.user.as_str(), h.ssh.port), ("root", 22));
        assert_eq!(h.data_dir, "/var/lib/k0s");
        assert_eq!(h.k0s_install_path, "/usr/local/bin/k0s");
        assert_eq!(
            s.k0s.version.as_ref().map(ToString::to_string).as_deref(),
            Some("v1.33.4+k0s.0")
        );
        assert_eq!(s.options, crate::spec::Options::default());
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        assert_eq!(l.sha256.len(), 64);
    }

    #[test]
    fn all_errors_together_with_positions() {
        let e = load_str(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: controller\n    ssh: {address: 10.0.0.1, keyPth: x}\n  - role: wroker\n    ssh: {address: 10.0.0.2, port: 70000}\n",
        )
        .unwrap_err();
        let text = e.to_string();
        assert_eq!(e.error_count(), 3, "{text}");
        assert!(text.contains("<stdin>:6:30: error: spec.hosts[0].ssh.keyPth: unknown field `keyPth`, did you mean `keyPath`?"), "{text}");
        assert!(
            text.contains("<stdin>:7:11: error: spec.hosts[1].role: `wroker` is not one of"),
            "{text}"
        );
        assert!(
            text.contains("spec.hosts[1].ssh.port: 70000 is out of range"),
            "{text}"
        );
    }

    #[test]
    fn json_is_accepted() {
        let l = load_str(r#"{"apiVersion": "k0sctl.k0sproject.io/v1beta1", "kind": "Cluster", "spec": {"hosts": [{"role": "single", "ssh": {"address": "127.0.0.1", "port": 9022}}], "k0s": {"version": "v1.33.4+k0s.0"}}}"#)
            .expect("loads");
        assert_eq!(l.spec.hosts[0].ssh.port, 9022);
    }

    fn host_yaml(extra: &str) -> String {
        format!(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: cluster\nspec:\n  hosts:\n  - role: controller\n    ssh: {{address: 10.0.0.1, user: \"${{SSH_USER:-}}\", port: ${{SSH_PORT}}}}\n{extra}  k0s: {{version: v1.33.4+k0s.0}}\n"
        )
    }

    #[test]
    fn install_flags_lift_into_fields_like_k0sctl() {
        let l = load_str(&host_yaml(
            "    kubeletRootDir: /var/lib/kubelet-old\n    installFlags: [\"--data-dir=/data/k0s\", \"--enable-worker\", \"--kubelet-root-dir=/data/kubelet\", \"--no-taints\", \"--debug\"]\n",
        ))
        .expect("loads");
        let h = &l.spec.hosts[0];
        assert_eq!(h.data_dir, "/data/k0s");
        // As --data-dir, and over kubeletRootDir (k0sctl `cluster/host.go` `SetDefaults`): so
        // `k0s reset` gets it too.
        assert_eq!(h.kubelet_root_dir.as_deref(), Some("/data/kubelet"));
        assert_eq!(h.role, crate::spec::Role::ControllerWorker);
        assert!(h.no_taints);
        assert_eq!(
            h.install_flags,
            ["--enable-worker", "--no-taints", "--debug"]
        );
        assert!(
            l.warnings
                .iter()
                .any(|w| w.message.contains("--enable-worker makes"))
        );
        // Unset variables: empty user and port mean the defaults.
        assert_eq!((h.ssh.user.as_str(), h.ssh.port), ("root", 22));
    }

    /// k0sctl passes `hostname` as written in `--hostname-override`; kubelet lower-cases the
    /// Node name (k8s `pkg/util/node` `GetHostname`).
    #[test]
    fn hostname_keeps_its_case_for_the_flag() {
        let l = load_str(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: cluster\nspec:\n  hosts:\n  - role: worker\n    hostname: Worker-1\n    ssh: {address: 10.0.0.1}\n  - role: controller\n    ssh: {address: 10.0.0.2}\n  k0s: {version: v1.33.4+k0s.0}\n",
        )
        .expect("loads");
        let h = &l.spec.hosts[0];
        assert_eq!(h.hostname.as_deref(), Some("Worker-1"));
        assert_eq!(h.node_name().as_deref(), Some("worker-1"));
        assert!(
            crate::k0s::desired::install_args(&l.spec, h)
                .contains(&"--kubelet-extra-args=--hostname-override=Worker-1".to_string())
        );
    }

    /// `hostname` and a `--hostname-override` in installFlags may both be set when they agree,
    /// as k0sctl allows (phase/gather_facts.go): the flag is given once, with `hostname`. When
    /// they differ it is k0sctl's error.
    #[test]
    fn hostname_and_the_same_hostname_override_flag_load() {
        let yaml = |flag: &str| {
            format!(
                "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: worker\n    hostname: node-a\n    installFlags: ['--kubelet-extra-args=\"--max-pods=9 --hostname-override={flag}\"']\n    ssh: {{address: 10.0.0.1}}\n  - role: controller\n    ssh: {{address: 10.0.0.2}}\n  k0s: {{version: v1.33.4+k0s.0}}\n"
            )
        };
        let l = load_str(&yaml("node-a")).expect("the same name in both loads");
        let h = &l.spec.hosts[0];
        assert_eq!(h.node_name().as_deref(), Some("node-a"));
        let args = crate::k0s::desired::install_args(&l.spec, h);
        let extra: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--kubelet-extra-args"))
            .collect();
        assert_eq!(extra.len(), 1, "{args:?}");
        assert_eq!(
            extra[0].matches("--hostname-override").count(),
            1,
            "{args:?}"
        );
        let err = load_str(&yaml("node-b"))
            .expect_err("differing names")
            .to_string();
        assert!(
            err.contains("`node-a` differs from --hostname-override=node-b"),
            "{err}"
        );
    }

    #[test]
    fn yaml_1_1_booleans_and_scalar_strings_as_k0sctl_reads_them() {
        let l = load_str(&host_yaml(
            "    uploadBinary: yes\n    reset: off\n    environment: {RETRIES: 3, DEBUG: true}\n",
        ))
        .expect("loads");
        let h = &l.spec.hosts[0];
        assert!(h.upload_binary);
        assert!(!h.reset);
        assert_eq!(h.environment["RETRIES"], "3");
        assert_eq!(h.environment["DEBUG"], "true");
    }

    #[test]
    fn file_modes() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = dir.path().join("a.txt");
        std::fs::write(&src, "x").expect("write");
        let yaml = |perm: &str| {
            host_yaml(&format!(
                "    files: [{{src: {}, dstDir: /tmp, perm: {perm}}}]\n",
                src.display()
            ))
        };
        let mode =
            |perm: &str| load_str(&yaml(perm)).map(|l| l.spec.hosts[0].files[0].perm.clone());
        assert_eq!(mode("0644").expect("loads"), Some("0644".to_string()));
        assert_eq!(mode("\"0600\"").expect("loads"), Some("0600".to_string()));
        assert_eq!(mode("644").expect("loads"), Some("0644".to_string()));
        let e = mode("\"0844\"").unwrap_err().to_string();
        assert!(e.contains("invalid file mode `0844`"), "{e}");
        let e = mode("\"0044\"").unwrap_err().to_string();
        assert!(e.contains("owner could not read"), "{e}");
    }

    #[test]
    fn columns_survive_variable_expansion() {
        // `${SSH_PORT}` (11 chars) becomes nothing; the error after it still points at the file.
        let e = load_str(&host_yaml("    hostname: Bad_Name\n    noTaints: true\n")).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("<stdin>:7:15: error: spec.hosts[0].hostname"),
            "{text}"
        );
        let yaml = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - {role: controller, ssh: {address: \"${LONG_UNSET}\", prt: 22}}\n";
        let text = load_str(yaml).unwrap_err().to_string();
        assert!(text.contains("<stdin>:5:56: error: spec.hosts[0].ssh.prt: unknown field `prt`, did you mean `port`?"), "{text}");
    }

    #[test]
    fn ssh_options_are_ssh_config_text() {
        let l = load_str(
            "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: single\n    ssh:\n      address: 127.0.0.1\n      options: {StrictHostKeyChecking: false, ServerAliveInterval: 30, Ciphers: aes256-ctr}\n  k0s: {version: v1.33.4+k0s.0}\n",
        )
        .expect("loads");
        let o = &l.spec.hosts[0].ssh.options;
        assert_eq!(o["StrictHostKeyChecking"], "no");
        assert_eq!(o["ServerAliveInterval"], "30");
        assert_eq!(o["Ciphers"], "aes256-ctr");
    }

    #[test]
    fn manifests_are_kept_with_an_identity_each() {
        let head = "apiVersion: k0sctl.k0sproject.io/v1beta1\nkind: Cluster\nspec:\n  hosts:\n  - role: single\n    ssh: {address: 127.0.0.1}\n  k0s: {version: v1.33.4+k0s.0}\n";
        let ok = format!(
            "{head}---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: apps}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: apps}}\ndata: {{k: v}}\n"
        );
        let l = load_str(&ok).expect("loads");
        assert_eq!(l.spec.manifests.len(), 2);
        assert!(l.warnings.iter().all(|w| !w.message.contains("manifest")));
        let e = load_str(&format!(
            "{head}---\napiVersion: v1\nkind: ConfigMap\ndata: {{k: v}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("metadata.name is missing"), "{e}");
        let e = load_str(&format!(
            "{ok}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a, namespace: apps}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("ConfigMap apps/a is given twice"), "{e}");
    }
}
