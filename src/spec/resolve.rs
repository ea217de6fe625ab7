//! Raw k0sctl document → resolved `Spec`: k0sctl's defaults, empty strings meaning "not set"
//! (so `${VAR}` expanding to "" gives the default), relative paths against the spec file's
//! folder, `~/` against $HOME, and k0sctl's installFlags lifting (`--data-dir`, `--single`,
//! `--enable-worker`, `--no-taints`).
//!
//! Fields k0sctl knows that k0sform does not implement are reported here. The rule: an **error**
//! where carrying on would make apply do something different from what the file asks and the
//! user could not tell (winRM hosts);
//! a **warning** where the field is ignored and the outcome is still the cluster the file
//! describes (`os`, `connect.before` hooks, `openSSH.disableMultiplexing`). k0sctl's own
//! smoke-test files use several of the latter and must keep loading.

use crate::spec::Diagnostic;
use crate::spec::model::*;
use crate::spec::node::Node;
use crate::spec::raw::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where findings go: positions come from the document tree by field path.
pub(crate) struct Sink<'a> {
    pub file: &'a Path,
    pub node: &'a Node,
    pub diags: Vec<Diagnostic>,
}

impl Sink<'_> {
    /// An error pointing at the field's value.
    pub fn error(&mut self, field: &str, msg: impl Into<String>) {
        let (l, c) = self.node.locate(field);
        self.diags
            .push(Diagnostic::error(self.file, field, msg).at(l, c));
    }
    /// An error pointing at the field's key (for "this field is not supported").
    pub fn error_key(&mut self, field: &str, msg: impl Into<String>) {
        let (l, c) = self.node.locate_key(field);
        self.diags
            .push(Diagnostic::error(self.file, field, msg).at(l, c));
    }
    pub fn warn_key(&mut self, field: &str, msg: impl Into<String>) {
        let (l, c) = self.node.locate_key(field);
        self.diags
            .push(Diagnostic::warning(self.file, field, msg).at(l, c));
    }
}

/// Paths and environment the resolution depends on.
pub(crate) struct Env {
    /// Folder relative paths resolve against (absolute).
    pub base: PathBuf,
    pub home: Option<PathBuf>,
}

impl Env {
    pub fn path(&self, p: &str) -> PathBuf {
        if p == "~"
            && let Some(h) = &self.home
        {
            return h.clone();
        }
        if let Some(rest) = p.strip_prefix("~/")
            && let Some(h) = &self.home
        {
            return h.join(rest);
        }
        let pb = PathBuf::from(p);
        let joined = if pb.is_absolute() {
            pb
        } else {
            self.base.join(pb)
        };
        // Drop `.` components so paths print cleanly; `..` stays (symlinks make it meaningful).
        joined
            .components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect()
    }
}

/// "" means not set, as with k0sctl's defaults library.
fn set(s: &Option<String>) -> Option<String> {
    s.as_ref().filter(|v| !v.is_empty()).cloned()
}

/// `hosts` are `spec.hosts` in file order; None for a host that failed the structural check
/// (it keeps its index so diagnostics name the right host).
pub(crate) fn resolve(
    raw: &RawCluster,
    hosts: &[Option<RawHost>],
    env: &Env,
    sink: &mut Sink,
) -> Spec {
    let name = raw
        .metadata
        .as_ref()
        .and_then(|m| set(&m.name))
        .unwrap_or_else(|| DEFAULT_CLUSTER_NAME.into());
    let user = raw
        .metadata
        .as_ref()
        .and_then(|m| set(&m.user))
        .unwrap_or_else(|| DEFAULT_KUBECONFIG_USER.into());
    let empty_spec = RawClusterSpec {
        hosts: None,
        k0s: None,
        options: None,
    };
    let rs = raw.spec.as_ref().unwrap_or(&empty_spec);
    let hosts: Vec<HostSpec> = hosts
        .iter()
        .enumerate()
        .filter_map(|(i, h)| resolve_host(h.as_ref()?, i, env, sink))
        .collect();
    // Said once, at the first host with `apply` hooks.
    if let Some(h) = hosts.iter().find(|h| {
        h.hooks
            .get("apply")
            .is_some_and(|a| a.values().any(|l| !l.is_empty()))
    }) {
        sink.warn_key(
            &format!("spec.hosts[{}].hooks.apply", h.index - 1),
            "apply hooks run only on hosts an apply changes (k0sctl runs them on every host at \
             every apply); the plan lists the hooks it does not run",
        );
    }
    let mut k0s = resolve_k0s(rs.k0s.as_ref(), sink);
    // k0sctl `phase/gather_k0s_facts.go`: a controller installed with --enable-dynamic-config
    // puts the whole cluster in dynamic config mode.
    if !k0s.dynamic_config
        && let Some(h) = hosts.iter().find(|h| {
            h.role.is_controller()
                && h.install_args().iter().any(|a| {
                    a.strip_prefix("--enable-dynamic-config")
                        .is_some_and(|r| r.is_empty() || (r.starts_with('=') && r != "=false"))
                })
        })
    {
        sink.warn_key(
            &format!("spec.hosts[{}].installFlags", h.index - 1),
            "--enable-dynamic-config on a controller turns on spec.k0s.dynamicConfig (as in k0sctl)",
        );
        k0s.dynamic_config = true;
    }
    if k0s.dynamic_config {
        sink.warn_key(
            "spec.k0s.dynamicConfig",
            "with dynamic config, k0s reads cluster-wide settings from the ClusterConfig object once \
             the cluster exists: k0sform writes only the node part (api, network, storage) of \
             spec.k0s.config to controllers after the first; change the rest with `k0s config edit`",
        );
    }
    let options = resolve_options(rs.options.as_ref(), sink);
    Spec {
        name,
        user,
        hosts,
        k0s,
        options,
        manifests: Vec::new(),
        env_values: Vec::new(),
    }
}

fn resolve_ssh(s: &RawSsh, env: &Env) -> SshTarget {
    let mut t = SshTarget::new(s.address.clone(), s.port.unwrap_or(22));
    if let Some(u) = set(&s.user) {
        t.user = u;
    }
    t.key_path = set(&s.key_path).map(|k| env.path(&k));
    // k0sctl's `<type> <base64>` becomes its fingerprint; what does not decode is left as
    // written for validation to report.
    t.host_key = set(&s.host_key).map(|k| super::validate::host_key_pin(&k).unwrap_or(k));
    t.options = ssh_options(s.options.as_ref());
    t.bastion = s.bastion.as_ref().map(|b| Box::new(resolve_ssh(b, env)));
    t
}

/// ssh_config values as text: booleans become `yes`/`no`, as ssh_config spells them.
fn ssh_options(o: Option<&BTreeMap<String, OptionValue>>) -> BTreeMap<String, String> {
    o.into_iter()
        .flatten()
        .map(|(k, v)| {
            let v = match v {
                OptionValue::Bool(true) => "yes".to_string(),
                OptionValue::Bool(false) => "no".to_string(),
                OptionValue::Int(i) => i.to_string(),
                OptionValue::Text(s) => s.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn resolve_openssh(s: &RawOpenSsh, path: &str, env: &Env, sink: &mut Sink) -> SshTarget {
    let mut t = SshTarget::new(s.address.clone(), s.port.unwrap_or(22));
    t.openssh = true;
    if let Some(u) = set(&s.user) {
        t.user = u;
    }
    t.key_path = set(&s.key_path).map(|k| env.path(&k));
    t.config_path = set(&s.config_path).map(|k| env.path(&k));
    t.options = ssh_options(s.options.as_ref());
    if s.disable_multiplexing == Some(true) {
        sink.warn_key(
            &format!("{path}.disableMultiplexing"),
            "ignored: k0sform always reuses one SSH connection per host",
        );
    }
    t
}

fn resolve_host(h: &RawHost, i: usize, env: &Env, sink: &mut Sink) -> Option<HostSpec> {
    let p = format!("spec.hosts[{i}]");
    if h.win_rm.is_some() {
        sink.error_key(
            &format!("{p}.winRM"),
            // k0sctl runs Windows workers over WinRM, experimentally and only as workers on
            // k0s >= 1.34 (phase/validate_hosts.go); k0sform manages Linux hosts over SSH only.
            "Windows workers are not supported: k0sform manages Linux hosts over SSH, and this \
             host connects with winRM (Windows); remove it from the spec, or keep managing it \
             with k0sctl",
        );
    }
    let localhost = h.localhost.as_ref().is_some_and(RawLocalhost::enabled);
    let ssh = match (&h.ssh, &h.open_ssh) {
        // rig refuses a host with more than one protocol ("multiple protocols configured for a
        // single client", `compositeconfig.go` `configuredConfig`), and so does k0sform.
        (Some(_), _) | (_, Some(_)) if localhost => {
            let other = if h.ssh.is_some() { "ssh" } else { "openSSH" };
            sink.error_key(
                &format!("{p}.localhost"),
                format!("a host has one connection: set `localhost` or `{other}`, not both"),
            );
            return None;
        }
        // This machine (rig `protocol/localhost`): its commands run here, not over SSH.
        _ if localhost => SshTarget::local(),
        (Some(s), None) => resolve_ssh(s, env),
        (None, Some(o)) => resolve_openssh(o, &format!("{p}.openSSH"), env, sink),
        (Some(s), Some(_)) => {
            sink.error_key(
                &format!("{p}.openSSH"),
                "a host has one connection: set `ssh` or `openSSH`, not both",
            );
            resolve_ssh(s, env)
        }
        (None, None) => {
            // A connection block that failed the structural check was already reported.
            let written = ["ssh", "openSSH"]
                .iter()
                .any(|k| sink.node.locate(&format!("{p}.{k}")) != sink.node.locate(&p));
            if !written && h.win_rm.is_none() {
                sink.error(&p, "no connection: set `ssh` (or `openSSH`) for this host");
            }
            return None;
        }
    };
    let private_interface = set(&h.private_interface);
    if let Some(name) = &private_interface
        && !crate::spec::valid_interface(name)
    {
        sink.error_key(
            &format!("{p}.privateInterface"),
            format!("{name:?} is not a network interface name (1-15 letters, digits, `_-.@`)"),
        );
    }
    let mut host = HostSpec::new(h.role, ssh, i + 1);
    host.private_address = set(&h.private_address);
    host.private_interface = private_interface;
    // As written: k0sctl passes it so in `--hostname-override` (kubelet lower-cases the Node
    // name: `HostSpec::node_name`).
    host.hostname = set(&h.hostname);
    host.environment = h.environment.clone().unwrap_or_default();
    host.upload_binary = h.upload_binary.unwrap_or(false);
    host.k0s_binary_path = set(&h.k0s_binary_path).map(|b| env.path(&b));
    host.k0s_download_url = set(&h.k0s_download_url);
    host.k0s_download_sha256 = set(&h.k0s_download_sha256).map(|s| s.to_ascii_lowercase());
    host.use_existing_k0s = h.use_existing_k0s.unwrap_or(false);
    if let Some(ip) = set(&h.k0s_install_path) {
        host.k0s_install_path = ip;
    }
    if let Some(dd) = set(&h.data_dir) {
        host.data_dir = dd;
    }
    host.kubelet_root_dir = set(&h.kubelet_root_dir);
    host.no_taints = h.no_taints.unwrap_or(false);
    host.reset = h.reset.unwrap_or(false);
    host.os = set(&h.os);
    if host.os.is_some() {
        sink.warn_key(
            &format!("{p}.os"),
            "ignored: k0sform does not use OS modules",
        );
    }
    host.hooks = resolve_hooks(h.hooks.as_ref());
    // `backup` hooks run around `k0sform backup`; `connect.after` first on a host an apply
    // changes. k0sctl has no `connect.before` hook point (README "hook points"; it runs
    // `connect.after` only, phase/detect_os.go).
    if host
        .hooks
        .get("connect")
        .and_then(|s| s.get("before"))
        .is_some_and(|l| !l.is_empty())
    {
        sink.warn_key(
            &format!("{p}.hooks.connect.before"),
            "not run: k0sctl has no connect.before hook point, and k0sform runs nothing on hosts while it probes them",
        );
    }
    for (j, f) in h.files.iter().flatten().enumerate() {
        if let Some(u) = resolve_file(f, &format!("{p}.files[{j}]"), env, sink) {
            host.files.push(u);
        }
    }
    lift_install_flags(
        &mut host,
        h.install_flags.as_deref().unwrap_or_default(),
        &p,
        sink,
    );
    Some(host)
}

/// k0sctl's `Host.SetDefaults`: some install flags set fields instead.
fn lift_install_flags(host: &mut HostSpec, flags: &[String], p: &str, sink: &mut Sink) {
    let flag_value = |name: &str| -> Option<String> {
        flags.iter().find_map(|f| {
            let f = f.trim();
            if f == name {
                Some("true".to_string())
            } else {
                f.strip_prefix(name)
                    .and_then(|r| r.strip_prefix('=').or_else(|| r.strip_prefix(' ')))
                    .map(|v| v.trim().trim_matches(['"', '\'']).to_string())
            }
        })
    };
    let on = |v: Option<String>| v.is_some_and(|v| v != "false");
    if on(flag_value("--single")) && host.role != Role::Single {
        sink.warn_key(
            &format!("{p}.installFlags"),
            format!(
                "--single makes this host's role `single` (was `{}`)",
                host.role
            ),
        );
        host.role = Role::Single;
    }
    if on(flag_value("--enable-worker")) && host.role != Role::ControllerWorker {
        sink.warn_key(
            &format!("{p}.installFlags"),
            format!(
                "--enable-worker makes this host's role `controller+worker` (was `{}`)",
                host.role
            ),
        );
        host.role = Role::ControllerWorker;
    }
    if on(flag_value("--no-taints")) {
        host.no_taints = true;
    }
    // k0sctl `cluster/host.go` `SetDefaults`: `--data-dir` and `--kubelet-root-dir` become the
    // host's dataDir and kubeletRootDir (so `k0s reset` gets them too) and leave the flags.
    let data_dir = flag_value("--data-dir");
    let kubelet_root_dir = flag_value("--kubelet-root-dir");
    let lifted = |f: &str, name: &str, v: &Option<String>| {
        v.is_some() && (f.trim() == name || f.trim().starts_with(name))
    };
    host.install_flags = flags
        .iter()
        .filter(|f| {
            !lifted(f, "--data-dir", &data_dir)
                && !lifted(f, "--kubelet-root-dir", &kubelet_root_dir)
        })
        .cloned()
        .collect();
    if let Some(dd) = data_dir {
        host.data_dir = dd;
    }
    if let Some(k) = kubelet_root_dir {
        host.kubelet_root_dir = Some(k);
    }
}

fn resolve_hooks(h: Option<&RawHooks>) -> Hooks {
    let mut out = Hooks::new();
    let Some(h) = h else { return out };
    let actions = [
        ("connect", &h.connect),
        ("apply", &h.apply),
        ("install", &h.install),
        ("upgrade", &h.upgrade),
        ("reset", &h.reset),
        ("backup", &h.backup),
    ];
    for (name, stages) in actions {
        let Some(st) = stages else { continue };
        let mut m = BTreeMap::new();
        if let Some(b) = &st.before {
            m.insert("before".to_string(), b.clone());
        }
        if let Some(a) = &st.after {
            m.insert("after".to_string(), a.clone());
        }
        if !m.is_empty() {
            out.insert(name.to_string(), m);
        }
    }
    out
}

/// k0sctl's `permToString`: a number is an octal mode written in decimal digits by YAML 1.1
/// (yaml.v2 reads `0644` as 420); a string must be octal digits.
fn perm_string(p: &Perm, field: &str, sink: &mut Sink) -> Option<String> {
    let s = match p {
        Perm::Number(0) => {
            sink.error(field, "a file mode of 0 is not valid");
            return None;
        }
        // serde-saphyr reads unquoted `644` as decimal 644: the digits are what the user meant.
        Perm::Number(n) => format!("0{n}"),
        Perm::Text(t) => t.clone(),
    };
    if s.len() < 3 || s.len() > 5 || !s.chars().all(|c| ('0'..='7').contains(&c)) {
        sink.error(
            field,
            format!("invalid file mode `{s}`: use octal digits like \"0644\""),
        );
        return None;
    }
    // The owner's digit (third from the right) must at least allow reading.
    if s.chars().rev().nth(2).is_some_and(|c| c < '4') {
        sink.error(
            field,
            format!("invalid file mode `{s}`: the owner could not read the file"),
        );
        return None;
    }
    Some(s)
}

/// A URL `src` (and its `sha256`).
fn url_source(f: &RawUploadFile, s: &str, p: &str, sink: &mut Sink) -> Option<FileSource> {
    // k0sctl (`cluster/uploadfile.go` `IsURL`): any `://`. k0sform downloads http(s)
    // only, through the same curl/wget line as k0s itself.
    let scheme = s.split_once("://").map(|(a, _)| a).unwrap_or("");
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        sink.error(
            &format!("{p}.src"),
            format!("`{scheme}://` URLs are not downloaded: use http or https, or a local path"),
        );
        return None;
    }
    let sha256 = set(&f.sha256).map(|h| h.to_ascii_lowercase());
    if let Some(h) = &sha256
        && !crate::hash::is_sha256(h)
    {
        sink.error(
            &format!("{p}.sha256"),
            "expected 64 hex digits (the file's sha256)",
        );
        return None;
    }
    Some(FileSource::Url {
        url: s.to_string(),
        sha256,
    })
}

/// A glob `src`, expanded on this machine.
fn glob_source(
    s: &str,
    dst: Option<&str>,
    p: &str,
    env: &Env,
    sink: &mut Sink,
) -> Option<FileSource> {
    // k0sctl (`cluster/uploadfile.go` `ResolveRelativeTo`, `glob`): expanded here, on
    // this machine, relative to the spec's folder; no match is an error, and so is
    // more than one with a single-file `dst`.
    let (base, files) = match crate::glob::glob(&env.path(s)) {
        Ok(m) => m,
        Err(e) => {
            sink.error(&format!("{p}.src"), format!("cannot read {e}"));
            return None;
        }
    };
    if files.is_empty() {
        sink.error(&format!("{p}.src"), format!("no files match `{s}`"));
        return None;
    }
    if files.len() > 1
        && let Some(d) = dst
    {
        sink.error(
            &format!("{p}.dst"),
            format!(
                "`{s}` matches {} files but `dst` names a single file ({d}); use `dstDir`",
                files.len()
            ),
        );
        return None;
    }
    Some(FileSource::Glob { base, files })
}

fn resolve_file(f: &RawUploadFile, p: &str, env: &Env, sink: &mut Sink) -> Option<UploadFile> {
    let src = set(&f.src);
    let data = f.data.clone().filter(|d| !d.trim().is_empty());
    let dst = set(&f.dst);
    let dst_dir = set(&f.dst_dir);
    let mut ok = true;
    if src.is_none() && data.is_none() {
        sink.error(
            p,
            "set `src` (a local file or folder) or `data` (inline content)",
        );
        ok = false;
    }
    if src.is_some() && data.is_some() {
        sink.error_key(&format!("{p}.data"), "set either `src` or `data`, not both");
        ok = false;
    }
    if dst.is_none() && dst_dir.is_none() {
        sink.error(p, "set `dst` (remote file) or `dstDir` (remote folder)");
        ok = false;
    }
    if data.is_some() && dst.is_none() && set(&f.name).is_none() {
        sink.error(p, "inline `data` needs `dst` or `name`");
        ok = false;
    }
    if f.sha256.is_some() && !src.as_deref().is_some_and(|s| s.contains("://")) {
        sink.error_key(
            &format!("{p}.sha256"),
            "`sha256` checks a URL `src`; local files and `data` are hashed here",
        );
        ok = false;
    }
    let source = match (&src, &data) {
        (Some(s), _) if s.contains("://") => url_source(f, s, p, sink)?,
        (Some(s), _) if crate::glob::is_glob(s) => glob_source(s, dst.as_deref(), p, env, sink)?,
        (Some(s), _) => {
            let path = env.path(s);
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => FileSource::Directory(path),
                Ok(_) => FileSource::File(path),
                Err(e) => {
                    sink.error(
                        &format!("{p}.src"),
                        format!("cannot read {}: {e}", path.display()),
                    );
                    return None;
                }
            }
        }
        (None, Some(d)) => FileSource::Inline(d.clone()),
        (None, None) => return None,
    };
    let perm = match &f.perm {
        Some(pm) => Some(perm_string(pm, &format!("{p}.perm"), sink)?),
        None => None,
    };
    let dir_perm = match &f.dir_perm {
        Some(pm) => perm_string(pm, &format!("{p}.dirPerm"), sink)?,
        None => "0755".to_string(),
    };
    if !ok {
        return None;
    }
    let dst = match (&dst, &dst_dir) {
        (Some(d), Some(dir)) if !d.starts_with('/') => {
            Some(format!("{}/{d}", dir.trim_end_matches('/')))
        }
        (d, _) => d.clone(),
    };
    let name = set(&f.name)
        .or_else(|| src.clone())
        .or_else(|| dst.clone())
        .unwrap_or_default();
    Some(UploadFile {
        name,
        source,
        dst,
        dst_dir,
        perm,
        dir_perm,
        user: set(&f.user),
        group: set(&f.group),
    })
}

fn resolve_k0s(k: Option<&RawK0s>, sink: &mut Sink) -> K0sSpec {
    let version = k.and_then(|k| set(&k.version)).and_then(|v| {
        K0sVersion::parse(&v)
            .map_err(|e| sink.error("spec.k0s.version", e))
            .ok()
    });
    let channel = k.and_then(|k| set(&k.version_channel));
    if let Some(c) = &channel
        && c != "stable"
        && c != "latest"
    {
        sink.error(
            "spec.k0s.versionChannel",
            format!("`{c}` is not a version channel: use `stable` or `latest`"),
        );
    }
    K0sSpec {
        version,
        version_channel: channel,
        dynamic_config: k.and_then(|k| k.dynamic_config).unwrap_or(false),
        config: k
            .and_then(|k| k.config.clone())
            .filter(|m| !m.is_empty())
            .map(serde_json::Value::Object),
        controllers_run: false,
    }
}

fn resolve_options(o: Option<&RawOptions>, sink: &mut Sink) -> Options {
    let mut out = Options::default();
    let Some(o) = o else { return out };
    if let Some(w) = o.wait.as_ref().and_then(|w| w.enabled) {
        out.wait = w;
    }
    if let Some(d) = &o.drain {
        let dr = &mut out.drain;
        dr.enabled = d.enabled.unwrap_or(dr.enabled);
        dr.force = d.force.unwrap_or(dr.force);
        dr.ignore_daemon_sets = d.ignore_daemon_sets.unwrap_or(dr.ignore_daemon_sets);
        dr.delete_empty_dir_data = d.delete_empty_dir_data.unwrap_or(dr.delete_empty_dir_data);
        dr.pod_selector = set(&d.pod_selector);
        // A zero duration is the default again: k0sctl fills zero fields with creasty/defaults
        // (`cluster/options.go`: gracePeriod 120s, timeout 300s, skipWaitForDeleteTimeout 0s).
        let mut dur = |v: &Option<String>, field: &str, into: &mut u64| {
            if let Some(s) = set(v) {
                match parse_go_duration(&s) {
                    Ok(0) => {}
                    Ok(secs) => *into = secs,
                    Err(e) => sink.error(&format!("spec.options.drain.{field}"), e),
                }
            }
        };
        dur(&d.grace_period, "gracePeriod", &mut dr.grace_period);
        dur(&d.timeout, "timeout", &mut dr.timeout);
        dur(
            &d.skip_wait_for_delete_timeout,
            "skipWaitForDeleteTimeout",
            &mut dr.skip_wait_for_delete_timeout,
        );
    }
    if let Some(e) = o.evict_taint.as_ref().filter(|e| e.enabled == Some(true)) {
        out.evict_taint = resolve_evict_taint(e, sink);
    }
    if let Some(c) = &o.concurrency {
        if let Some(l) = c.limit {
            out.concurrency_limit = l as usize;
        }
        if let Some(p) = c.worker_disruption_percent {
            if p > 100 {
                sink.error(
                    "spec.options.concurrency.workerDisruptionPercent",
                    format!("{p} is not a percentage (0 to 100)"),
                );
            }
            out.worker_disruption_percent = p;
        }
        if let Some(u) = c.uploads {
            out.concurrent_uploads = u as usize;
        }
    }
    out
}

/// An enabled `evictTaint`, checked as k0sctl's `EvictTaintOption.Validate` checks it: the taint
/// is `key=value`, the effect one of Kubernetes' three.
fn resolve_evict_taint(e: &RawEvictTaint, sink: &mut Sink) -> Option<EvictTaint> {
    let taint = set(&e.taint).unwrap_or_else(|| "k0sctl.k0sproject.io/evict=true".into());
    let effect = set(&e.effect).unwrap_or_else(|| "NoExecute".into());
    let mut ok = true;
    if let Some(e) = evict_taint_error(&taint) {
        sink.error("spec.options.evictTaint.taint", e);
        ok = false;
    }
    if let Some(e) = evict_effect_error(&effect) {
        sink.error("spec.options.evictTaint.effect", e);
        ok = false;
    }
    let controller_workers = e.controller_workers.unwrap_or(false);
    if controller_workers {
        sink.warn_key(
            "spec.options.evictTaint.controllerWorkers",
            "not implemented: k0sform restarts controller+worker hosts without a drain or taint \
             (their containers survive the restart); only worker upgrades are drained and tainted",
        );
    }
    ok.then_some(EvictTaint {
        taint,
        effect,
        controller_workers,
    })
}

/// What is wrong with an evict taint that is not `key=value` (k0sctl's `EvictTaintOption.Validate`).
fn evict_taint_error(taint: &str) -> Option<String> {
    (!taint.contains('=') || taint.starts_with('=') || taint.contains(char::is_whitespace))
        .then(|| format!("`{taint}` must be in the form key=value"))
}

/// What is wrong with an evict taint's effect that is not one of Kubernetes' three.
fn evict_effect_error(effect: &str) -> Option<String> {
    (!["NoExecute", "NoSchedule", "PreferNoSchedule"].contains(&effect))
        .then(|| format!("`{effect}` is not one of NoExecute, NoSchedule, PreferNoSchedule"))
}

impl EvictTaint {
    /// k0sctl apply's `--evict-taint <key=value>:<effect>` (cmd/apply.go: exactly one `:`, both
    /// sides set; controllerWorkers off), checked as `spec.options.evictTaint` is.
    pub fn from_flag(s: &str) -> Result<Self, String> {
        let (taint, effect) =
            match s.split(':').collect::<Vec<_>>()[..] {
                [t, e] if !t.is_empty() && !e.is_empty() => (t, e),
                _ => return Err(
                    "expected <key=value>:<effect>, e.g. k0sctl.k0sproject.io/evict=true:NoExecute"
                        .into(),
                ),
            };
        if let Some(e) = evict_taint_error(taint).or_else(|| evict_effect_error(effect)) {
            return Err(e);
        }
        Ok(EvictTaint {
            taint: taint.to_string(),
            effect: effect.to_string(),
            controller_workers: false,
        })
    }
}

/// A Go `time.Duration` string (`2m`, `1h30m`, `90s`, `1.5h`, `0`) in whole seconds.
pub(crate) fn parse_go_duration(s: &str) -> Result<u64, String> {
    match crate::install_flags::parse_go_duration(s) {
        Ok(ns) if ns >= 0 => Ok((ns / 1_000_000_000) as u64),
        Ok(_) => Err(format!("invalid duration `{s}`: negative")),
        Err(why) => Err(format!(
            "invalid duration `{s}`: {why} (examples: 90s, 2m, 1h30m)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("2m"), Ok(120));
        assert_eq!(parse_go_duration("1h30m"), Ok(5400));
        assert_eq!(parse_go_duration("2m0s"), Ok(120));
        assert_eq!(parse_go_duration("1.5h"), Ok(5400));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert!(
            parse_go_duration("120")
                .unwrap_err()
                .contains("missing unit")
        );
        assert!(parse_go_duration("2 minutes").is_err());
    }

    #[test]
    fn home_and_relative_paths() {
        let env = Env {
            base: PathBuf::from("/specs"),
            home: Some(PathBuf::from("/home/u")),
        };
        assert_eq!(env.path("./id_rsa"), PathBuf::from("/specs/id_rsa"));
        assert_eq!(env.path("~/.ssh/id"), PathBuf::from("/home/u/.ssh/id"));
        assert_eq!(env.path("/abs"), PathBuf::from("/abs"));
    }
}
