//! The probe's one batched, read-only remote command per host, and its parser into `HostFacts`.
//!
//! Each section is framed by marker lines carrying a random per-run nonce: `<N> begin <name>`,
//! the command's raw output, then `\n<N> end <name> <exit code>` on stdout, and the same frame
//! (without the exit code) around its stderr. Nothing is encoded and no sub-shell runs per
//! section (a worker's probe is a handful of processes), and no output can be mistaken for a
//! delimiter: the nonce is 128 random bits that appear nowhere else.
//! Cluster queries run only when `k0s status` reports a running controller, each under `timeout`.

use super::parse::{
    CLUSTER_OBJECTS, K0sFailure, classify, etcd_refused_for_kine, is_not_running,
    parse_cluster_objects, parse_etcd_members, parse_member_list, parse_names_checked, parse_nodes,
    parse_status, parse_uid, parse_version,
};
use super::{EtcdMemberObject, K0sError};
use crate::reality::{ClusterView, HostFacts, K0sStatus, MemberView, ServiceKind, TokenFileState};
use crate::state::BinaryRecord;
use crate::transport::{CommandOutput, RemoteCommand};
use std::collections::BTreeMap;
use std::time::Duration;

mod frames;
mod service_env;

use frames::{Section, sections};
pub use service_env::parse_service_env;

/// Where k0sform keeps the id it generates for a host that has neither /etc/machine-id nor
/// /var/lib/dbus/machine-id.
pub const GENERATED_MACHINE_ID: &str = "/etc/k0s/k0sform-machine-id";

/// The k0s.yaml the probe reads by default (the one k0sform writes where the host's
/// installFlags name no `--config`: [`ProbeCommand::reading_config_at`]).
pub const CONFIG_PATH: &str = super::desired::CONFIG_FILE;

/// Where the k0s.yaml path is in the probe's argv (the script's `$4`).
const CONFIG_ARG: usize = 7;

/// Where the view switch is in the probe's argv (the script's `$3`: 0, 1, or 2 = the view and
/// the dynamic config object).
const VIEW_ARG: usize = 6;

/// Where a worker's token file path is in the probe's argv (the script's `$9`).
const TOKEN_FILE_ARG: usize = 12;

/// How long the probe waits for `k0s status` (the `status_bound` of the script).
pub const STATUS_BOUND_SECS: u64 = 10;

/// Hard limit for the whole probe of one host (each inner query has its own, shorter one).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// kubectl runs as k0sctl runs it (`env KUBECONFIG=<dd>/pki/admin.conf k0s kubectl …`).
/// Arguments: $1 k0s binary, $2 data dir, $3 "1" to ask a running controller for its view,
/// $4 the k0s.yaml path, $5 the marker nonce, $6 the resource types of the one `kubectl get`,
/// $7 the sha256 of the k0s.yaml k0sform would write there (or `-`), $8 the binary's `stat`
/// line as the state records it (or empty), $9 a worker's token file to report on (or empty),
/// $10 how many of the arguments after it are the spec's files; the arguments after those are the destinations beside which to look for upload
/// staging files (`staging_destinations`).
/// The script's text is `probe.sh` (checked by shellcheck in `.ci/run`); the lines here before it
/// define the shell functions and the one variable it uses from elsewhere.
pub(super) const SCRIPT: &str = concat!(
    super::cmdline::each_leftover_sh!(),
    super::token_file::token_decodes_sh!(),
    "k0sctl_dropin=",
    super::cmdline::k0sctl_env_dropin_name!(),
    "\n",
    include_str!("probe.sh")
);

/// The batched probe command of one host and what reads its output.
#[derive(Debug, Clone)]
pub struct ProbeCommand {
    pub command: RemoteCommand,
    pub reader: ProbeReader,
}

impl ProbeCommand {
    /// The probe reads the host's k0s.yaml at `path` (k0sctl `cluster/host.go`
    /// `K0sConfigPath`: `--config`/`-c` of the installFlags) instead of [`CONFIG_PATH`].
    pub fn reading_config_at(mut self, path: &str) -> Self {
        self.command.argv[CONFIG_ARG] = path.to_string();
        self
    }

    /// The probe reports whether the worker's token file at `path` (`desired::token_file`)
    /// holds a decodable join token (`HostFacts::worker_token_file`), never its content.
    pub fn checking_token_file_at(mut self, path: &str) -> Self {
        self.command.argv[TOKEN_FILE_ARG] = path.to_string();
        self.reader.token_file = !path.is_empty();
        self
    }

    /// With the view, a running controller also reports the dynamic config: the ClusterConfig
    /// object's spec (`HostFacts::cluster_config`), read-only through its kubectl.
    pub fn reading_cluster_config(mut self, yes: bool) -> Self {
        if yes && self.command.argv[VIEW_ARG] == "1" {
            self.command.argv[VIEW_ARG] = "2".into();
            self.reader.cluster_config = true;
        }
        self
    }
}

/// Reads one probe command's output: the sections framed with that command's nonce.
#[derive(Debug, Clone)]
pub struct ProbeReader {
    nonce: String,
    files: Vec<String>,
    staging: Vec<String>,
    known_binary: Option<BinaryRecord>,
    /// The script was given a token file to report on.
    token_file: bool,
    /// The script was asked for the ClusterConfig object (`reading_cluster_config`).
    cluster_config: bool,
}

/// The batched probe command for one host. `want_view`: ask a running controller for its view
/// of the cluster (member list with IDs, uid, nodes, control nodes). `files`: remote paths whose
/// sha256, mode and owner to report (the spec's `files:`). `want_config_sha256`: the sha256 of
/// the k0s.yaml k0sform would write on the host; when the host's file has it, k0s's defaults
/// (`k0s config create`, one more start of k0s) are not asked for. `staging`: the destinations
/// beside which to look for upload staging files an earlier run left
/// (`HostFacts::staging_leftovers`). `known_binary`: the binary as the state records it; when
/// its `stat` line is unchanged the host does not hash it and the record's sha256 stands.
pub fn probe(
    bin: &str,
    data_dir: &str,
    want_view: bool,
    want_config_sha256: Option<&str>,
    known_binary: Option<&BinaryRecord>,
    files: &[String],
    staging: &[String],
) -> ProbeCommand {
    let nonce = format!("K0SFORM-{}", uuid::Uuid::new_v4().simple());
    let mut argv: Vec<String> = [
        "sh",
        "-c",
        SCRIPT,
        "k0sform-probe",
        bin,
        data_dir,
        if want_view { "1" } else { "0" },
        CONFIG_PATH,
        &nonce,
        CLUSTER_OBJECTS,
        want_config_sha256.unwrap_or("-"),
        known_binary.map_or("", |k| k.stat.as_str()),
        "",
        &files.len().to_string(),
    ]
    .into_iter()
    .map(String::from)
    .collect();
    argv.extend(files.iter().cloned());
    argv.extend(staging.iter().cloned());
    let mut command = RemoteCommand::new(argv).timeout(PROBE_TIMEOUT);
    if want_view {
        // The view lists every Node of the cluster.
        command = command.output_limit(super::cmdline::NODE_LISTING_LIMIT);
    }
    ProbeCommand {
        command,
        reader: ProbeReader {
            nonce,
            files: files.to_vec(),
            staging: staging.to_vec(),
            known_binary: known_binary.cloned(),
            token_file: false,
            cluster_config: false,
        },
    }
}

impl ProbeReader {
    /// Turn the probe command's output into `HostFacts` (the SSH key fields are the caller's).
    pub fn parse(&self, out: &CommandOutput) -> Result<HostFacts, ProbeError> {
        let mut f = parse_probe(out, &self.nonce, &self.files, &self.staging)?;
        if self.token_file {
            f.worker_token_file = Some(parse_token_file(out, &self.nonce)?);
        }
        if self.cluster_config {
            f.cluster_config = sections(out, &self.nonce)
                .ok()
                .and_then(|s| s.get("cluster_config").filter(|x| x.ok()).cloned())
                .and_then(|x| super::parse::live_spec(&x.out));
        }
        // Not hashed on the host: its stat line is the recorded one, and so is its hash.
        if f.k0s_binary_sha256.is_none()
            && let (Some(st), Some(k)) = (&f.k0s_binary_stat, &self.known_binary)
            && *st == k.stat
        {
            f.k0s_binary_sha256 = Some(k.sha256.clone());
        }
        Ok(f)
    }
}

/// The `staging` section: the index (into `destinations`, ascending, each once) of every
/// destination that has an upload staging file beside it, one per line. The host prints only
/// numbers: anything else, an index out of range or out of order is refused, and what is
/// recorded are k0sform's own destination paths, never text from the host.
/// The `token_file` section: one word, `decodes`, `undecodable` or `missing`.
fn parse_token_file(out: &CommandOutput, nonce: &str) -> Result<TokenFileState, ProbeError> {
    let s = sections(out, nonce).map_err(ProbeError::Output)?;
    let text = s
        .get("token_file")
        .filter(|x| x.ok())
        .map(|x| x.out.trim())
        .ok_or_else(|| ProbeError::Host("the probe did not report on the token file".into()))?;
    match text {
        "decodes" => Ok(TokenFileState::Decodes),
        "undecodable" => Ok(TokenFileState::Undecodable),
        "missing" => Ok(TokenFileState::Missing),
        other => Err(ProbeError::Host(format!(
            "the probe reports the token file as {:?}, which is not valid",
            crate::hash::short_n(other, 40)
        ))),
    }
}

fn parse_staging(destinations: &[String], text: &str) -> Result<Vec<String>, String> {
    let mut found: Vec<String> = Vec::new();
    let mut last: Option<usize> = None;
    for line in text.lines().filter(|l| !l.is_empty()) {
        let bad = || {
            format!(
                "the probe's report of staging files has the line {:?}, not the index of one of the {} destinations in ascending order",
                crate::hash::short_n(line, 40),
                destinations.len()
            )
        };
        // Digits only, no sign, no leading zero: the one spelling the script prints.
        if !line.bytes().all(|b| b.is_ascii_digit()) || (line.len() > 1 && line.starts_with('0')) {
            return Err(bad());
        }
        let i: usize = line.parse().map_err(|_| bad())?;
        if i >= destinations.len() || last.is_some_and(|l| i <= l) {
            return Err(bad());
        }
        last = Some(i);
        found.push(destinations[i].clone());
    }
    Ok(found)
}

/// The `files` section: one line per asked path, in order.
fn parse_files(paths: &[String], text: &str) -> Result<Vec<crate::reality::RemoteFile>, String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    if lines.len() != paths.len() {
        return Err(format!(
            "the files section has {} lines for {} files",
            lines.len(),
            paths.len()
        ));
    }
    paths
        .iter()
        .zip(lines)
        .map(|(p, l)| {
            let mut w = l.split_whitespace();
            let sha = w.next().unwrap_or("-");
            if sha == "-" {
                return Ok(crate::reality::RemoteFile {
                    path: p.clone(),
                    ..Default::default()
                });
            }
            let mode = w
                .next()
                .and_then(|m| u32::from_str_radix(m, 8).ok())
                .ok_or_else(|| format!("no file mode for {p} in {l:?}"))?;
            Ok(crate::reality::RemoteFile {
                path: p.clone(),
                sha256: Some(sha.to_string()),
                mode: Some(mode),
                user: w.next().map(String::from),
                group: w.next().map(String::from),
                uid: w.next().and_then(|x| x.parse().ok()),
                gid: w.next().and_then(|x| x.parse().ok()),
            })
        })
        .collect()
}

/// `os-release` → `"<ID> <VERSION_ID>"` (e.g. `debian 12`), else PRETTY_NAME, else "linux".
fn os_name(os_release: &str) -> String {
    let field = |k: &str| {
        os_release.lines().find_map(|l| {
            l.strip_prefix(k)
                .and_then(|v| v.strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_string())
        })
    };
    match (field("ID"), field("VERSION_ID")) {
        (Some(id), Some(v)) => format!("{id} {v}"),
        (Some(id), None) => id,
        _ => field("PRETTY_NAME").unwrap_or_else(|| "linux".to_string()),
    }
}

fn first_word(s: &str) -> Option<String> {
    s.split_whitespace().next().map(String::from)
}

/// The host part of a peer URL (`https://10.0.0.1:2380` → `10.0.0.1`, `https://[::1]:2380` → `::1`).
pub fn peer_url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let hostport = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = hostport.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    hostport.rsplit_once(':').map_or(hostport, |(h, _)| h)
}

/// Join `k0s etcd member-list` (name → URL) with the EtcdMember objects (IDs), by peer address.
/// Names cannot be compared: etcd's member name is the raw hostname (k0s
/// `pkg/component/controller/etcd.go`), its EtcdMember object is named after the lower-cased
/// hostname from k0s 1.34.1 and the raw one before (`etcd_member_reconciler.go`), so with capitals
/// in the hostname they differ. Only an object that has no peer address yet is matched by name
/// (ignoring case). An object that left (Joined=False) gives way to one that did not.
pub fn merge_members(
    list: &BTreeMap<String, String>,
    objects: &[EtcdMemberObject],
) -> Vec<MemberView> {
    let mut members: Vec<MemberView> = list
        .iter()
        .map(|(name, url)| {
            let host = peer_url_host(url);
            let owns = |o: &&EtcdMemberObject| match o.peer_address.as_deref() {
                Some(a) => a == host,
                None => !name.is_empty() && o.name.eq_ignore_ascii_case(name),
            };
            let object = objects
                .iter()
                .filter(owns)
                .filter(|o| o.member_id.is_some())
                .min_by_key(|o| o.joined == Some(false));
            MemberView {
                name: name.clone(),
                peer_url: url.clone(),
                member_id: object.and_then(|o| o.member_id.clone()),
                invocation: object.and_then(|o| o.invocation.clone()),
            }
        })
        .collect();
    members.sort_by(|a, b| (&a.name, &a.peer_url).cmp(&(&b.name, &b.peer_url)));
    members
}

fn view(s: &BTreeMap<String, Section>) -> Option<ClusterView> {
    let ml = s.get("member_list")?;
    let mut v = ClusterView::default();
    // A kine controller has no etcd membership: no members, and no error either.
    let list = if etcd_refused_for_kine(&ml.as_output()) {
        Some(BTreeMap::new())
    } else if ml.ok() {
        match parse_member_list(&ml.out) {
            Ok(l) => Some(l),
            Err(e) => {
                v.errors.push(tagged("member-list", e.to_string()));
                None
            }
        }
    } else {
        v.errors.push(tagged("member-list", ml.error()));
        None
    };
    // One `kubectl get` of all four lists (on kine, asked again without EtcdMembers once the
    // member list said kine), or one list at a time where that failed.
    let combined = s.get("kine_objects").or_else(|| s.get("objects"));
    if let Some(sec) = combined.filter(|sec| sec.ok()) {
        match parse_cluster_objects(&sec.out) {
            Ok(o) => {
                if let Some(list) = &list {
                    v.members = merge_members(list, &o.etcd_members);
                }
                match o.cluster_uid {
                    Ok(uid) => v.cluster_uid = Some(uid),
                    Err(e) => v.errors.push(tagged("kube-system uid", e.to_string())),
                }
                v.nodes = o.nodes;
                v.control_nodes = o.control_nodes;
            }
            Err(e) => {
                v.errors.push(tagged("cluster objects", e.to_string()));
                if let Some(list) = &list {
                    v.members = merge_members(list, &[]);
                }
            }
        }
        return Some(v);
    }
    if let Some(sec) = combined
        && !s.contains_key("cluster_uid")
    {
        // Not retried one list at a time (timed out): the view is unknown.
        v.errors.push(tagged("cluster objects", sec.error()));
    }
    let objects = match s.get("etcd_members") {
        Some(sec) if sec.ok() => parse_etcd_members(&sec.out).unwrap_or_else(|e| {
            v.errors.push(tagged("etcdmembers", e.to_string()));
            Vec::new()
        }),
        Some(sec) => {
            v.errors.push(tagged("etcdmembers", sec.error()));
            Vec::new()
        }
        None => Vec::new(),
    };
    if let Some(list) = &list {
        v.members = merge_members(list, &objects);
    }
    match s.get("cluster_uid") {
        Some(sec) if sec.ok() => match parse_uid(&sec.out) {
            Ok(uid) => v.cluster_uid = Some(uid),
            Err(e) => v.errors.push(tagged("kube-system uid", e.to_string())),
        },
        Some(sec) => v.errors.push(tagged("kube-system uid", sec.error())),
        None => {}
    }
    match s.get("nodes") {
        Some(sec) if sec.ok() => match parse_nodes(&sec.out) {
            Ok(n) => v.nodes = n,
            Err(e) => v.errors.push(tagged("nodes", e.to_string())),
        },
        Some(sec) => v.errors.push(tagged("nodes", sec.error())),
        None => {}
    }
    match s.get("control_nodes") {
        Some(sec) if sec.ok() => match parse_names_checked(&sec.out) {
            Ok(n) => v.control_nodes = n,
            Err(e) => v.errors.push(tagged("controlnodes", e.to_string())),
        },
        Some(sec) => v.errors.push(tagged("controlnodes", sec.error())),
        None => {}
    }
    Some(v)
}

fn tagged(what: &str, e: String) -> String {
    format!("{what}: {e}")
}

/// Why a probe's output cannot be turned into facts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("probe command failed (exit {status:?}): {message}")]
    Failed {
        status: Option<i32>,
        message: String,
    },
    #[error(transparent)]
    Output(#[from] K0sError),
    #[error("{0}")]
    Host(String),
    /// `k0s status` was still running when its bound ran out.
    #[error("k0s not answering: `k0s status` gave no answer within {0} s")]
    K0sNotAnswering(u64),
}

fn parse_probe(
    out: &CommandOutput,
    nonce: &str,
    files: &[String],
    staging: &[String],
) -> Result<HostFacts, ProbeError> {
    let s = sections(out, nonce).map_err(|e| {
        if out.success() {
            ProbeError::Output(e)
        } else {
            ProbeError::Failed {
                status: out.status,
                message: out.error_line(),
            }
        }
    })?;
    let sec = |name: &str| s.get(name);
    let text = |name: &str| {
        sec(name)
            .filter(|x| x.ok())
            .map(|x| x.out.trim().to_string())
    };

    let machine_id = text("machine_id")
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            ProbeError::Host(format!(
                "cannot read or create a machine-id (/etc/machine-id, /var/lib/dbus/machine-id, {GENERATED_MACHINE_ID}): {}",
                sec("machine_id").map(Section::error).unwrap_or_default()
            ))
        })?;
    let mut f = HostFacts {
        machine_id,
        hostname: text("hostname").unwrap_or_default(),
        os: text("os_release")
            .map(|t| os_name(&t))
            .unwrap_or_else(|| "linux".into()),
        arch: text("arch").unwrap_or_default(),
        has_etcd_data: sec("etcd_data").is_some_and(Section::ok),
        ..HostFacts::default()
    };

    // A binary that exists but does not run (wrong arch, truncated) counts as no usable binary.
    f.k0s_version = text("version").and_then(|v| parse_version(&v).ok());
    f.k0s_binary_sha256 = text("binary_sha256").and_then(|v| first_word(&v));
    // A line of another shape (another `stat`) is not kept: the binary is then hashed each time.
    f.k0s_binary_stat = text("binary_stat").filter(|v| crate::state::is_binary_stat(v));
    f.service = service_kind(&text("units").unwrap_or_default());
    if f.service.is_some() {
        let env = sec("service_env")
            .filter(|x| x.ok())
            .map(|x| x.out.as_str())
            .unwrap_or_default();
        f.service_env = Some(parse_service_env(env).map_err(ProbeError::Host)?);
    }
    f.etc_environment = sec("etc_environment")
        .filter(|x| x.ok())
        .map(|x| super::host_env::parse_etc_environment(&x.out));
    f.config_sha256 = text("config_sha256").and_then(|v| first_word(&v));
    f.config_text = sec("config").filter(|x| x.ok()).map(|x| {
        // The shell's command substitution drops trailing newlines; files end with one.
        let mut t = x.out.clone();
        if !t.is_empty() && !t.ends_with('\n') {
            t.push('\n');
        }
        t
    });

    f.config_defaults = sec("config_defaults")
        .filter(|x| x.ok() && !x.out.trim().is_empty())
        .map(|x| x.out.clone());

    if let Some(st) = sec("status") {
        f.status = read_status(st)?;
    }
    // `version` is skipped while k0s runs: the running binary's version stands for it (a
    // replaced binary still shows in k0s_binary_sha256).
    if sec("version").is_none() {
        f.k0s_version = f.status.as_ref().map(|st| st.version.clone());
    }
    f.view = view(&s);
    // Validated line by line (`private_address::parse_net`); nothing printed: no facts.
    f.net = sec("net")
        .map(|x| super::private_address::parse_net(&x.out))
        .filter(|n| *n != Default::default());
    if !files.is_empty() {
        let text = s.get("files").map(|x| x.out.as_str()).unwrap_or_default();
        f.files = parse_files(files, text).map_err(ProbeError::Host)?;
    }
    if !staging.is_empty() {
        let text = s
            .get("staging")
            .filter(|x| x.ok())
            .map(|x| x.out.as_str())
            .ok_or_else(|| ProbeError::Host("the probe did not report on staging files".into()))?;
        f.staging_leftovers = parse_staging(staging, text).map_err(ProbeError::Host)?;
    }
    super::facts::check(&f).map_err(ProbeError::Host)?;
    Ok(f)
}

/// The k0s service installed, from the unit names the script found.
fn service_kind(units: &str) -> Option<ServiceKind> {
    if units
        .lines()
        .any(|u| u == "k0scontroller" || u == "k0sserver")
    {
        Some(ServiceKind::Controller)
    } else if units.lines().any(|u| u == "k0sworker") {
        Some(ServiceKind::Worker)
    } else {
        None
    }
}

/// The `status` section: k0s's status, `None` when k0s is not running, an error when the state
/// is unknown.
fn read_status(st: &Section) -> Result<Option<K0sStatus>, ProbeError> {
    if st.ok() {
        return match parse_status(&st.out) {
            Ok(status) => Ok(Some(status)),
            Err(K0sError::NotRunning) => Ok(None),
            Err(e) => Err(e.into()),
        };
    }
    let o = st.as_output();
    // `timeout` exits 124 (137 after its SIGKILL): k0s's status can block for minutes
    // (pkg/component/status/status.go waits for kubelet credentials, then has no timeout).
    if st.rc == 124 || st.rc == 137 {
        return Err(ProbeError::K0sNotAnswering(STATUS_BOUND_SECS));
    }
    // Anything but "not running" (or a binary that cannot run) leaves the state unknown:
    // guessing "stopped" could make the planner rejoin a healthy controller.
    if !is_not_running(&o) && classify(&o) != Some(K0sFailure::BinaryMissing) {
        return Err(ProbeError::Host(format!(
            "k0s status failed: {}",
            st.error()
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_host;
