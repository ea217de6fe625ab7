//! Offline checks of a resolved spec: cluster shape (controllers, `single`, duplicates, resets),
//! per-host values (addresses, ports, versions, binaries, keys) and every string that will reach
//! a remote command line. k0sform quotes every argument it sends, but a value that can never be
//! valid there (a newline in an install flag, `FOO-BAR` as an environment name) is rejected here.

use crate::spec::model::*;
use crate::spec::resolve::Sink;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// `complete`: every host of the file made it into `spec` (no structural errors). Rules about
/// the whole host list only run then.
pub(crate) fn validate(spec: &Spec, complete: bool, sink: &mut Sink) {
    if let Some(v) = &spec.k0s.version
        && let Err(e) = check_k0s_version(v)
    {
        sink.error("spec.k0s.version", e);
    }
    if spec.hosts.is_empty() && complete {
        sink.error(
            "spec.hosts",
            "no hosts: a cluster needs at least one controller",
        );
        return;
    }
    check_text(sink, "metadata.name", &spec.name);
    let mut ids: BTreeMap<(String, u16), usize> = BTreeMap::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut peers: BTreeMap<String, usize> = BTreeMap::new();
    for h in &spec.hosts {
        let p = host_path(h);
        let key = (h.ssh.address.to_lowercase(), h.ssh.port);
        if let Some(first) = ids.insert(key, h.index) {
            ids.insert((h.ssh.address.to_lowercase(), h.ssh.port), first);
            duplicate_host(spec, h, first, sink);
        }
        if let Some(n) = h.node_name()
            && let Some(first) = names.insert(n.clone(), h.index)
        {
            names.insert(n.clone(), first);
            sink.error(
                &format!("{p}.hostname"),
                format!(
                    "duplicate hostname `{n}`: already used by spec.hosts[{}]",
                    first - 1
                ),
            );
        }
        if let Some(pa) = &h.private_address
            && let Some(first) = peers.insert(pa.clone(), h.index)
        {
            peers.insert(pa.clone(), first);
            sink.error(
                &format!("{p}.privateAddress"),
                format!(
                    "duplicate privateAddress {pa}: already used by spec.hosts[{}]",
                    first - 1
                ),
            );
        }
        validate_host(h, sink);
    }
    if let Some(v) = &spec.k0s.version
        && !crate::install_flags::has_kubelet_root_dir(v)
    {
        for h in spec.hosts.iter().filter(|h| h.kubelet_root_dir.is_some()) {
            sink.error(
                &format!("{}.kubeletRootDir", host_path(h)),
                format!("needs k0s v1.31.8, v1.32.1 or newer (spec.k0s.version is {v})"),
            );
        }
    }
    if !complete {
        return;
    }
    if let Some(single) = spec.hosts.iter().find(|h| h.role == Role::Single)
        && spec.hosts.len() > 1
    {
        sink.error(
            &format!("{}.role", host_path(single)),
            format!(
                "role `single` must be the only host, but the spec has {} hosts",
                spec.hosts.len()
            ),
        );
    }
    if !spec.hosts.iter().any(|h| h.role.is_controller()) {
        sink.error(
            "spec.hosts",
            "no controller: at least one host needs role `controller`, `controller+worker` or `single`",
        );
    } else if spec
        .hosts
        .iter()
        .filter(|h| h.role.is_controller())
        .all(|h| h.reset)
    {
        let what = if spec.hosts.iter().all(|h| h.reset) {
            "every host has `reset: true`: that would tear the whole cluster down (k0sform has no \"destroy\" via apply)"
        } else {
            "every controller has `reset: true`: the cluster would have no control plane left"
        };
        sink.error("spec.hosts", what);
    }
}

/// `h` has the address and port of `spec.hosts[first - 1]`: said for what `h` is.
fn duplicate_host(spec: &Spec, h: &HostSpec, first: usize, sink: &mut Sink) {
    let p = host_path(h);
    let local = |i: usize| spec.hosts.get(i - 1).is_some_and(|f| f.ssh.localhost);
    if h.ssh.localhost && local(first) {
        // Both would be this machine: k0sctl refuses them as two hosts with one hostname
        // (and one machine-id) in `phase/validate_hosts.go`; k0sform says why at once.
        sink.error_key(
            &format!("{p}.localhost"),
            format!(
                "only one host can be `localhost` (this machine): spec.hosts[{}] already is",
                first - 1
            ),
        );
    } else if h.ssh.localhost {
        sink.error_key(
                &format!("{p}.localhost"),
                format!(
                    "duplicate host {}: already used by spec.hosts[{}] (a `localhost` host is 127.0.0.1 port 22)",
                    h.id(),
                    first - 1
                ),
            );
    } else {
        sink.error(
                &format!("{p}.{}.address", conn(h)),
                format!(
                    "duplicate host {}: already used by spec.hosts[{}] (a host is its address and port)",
                    h.id(),
                    first - 1
                ),
            );
    }
}

fn host_path(h: &HostSpec) -> String {
    format!("spec.hosts[{}]", h.index - 1)
}

fn conn(h: &HostSpec) -> &'static str {
    if h.ssh.localhost {
        "localhost"
    } else if h.ssh.openssh {
        "openSSH"
    } else {
        "ssh"
    }
}

fn validate_host(h: &HostSpec, sink: &mut Sink) {
    let p = host_path(h);
    let c = format!("{p}.{}", conn(h));
    check_target(&h.ssh, &c, sink);
    if let Some(pa) = &h.private_address
        && pa.parse::<IpAddr>().is_err()
    {
        sink.error(
            &format!("{p}.privateAddress"),
            format!("`{pa}` is not an IP address"),
        );
    }
    if let Some(n) = &h.hostname
        && !is_dns_name(&n.to_lowercase())
    {
        sink.error(
            &format!("{p}.hostname"),
            format!("`{n}` is not a valid node name (DNS labels of a-z, 0-9 and `-`, at most 63 characters each)"),
        );
    }
    // Both may name the Node when they agree: `hostname` then goes into the flag (it replaces
    // the one in installFlags, k0sctl cluster/host.go `K0sInstallFlags` `AddOrReplace`); when
    // they differ k0sctl stops (phase/gather_facts.go: "hostname and installFlags
    // kubelet-extra-args hostname-override mismatch, only define either one").
    if let (Some(n), Some(over)) = (&h.hostname, h.hostname_override_flag())
        && *n != over
    {
        sink.error(
            &format!("{p}.hostname"),
            format!(
                "`{n}` differs from --hostname-override={over} in installFlags' --kubelet-extra-args: set the node name in one place (or the same in both, as k0sctl allows)"
            ),
        );
    }
    if h.no_taints && h.role != Role::ControllerWorker {
        sink.error(
            &format!("{p}.noTaints"),
            format!(
                "noTaints only applies to role `controller+worker` (this host is `{}`)",
                h.role
            ),
        );
    }
    check_install_flags(h, &p, sink);
    check_environment(h, &p, sink);
    check_paths(h, &p, sink);
    check_files(h, &p, sink);
    check_binary_source(h, &p, sink);
}

/// The `installFlags`: each one or more shell words, the first a flag.
fn check_install_flags(h: &HostSpec, p: &str, sink: &mut Sink) {
    for (i, flag) in h.install_flags.iter().enumerate() {
        let f = format!("{p}.installFlags[{i}]");
        if flag.contains(['\n', '\r', '\0']) {
            sink.error(&f, "an install flag cannot contain a line break or NUL");
            continue;
        }
        match shell_words(flag) {
            Err(e) => sink.error(&f, e),
            Ok(words) => {
                if let Some(first) = words.first()
                    && !first.starts_with('-')
                {
                    sink.error(
                        &f,
                        format!("`{flag}` is not a flag: install flags start with `-`"),
                    );
                }
            }
        }
    }
}

/// The `environment`: valid names, values without line breaks.
fn check_environment(h: &HostSpec, p: &str, sink: &mut Sink) {
    for (k, v) in &h.environment {
        let f = format!("{p}.environment.{k}");
        if !valid_env_name(k) {
            sink.error(
                &f,
                format!("`{k}` is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)"),
            );
        }
        if v.contains(['\n', '\r', '\0']) {
            sink.error(
                &f,
                "an environment value cannot contain a line break or NUL",
            );
        }
    }
}

/// The host's k0s paths and the remote paths its installFlags move.
fn check_paths(h: &HostSpec, p: &str, sink: &mut Sink) {
    for (field, v) in [
        ("k0sInstallPath", Some(&h.k0s_install_path)),
        ("dataDir", Some(&h.data_dir)),
        ("kubeletRootDir", h.kubelet_root_dir.as_ref()),
    ] {
        // The state's rule for recorded paths: `k0s reset` deletes the data and kubelet root
        // dirs, destroy the binary, so `/` or a system directory is refused here already.
        if let Some(v) = v
            && let Some(e) = super::k0s_path_problem(field, v)
        {
            sink.error(&format!("{p}.{field}"), e);
        }
    }
    // `--config`/`-c` and `--token-file` move where k0s.yaml and the join token are written
    // (and removed by a destroy): k0sctl `cluster/host.go` `K0sConfigPath`, `K0sJoinTokenPath`.
    // Without them k0s's own paths are used, which pass.
    let args = h.install_args();
    for flag in ["config", "token-file"] {
        if let Some(v) = crate::install_flags::value_of(&args, flag)
            && let Some(e) = remote_path_problem(&v)
        {
            sink.error(&format!("{p}.installFlags"), format!("--{flag}: {e}"));
        }
    }
}

/// The `files:`: remote paths, URLs, owners.
fn check_files(h: &HostSpec, p: &str, sink: &mut Sink) {
    for (i, file) in h.files.iter().enumerate() {
        let f = format!("{p}.files[{i}]");
        for (field, v) in [("dst", &file.dst), ("dstDir", &file.dst_dir)] {
            if let Some(v) = v {
                check_text(sink, &format!("{f}.{field}"), v);
            }
        }
        if let FileSource::Url { url, .. } = &file.source {
            check_text(sink, &format!("{f}.src"), url);
        }
        for (field, v) in [("user", &file.user), ("group", &file.group)] {
            if let Some(v) = v
                && !is_user_name(v)
            {
                sink.error(
                    &format!("{f}.{field}"),
                    format!("`{v}` is not a valid user or group name"),
                );
            }
        }
    }
}

/// Binary source: exactly one way to get k0s onto the host.
fn check_binary_source(h: &HostSpec, p: &str, sink: &mut Sink) {
    // useExistingK0s: with no binary to upload, k0sform installs the one on the host and refuses
    // a plan that would need another version (plan::diff, NoK0sBinary).
    if h.use_existing_k0s {
        for (set, field) in [
            (h.upload_binary, "uploadBinary"),
            (h.k0s_binary_path.is_some(), "k0sBinaryPath"),
            (h.k0s_download_url.is_some(), "k0sDownloadURL"),
        ] {
            if set {
                sink.error(
                    &format!("{p}.{field}"),
                    "conflicts with useExistingK0s: the binary already on the host is used, nothing is downloaded or uploaded",
                );
            }
        }
    }
    if h.k0s_binary_path.is_some() && h.k0s_download_url.is_some() {
        sink.error(
            &format!("{p}.k0sDownloadURL"),
            "conflicts with k0sBinaryPath: choose one source for the k0s binary",
        );
    }
    if let Some(sha) = &h.k0s_download_sha256 {
        let f = format!("{p}.k0sDownloadSha256");
        if !crate::hash::is_sha256(sha) {
            sink.error(&f, "not a sha256: expected 64 hexadecimal characters");
        } else if h.k0s_binary_path.is_some() || h.use_existing_k0s {
            sink.error(
                &f,
                "only for a downloaded binary: k0sBinaryPath and useExistingK0s download nothing",
            );
        }
    }
    if let Some(b) = &h.k0s_binary_path {
        let f = format!("{p}.k0sBinaryPath");
        match std::fs::metadata(b) {
            Ok(m) if m.is_file() => {}
            Ok(_) => sink.error(&f, format!("{} is not a file", b.display())),
            Err(e) => sink.error(&f, format!("cannot read {}: {e}", b.display())),
        }
    }
}

fn check_target(t: &SshTarget, p: &str, sink: &mut Sink) {
    for finding in target_findings(t, p) {
        match finding {
            TargetFinding::Error { field, message } => sink.error(&field, message),
            TargetFinding::Missing { field, path } => {
                let (l, c) = sink.node.locate(&field);
                sink.diags.push(
                    crate::spec::Diagnostic::warning(
                        sink.file,
                        &field,
                        format!("{} does not exist (yet)", path.display()),
                    )
                    .at(l, c),
                );
            }
        }
    }
}

/// What is wrong with a host's connection settings, bastions included, in field order. The
/// spec's validation and the check of a state's recorded access (`state::access`) share it.
pub(crate) enum TargetFinding {
    Error {
        field: String,
        message: String,
    },
    /// A local key or ssh_config file that does not exist (a warning in the spec).
    Missing {
        field: String,
        path: std::path::PathBuf,
    },
}

pub(crate) fn target_findings(t: &SshTarget, p: &str) -> Vec<TargetFinding> {
    let mut out = Vec::new();
    collect_target_findings(t, p, &mut out);
    out
}

fn collect_target_findings(t: &SshTarget, p: &str, out: &mut Vec<TargetFinding>) {
    let error = |out: &mut Vec<TargetFinding>, field: String, message: String| {
        out.push(TargetFinding::Error { field, message });
    };
    if let Some(message) = address_problem(&t.address) {
        let message = if t.openssh && !t.address.is_empty() {
            format!(
                "{message} (an ssh_config alias must be a host name too: k0sform records it in the state)"
            )
        } else {
            message
        };
        error(out, format!("{p}.address"), message);
    }
    if t.port == 0 {
        error(
            out,
            format!("{p}.port"),
            "0 is not a valid port (1 to 65535)".into(),
        );
    }
    if !is_user_name(&t.user) {
        error(
            out,
            format!("{p}.user"),
            format!("`{}` is not a valid user name", t.user),
        );
    }
    if let Some(k) = &t.host_key
        && let Err(e) = check_host_key(k)
    {
        error(out, format!("{p}.hostKey"), e);
    }
    for (field, path) in [("keyPath", &t.key_path), ("configPath", &t.config_path)] {
        if let Some(path) = path {
            let f = format!("{p}.{field}");
            match text_problem(&path.to_string_lossy()) {
                Some(e) => out.push(TargetFinding::Error {
                    field: f,
                    message: e.into(),
                }),
                None if !path.exists() => out.push(TargetFinding::Missing {
                    field: f,
                    path: path.clone(),
                }),
                None => {}
            }
        }
    }
    for (k, v) in &t.options {
        let f = format!("{p}.options.{k}");
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric()) {
            error(
                out,
                f.clone(),
                format!("`{k}` is not an ssh_config option name"),
            );
        }
        if let Some(e) = text_problem(v) {
            error(out, f, e.into());
        }
    }
    if let Some(b) = &t.bastion {
        collect_target_findings(b, &format!("{p}.bastion"), out);
    }
}

/// What is wrong with a host's address, if anything: it must be an IP address or an RFC 1123
/// host name (`is_dns_name`). The one rule for every address k0sform connects to or prints: a
/// spec's `ssh`/`openSSH` address (an ssh_config alias too, since it is recorded in the state),
/// and every address read back from a state, a saved plan or a probe file, which anyone may have
/// edited (`state::parse`, `json_field_problem`). Such an address reaches ssh's command line
/// and the terminal: no shell metacharacters, `%`, quotes, spaces, control characters or a
/// leading `-` can pass. The address is shown escaped in the message.
pub(crate) fn address_problem(addr: &str) -> Option<String> {
    if addr.is_empty() {
        return Some("the address is empty".into());
    }
    if addr.parse::<IpAddr>().is_ok() || is_dns_name(addr) {
        return None;
    }
    let hint = if addr.starts_with('[') {
        " (write IPv6 addresses without brackets)"
    } else if addr.contains(':') {
        " (put the port in `port`)"
    } else {
        ""
    };
    Some(format!(
        "`{}` is neither an IP address nor a DNS name{hint}",
        crate::escape::escape(addr)
    ))
}

/// An etcd peer URL as k0s writes it (`https://10.0.0.1:2380`, `https://[fd00::1]:2380`):
/// `http` or `https`, a host that is an IP address or an RFC 1123 name, a port number, nothing
/// else. A recorded peer URL reaches `k0s etcd leave --peer-address` and the plan text.
pub(crate) fn peer_url_problem(url: &str) -> Option<String> {
    let valid = || -> Option<()> {
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))?;
        let port = match rest.strip_prefix('[') {
            Some(v6) => {
                let (host, port) = v6.split_once("]:")?;
                host.parse::<std::net::Ipv6Addr>().ok()?;
                port
            }
            None => {
                let (host, port) = rest.rsplit_once(':')?;
                (host.parse::<std::net::Ipv4Addr>().is_ok() || is_dns_name(host)).then_some(())?;
                port
            }
        };
        if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        port.parse::<u16>().ok().filter(|p| *p > 0).map(|_| ())
    };
    valid().is_none().then(|| {
        format!(
            "`{}` is not an etcd peer URL (http or https, an IP address or host name and a port, nothing else)",
            shown(url)
        )
    })
}

/// `SHA256:` and base64, as `ssh-keygen -lf` prints a fingerprint (the length is not checked
/// here: the spec's `hostKey` is held to 32 bytes by `check_host_key`).
fn is_fingerprint(k: &str) -> bool {
    let Some(b64) = k.strip_prefix("SHA256:") else {
        return false;
    };
    let body = b64.trim_end_matches('=');
    b64.len() - body.len() <= 2
        && (1..=86).contains(&body.len())
        && body
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

/// A value from a file as a message shows it: escaped (`escape::escape`) and cut short.
fn shown(v: &str) -> String {
    crate::escape::escape(&crate::hash::short_n(v, 80)).into_owned()
}

/// The rule for a string field named `key` in k0sform's own files (a state, a saved plan, a
/// probe file), which anyone may have edited: what is wrong with `v`, if anything. The same
/// field name means the same thing in every file, so `json_field_problem` applies these to
/// every field of a file by its name, and `state::parse` to the state's fields. Fields with
/// other names have no rule here (`None`). The value is shown escaped.
pub(crate) fn recorded_field_problem(key: &str, v: &str) -> Option<String> {
    use crate::hash::is_hex;
    let bad = |what: &str| Some(format!("`{}` is not {what}", shown(v)));
    match key {
        "address" => address_problem(v),
        "peer_url" => peer_url_problem(v),
        "member_id" if !is_hex(v, 1, 16) => bad("an etcd member ID (up to 16 hex digits)"),
        "machine_id" if !is_hex(v, 16, 64) => bad("a machine-id (16 to 64 hex digits)"),
        "node_name" if !is_object_name(v) => {
            bad("a Kubernetes node name (a lower-case RFC 1123 subdomain)")
        }
        // An empty `host_key` is a state's way to say no key is recorded (a first contact).
        "host_key" if v.is_empty() => None,
        // A `localhost` host's: reached without SSH, it has no key.
        "host_key" if v == LOCAL_HOST_KEY => None,
        "host_key" | "fingerprint" if !is_fingerprint(v) => {
            bad("a host key fingerprint (`SHA256:` and base64)")
        }
        _ => None,
    }
}

/// The first string under `v` (a saved plan, a probe file, as JSON) that breaks the rule for
/// its field's name (`recorded_field_problem`: addresses, peer URLs, member IDs, machine-ids,
/// node names, host key fingerprints): its path (e.g. `plan.steps[3].host.address`, escaped)
/// and the problem. k0sform's files name such values by these fields (`HostId`, `SshTarget`,
/// steps, identities, facts), so a walk finds every one, including in fields added later.
pub(crate) fn json_field_problem(v: &serde_json::Value) -> Option<(String, String)> {
    fn walk(v: &serde_json::Value, at: &mut String) -> Option<(String, String)> {
        use std::fmt::Write as _;
        let len = at.len();
        match v {
            serde_json::Value::Object(fields) => {
                for (k, x) in fields {
                    if !at.is_empty() {
                        at.push('.');
                    }
                    at.push_str(&crate::escape::escape(k));
                    if let Some(value) = x.as_str()
                        && let Some(problem) = recorded_field_problem(k, value)
                    {
                        return Some((at.clone(), problem));
                    }
                    if let Some(found) = walk(x, at) {
                        return Some(found);
                    }
                    at.truncate(len);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, x) in items.iter().enumerate() {
                    let _ = write!(at, "[{i}]");
                    if let Some(found) = walk(x, at) {
                        return Some(found);
                    }
                    at.truncate(len);
                }
            }
            _ => {}
        }
        None
    }
    walk(v, &mut String::new())
}

/// A path on the host (k0sInstallPath, dataDir, kubeletRootDir): what is wrong with it, if
/// anything. Shared with the check of a state's recorded access.
pub(crate) fn remote_path_problem(v: &str) -> Option<String> {
    if let Some(e) = text_problem(v) {
        return Some(e.into());
    }
    (!v.starts_with('/')).then(|| format!("`{v}` must be an absolute path on the host"))
}

fn text_problem(v: &str) -> Option<&'static str> {
    v.chars()
        .any(|c| c.is_control())
        .then_some("cannot contain line breaks, NUL or other control characters")
}

/// No line breaks, NUL or other control characters: such a value would break a remote command
/// or file. Returns whether the text is clean.
fn check_text(sink: &mut Sink, field: &str, v: &str) -> bool {
    match text_problem(v) {
        Some(e) => {
            sink.error(field, e);
            false
        }
        None => true,
    }
}

pub fn valid_env_name(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A Kubernetes object name as Node, EtcdMember and ControlNode names are: a lowercase RFC 1123
/// subdomain (labels of `a-z0-9-`, starting and ending alphanumeric, joined by dots; at most
/// 253 characters, 63 per label).
pub fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

pub(crate) fn is_user_name(u: &str) -> bool {
    !u.is_empty()
        && !u.starts_with('-')
        && u.len() <= 64
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$'))
}

/// A DNS name (RFC 1123): dot-separated labels of letters, digits and `-`, not starting or
/// ending with `-`, at most 63 characters each and 253 in all; one trailing dot allowed.
pub(crate) fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        // An all-numeric last label would be a malformed IP address, not a name.
        && !s.rsplit('.').next().is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()))
}

/// `SHA256:<base64 of 32 bytes>` as `ssh-keygen -lf` prints it. A `<type> <base64>` key is
/// turned into its fingerprint when the spec is resolved (`host_key_pin`); one still here did
/// not decode, and is reported with why.
fn check_host_key(k: &str) -> Result<(), String> {
    use base64::Engine;
    if !k.starts_with("SHA256:") && k.contains(char::is_whitespace) {
        return host_key_pin(k).map(|_| ());
    }
    let bad = || {
        format!(
            "`{k}` is not a host key: expected a fingerprint (`SHA256:` and 43 base64 characters, \
             as `ssh-keygen -lf` prints) or the public key as `<type> <base64>`"
        )
    };
    let b64 = k.strip_prefix("SHA256:").ok_or_else(bad)?;
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(b64.trim_end_matches('='))
        .map_err(|_| bad())?;
    if bytes.len() != 32 {
        return Err(bad());
    }
    Ok(())
}

/// `ssh.hostKey` as k0sctl takes it: the host's public key as `<type> <base64>`, compared with
/// the key the host offers as text (rig v2 `protocol/ssh/hostkey/callbacks.go`,
/// `StaticKeyCallback`: `k.Type() + " " + base64(k.Marshal())`). k0sform pins by fingerprint,
/// so the key becomes its `SHA256:` fingerprint, as OpenSSH prints it. The key's blob must
/// decode and name the same type it is written with.
pub(crate) fn host_key_pin(k: &str) -> Result<String, String> {
    use base64::Engine;
    let mut words = k.split_whitespace();
    let (Some(kind), Some(b64), None) = (words.next(), words.next(), words.next()) else {
        return Err(format!(
            "`{k}` is not a host key: expected `<type> <base64>` (e.g. `ssh-ed25519 AAAAC3…`) or a `SHA256:` fingerprint"
        ));
    };
    let blob = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| {
            format!(
                "the {kind} key's `{}` is not base64",
                crate::hash::short_n(b64, 16)
            )
        })?;
    // The SSH wire form starts with the key type as a string (RFC 4253 section 6.6).
    let named = blob
        .get(..4)
        .map(|n| u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
        .and_then(|n| blob.get(4..4usize.checked_add(n)?));
    if named != Some(kind.as_bytes()) {
        return Err(format!(
            "`{kind} {}` is not a {kind} public key (its base64 does not start with the key type; copy the line from the host's /etc/ssh/ssh_host_*_key.pub)",
            crate::hash::short_n(b64, 16)
        ));
    }
    crate::ssh_key::fingerprint(&format!("{kind} {b64}")).map_err(|e| e.to_string())
}

/// k0sctl's floor (`cluster/k0s.go` `validateVersion`): k0s 0.11.0 or newer. The version
/// itself was parsed by `K0sVersion::parse` when the spec was read.
pub fn check_k0s_version(v: &K0sVersion) -> Result<(), String> {
    let (major, minor, _) = v.numbers();
    if (major, minor) < (0, 11) {
        return Err(format!(
            "`{v}` is too old: k0sctl and k0sform need k0s 0.11.0 or newer"
        ));
    }
    Ok(())
}

/// Split a k0sctl install flag into words the way the remote shell would have (k0sctl joins
/// the flags with spaces into one command line, `phase/install_*.go`): POSIX word splitting by
/// the `shell-words` crate (whitespace separates, quotes group and are removed, a backslash
/// escapes the next character, a trailing one is kept, as `sh` keeps it). No expansion happens: a flag with `$`, a glob or a `#` word is
/// taken literally, where the remote shell would have expanded it (k0sctl quotes nothing).
pub fn shell_words(s: &str) -> Result<Vec<String>, String> {
    shell_words::split(s).map_err(|_| match unclosed_quote(s) {
        Some(q) => format!("unbalanced quotes in `{s}`: a {q} is not closed"),
        None => format!("`{s}` cannot be split into words"),
    })
}

/// Which quote a line that failed to split leaves open (for the error message only).
fn unclosed_quote(s: &str) -> Option<char> {
    let mut open: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (open, c) {
            (Some('\''), '\'') | (Some('"'), '"') => open = None,
            (None | Some('"'), '\\') => {
                chars.next();
            }
            (None, '\'' | '"') => open = Some(c),
            _ => {}
        }
    }
    open
}

/// A Linux interface name as `ip` prints it: 1–15 bytes, none of `/`, `:` (alias suffixes are
/// cut off before), whitespace or control characters. k0sctl's own pattern is `\w+`.
pub fn valid_interface(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split equals what `/bin/sh` makes of the same line (the remote shell k0sctl hands
    /// the joined flags to), for lines of words, quotes, backslashes and blanks (no expansion
    /// characters: those would make the shell, not the splitter, differ).
    #[test]
    fn words_match_the_shell() {
        use proptest::prelude::*;
        let line = proptest::collection::vec(
            prop_oneof![
                Just("a"),
                Just("b="),
                Just("-"),
                Just(" "),
                Just("  "),
                Just("\t"),
                Just("'"),
                Just("\""),
                Just("\\"),
                Just("\\\""),
                Just("\\'"),
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat());
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 200,
            ..ProptestConfig::default()
        });
        runner
            .run(&line, |line| {
                let out = std::process::Command::new("/bin/sh")
                    .arg("-c")
                    .arg(r#"eval "set -- $L" && for w; do printf '%s\0' "$w"; done"#)
                    .env("L", &line)
                    .output()
                    .expect("/bin/sh runs");
                let ours = shell_words(&line);
                if out.status.success() {
                    let sh: Vec<String> = String::from_utf8_lossy(&out.stdout)
                        .split_terminator('\0')
                        .map(str::to_string)
                        .collect();
                    prop_assert_eq!(ours, Ok(sh), "line {:?}", line);
                } else {
                    prop_assert!(ours.is_err(), "sh refused {:?}, we split it", line);
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn object_names() {
        for ok in ["c1", "node-1.example.com", "a", "10.0.0.1", &"a".repeat(63)] {
            assert!(is_object_name(ok), "{ok}");
        }
        for bad in [
            "",
            "--all",
            "-l",
            "C1",
            "a_b",
            "a..b",
            ".a",
            "a-",
            "x y",
            "a/b",
            &"a".repeat(64),
            "c1\u{1b}[2K",
        ] {
            assert!(!is_object_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn words() {
        assert_eq!(
            shell_words(r#"--kubelet-extra-args="--node-ip=1.2.3.4 --max-pods=150""#),
            Ok(vec![
                "--kubelet-extra-args=--node-ip=1.2.3.4 --max-pods=150".to_string()
            ])
        );
        assert_eq!(
            shell_words("--labels 'a=b c'"),
            Ok(vec!["--labels".to_string(), "a=b c".to_string()])
        );
        assert!(shell_words("--labels=\"a").is_err());
        assert!(shell_words("--labels='a").is_err());
    }

    #[test]
    fn versions() {
        let v = |s: &str| K0sVersion::parse(s).unwrap();
        for ok in ["v1.33.4+k0s.0", "1.33.4", "v1.34.0-rc.1+k0s.0", "v0.11.0"] {
            assert_eq!(check_k0s_version(&v(ok)), Ok(()), "{ok}");
        }
        assert!(check_k0s_version(&v("v0.10.0")).is_err());
    }

    /// One rule for every address, `openSSH:` aliases included (k0sform records them in the
    /// state, whose reader holds them to the same rule), shown escaped.
    #[test]
    fn addresses() {
        for ok in ["10.0.0.1", "fe80::1", "cp-1.example.com", "Node1", "node1."] {
            assert_eq!(address_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "x'$(id)'",
            "-oProxyCommand=id",
            "a%hb",
            "a b",
            "web_1",
            "[::1]",
        ] {
            assert!(address_problem(bad).is_some(), "{bad}");
        }
        let message = address_problem("\u{1b}[2Kc1").unwrap_or_default();
        assert!(message.contains("`\\x1b[2Kc1`"), "{message}");
        let mut alias = SshTarget::new("x'$(id)'", 22);
        alias.openssh = true;
        let found: Vec<String> = target_findings(&alias, "spec.hosts[0].openSSH")
            .into_iter()
            .filter_map(|f| match f {
                TargetFinding::Error { field, message } => Some(format!("{field}: {message}")),
                TargetFinding::Missing { .. } => None,
            })
            .collect();
        assert_eq!(
            found,
            [
                "spec.hosts[0].openSSH.address: `x'$(id)'` is neither an IP address nor a DNS name (an ssh_config alias must be a host name too: k0sform records it in the state)"
            ]
        );
    }

    #[test]
    fn names() {
        assert!(is_dns_name("cp-1.example.com"));
        assert!(is_dns_name("localhost"));
        assert!(!is_dns_name("-bad"));
        assert!(!is_dns_name("under_score"));
        assert!(!is_dns_name("10.0.0.300"));
        assert!(!is_dns_name("a b"));
        assert!(valid_env_name("HTTPS_PROXY"));
        assert!(!valid_env_name("FOO-BAR"));
        assert!(!valid_env_name("1X"));
        assert!(check_host_key("SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU").is_ok());
        assert!(check_host_key("MD5:aa:bb").is_err());
        assert!(check_host_key("SHA256:short").is_err());
        // k0sctl's form: the key itself (`ssh-keygen -lf` of this key prints the fingerprint).
        let ed = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGuj3sk0LinO4GCDR2GtZ2VdPI+NTdstjpD1rSduvZ3c";
        assert_eq!(
            host_key_pin(ed).as_deref(),
            Ok("SHA256:976FTRrSr3BsrIHSB7x8JbM+GTOXhINu3hozoQiC2/M")
        );
        assert!(check_host_key(ed).is_ok());
        assert!(
            host_key_pin(
                "ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIGuj3sk0LinO4GCDR2GtZ2VdPI+NTdstjpD1rSduvZ3c"
            )
            .is_err()
        );
        assert!(host_key_pin(&format!("{ed} comment")).is_err());
        assert!(host_key_pin("ssh-ed25519 not!base64").is_err());
        assert!(host_key_pin("ssh-ed25519").is_err());
    }
}
