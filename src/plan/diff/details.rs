//! The indented lines under a host in the plan text, derived from the steps the plan runs for
//! it: what is removed and through whom, what is uploaded, written, joined or restarted, and
//! what is recorded in or forgotten by the state.

use super::Planner;
use super::host_plan::{Decision, HostPlan};
use super::hosts::HostCtx;
use super::steps::worker_batch_size;
use crate::hash::{short, short_key};
use crate::hostid::HostId;
use crate::k0s::desired;
use crate::plan::model::{Detail, ObjectKind, Step, StepKind};
use crate::reality::HostFacts;
use std::collections::HashMap;

fn line(sign: char, text: String) -> Detail {
    Detail { sign, text }
}

/// The binary upload and the config write, said in one line just before whatever starts k0s
/// (or at the end when nothing does).
#[derive(Default)]
struct Install {
    binary: Option<String>,
    config: bool,
    /// Where the host's k0s.yaml is (`desired::config_file`).
    config_path: String,
}

impl Install {
    fn of(own: &[&Step]) -> Self {
        let mut i = Install::default();
        for s in own {
            match &s.kind {
                StepKind::UploadBinary { sha256, version } => {
                    i.binary = Some(format!(
                        "k0s {}uploaded (sha256 {})",
                        version
                            .as_ref()
                            .map(|v| format!("{v} "))
                            .unwrap_or_default(),
                        short(sha256)
                    ));
                }
                StepKind::DownloadBinary {
                    url,
                    sha256,
                    version,
                } => {
                    let url = crate::k0s::redact::hide_url_credentials(url);
                    i.binary = Some(if sha256.is_empty() {
                        format!(
                            "k0s {version} downloaded by the host from {url} (sha256 not checked, recorded as downloaded)"
                        )
                    } else {
                        format!(
                            "k0s {version} downloaded by the host from {url} (sha256 {})",
                            short(sha256)
                        )
                    });
                }
                StepKind::WriteConfig { .. } => i.config = true,
                _ => {}
            }
        }
        i
    }

    /// Says it once: later calls add nothing.
    fn flush(&mut self, out: &mut Vec<Detail>) {
        match (self.binary.take(), self.config) {
            (Some(i), true) => out.push(line('+', format!("{i}, config written"))),
            (Some(i), false) => out.push(line('+', i)),
            (None, true) => out.push(line('~', format!("{} rewritten", self.config_path))),
            (None, false) => {}
        }
        self.config = false;
    }
}

/// Steps the install line goes before: what starts k0s, the files it may read, and every hook
/// but `connect.after` and `apply.before` (which run before the upload and the config).
fn follows_install(kind: &StepKind) -> bool {
    match kind {
        StepKind::RunHooks { action, stage, .. } => {
            !(action == "apply" && stage == "before" || action == "connect" && stage == "after")
        }
        StepKind::UploadFiles { .. }
        | StepKind::RestoreBackup { .. }
        | StepKind::Drain { .. }
        | StepKind::Bootstrap
        | StepKind::JoinController { .. }
        | StepKind::JoinWorker { .. }
        | StepKind::Upgrade { .. }
        | StepKind::Reconfigure => true,
        _ => false,
    }
}

/// The plan's steps grouped by host (each host's in step order), and what every worker's
/// upgrade line says about the pace: computed once per plan, not once per host.
pub(super) struct StepsByHost<'s> {
    /// Hashed: a tree of 200,000 steps by host id cost the 50,000-host plan ~15x its
    /// 5,000-host time in id comparisons.
    by_host: HashMap<&'s HostId, Vec<&'s Step>>,
    /// How many steps restart a worker (an upgrade or a reconfigure on a non-controller host).
    worker_restarts: usize,
}

impl<'s> StepsByHost<'s> {
    pub(super) fn new(planner: &Planner<'_>, steps: &'s [Step]) -> Self {
        let mut by_host: HashMap<&HostId, Vec<&Step>> = HashMap::new();
        for s in steps {
            by_host.entry(&s.host).or_default().push(s);
        }
        let worker_restarts = steps
            .iter()
            .filter(|s| {
                matches!(s.kind, StepKind::Upgrade { .. } | StepKind::Reconfigure)
                    && planner
                        .host_by_id(&s.host)
                        .is_some_and(|x| !x.role().is_controller())
            })
            .count();
        StepsByHost {
            by_host,
            worker_restarts,
        }
    }
}

impl Planner<'_> {
    /// The indented lines under a host in the plan text, derived from its steps.
    pub(super) fn details(&self, p: &HostPlan, steps: &StepsByHost) -> Vec<Detail> {
        let h = &self.hosts[p.idx];
        let own: &[&Step] = steps
            .by_host
            .get(&h.id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut install = Install::of(own);
        install.config_path = h
            .spec
            .map_or_else(|| desired::CONFIG_FILE.to_string(), desired::config_file);
        // uploadBinary: say where k0sform itself downloads the binary from.
        if let (Some(b), Some(u)) = (
            install.binary.as_mut(),
            self.desired
                .local_binary(&h.id)
                .and_then(|l| l.url.as_deref()),
        ) && b.contains(" uploaded (")
            && b.ends_with(')')
        {
            b.pop();
            b.push_str(&format!(
                ", downloaded locally from {})",
                crate::k0s::redact::hide_url_credentials(u)
            ));
        }
        let mut out = Vec::new();
        for s in own {
            if follows_install(&s.kind) {
                install.flush(&mut out);
            }
            self.step_details(p, h, s, own, steps, &mut out);
        }
        install.flush(&mut out);
        out
    }

    pub(super) fn name_of(&self, id: &HostId) -> String {
        self.host_by_id(id)
            .map(|x| x.name())
            .unwrap_or_else(|| id.to_string())
    }

    /// The lines one step of the host's adds.
    fn step_details(
        &self,
        p: &HostPlan,
        h: &HostCtx,
        s: &Step,
        own: &[&Step],
        steps: &StepsByHost,
        out: &mut Vec<Detail>,
    ) {
        match &s.kind {
            StepKind::RemoveMember {
                member_id,
                peer_url,
                via,
            } => out.push(line(
                '-',
                format!(
                    "etcd member {member_id} ({peer_url}), removed via {}",
                    self.name_of(via)
                ),
            )),
            StepKind::RemoveUnknownMember {
                name,
                member_id,
                peer_url,
                via,
            } => out.push(line(
                '-',
                format!(
                    "etcd member {}, which no host of the spec or the state owns, removed via {} before any controller leaves",
                    crate::plan::unknown_member_text(name, member_id.as_deref(), peer_url),
                    self.name_of(via)
                ),
            )),
            StepKind::Drain {
                node,
                via,
                evict_taint,
            } => {
                let deleted = own.iter().any(|x| {
                    matches!(&x.kind, StepKind::DeleteObjects { node: n, objects, .. }
                        if n == node && objects.contains(&ObjectKind::Node))
                });
                let restarts = own
                    .iter()
                    .any(|x| matches!(&x.kind, StepKind::Uncordon { node: n, .. } if n == node));
                let via = self.name_of(via);
                out.push(match (restarts, evict_taint) {
                    (true, Some(t)) => line(
                        '~',
                        format!("Node \"{node}\" cordoned, tainted {t} and drained via {via}"),
                    ),
                    (true, None) => line(
                        '~',
                        format!("Node \"{node}\" cordoned and drained via {via}"),
                    ),
                    (false, _) if deleted => line(
                        '-',
                        format!("Node \"{node}\" drained and deleted via {via}"),
                    ),
                    (false, _) => line('-', format!("Node \"{node}\" drained via {via}")),
                })
            }
            StepKind::Uncordon {
                node, evict_taint, ..
            } => out.push(line(
                '~',
                match evict_taint {
                    Some(t) => format!("Node \"{node}\" uncordoned and {t} removed once Ready"),
                    None => format!("Node \"{node}\" uncordoned once Ready"),
                },
            )),
            StepKind::DeleteObjects { node, via, .. } => {
                let drained = own
                    .iter()
                    .any(|x| matches!(&x.kind, StepKind::Drain { node: n, .. } if n == node));
                let rest: Vec<(ObjectKind, &str)> = s
                    .kind
                    .object_names()
                    .into_iter()
                    .filter(|(o, _)| !(drained && *o == ObjectKind::Node))
                    .collect();
                let via = self.name_of(via);
                if rest.iter().all(|(_, n)| n == node) {
                    let kinds: Vec<ObjectKind> = rest.iter().map(|(o, _)| *o).collect();
                    if !kinds.is_empty() {
                        out.push(line(
                            '-',
                            format!("{} \"{node}\", deleted via {via}", object_list(&kinds)),
                        ))
                    }
                } else {
                    // k0s names them after the OS hostname, the Node after `hostname:`.
                    let named: Vec<String> = rest
                        .iter()
                        .map(|(o, n)| format!("{} \"{n}\"", object_list(&[*o])))
                        .collect();
                    out.push(line(
                        '-',
                        format!("{}, deleted via {via}", named.join(", ")),
                    ))
                }
            }
            StepKind::WriteHostEnvironment { names } => out.push(line(
                '~',
                format!(
                    "{} sets {} (as k0sctl; before the host downloads k0s or runs hooks)",
                    crate::k0s::host_env::ETC_ENVIRONMENT,
                    names.join(", ")
                ),
            )),
            // After the binary and the config, before k0s starts.
            StepKind::UploadFiles { files } => {
                out.extend(files.iter().map(|f| line('~', file_text(f))))
            }
            StepKind::RunHooks {
                action,
                stage,
                lines,
            } => out.push(line(
                '>',
                format!("hooks {action}.{stage} run: {}", lines.join(" ; ")),
            )),
            StepKind::ResetHost {
                machine_id,
                uninstall,
            } => {
                if *uninstall
                    && let Some(f) = h.facts()
                    && !super::table::leftovers(f)
                {
                    out.push(line(
                        '!',
                        format!(
                            "k0s is neither installed nor running, but its binary is still at {} (a reset that did not finish, e.g. an interrupted destroy)",
                            h.install_path()
                        ),
                    ));
                }
                out.push(line(
                    '-',
                    format!(
                        "k0s stopped and reset on {} (machine-id {}){}",
                        h.name(),
                        short(machine_id),
                        if *uninstall {
                            ", its k0s binary and k0s.yaml removed"
                        } else {
                            ""
                        }
                    ),
                ));
                if h.spec.is_none() {
                    out.push(line('!', recorded_paths_text(h.state)));
                }
            }
            StepKind::RestoreBackup { archive, sha256 } => out.push(line(
                '+',
                format!(
                    "restored from {} (sha256 {}) with k0s restore",
                    archive.rsplit('/').next().unwrap_or(archive),
                    short(sha256)
                ),
            )),
            StepKind::Bootstrap => out.push(line(
                '+',
                "bootstraps a new cluster as its first controller".into(),
            )),
            StepKind::JoinController { via } => out.push(line(
                '+',
                format!(
                    "joins the cluster as {} (token from {})",
                    h.role(),
                    self.name_of(via)
                ),
            )),
            StepKind::JoinWorker { via } => out.push(line(
                '+',
                format!(
                    "joins the cluster as worker (token from {})",
                    self.name_of(via)
                ),
            )),
            StepKind::Upgrade { from, to } => {
                out.push(line(
                    '~',
                    format!(
                        "k0s {} → {to}, reinstalled and restarted ({})",
                        from.as_deref().unwrap_or("none"),
                        self.upgrade_pace(h, steps)
                    ),
                ));
                // `to` names a version, or for a rebuilt binary of the same version its sha256.
                if let Ok(v) = crate::version::K0sVersion::parse(to) {
                    token_file_line(h, &v, out);
                }
            }
            StepKind::Reconfigure => {
                out.push(line(
                '~',
                if p.reasons
                    .iter()
                    .any(|r| r.code == crate::plan::model::ReasonCode::EnvironmentChange)
                {
                    "service reinstalled with the spec's flags and environment, and restarted"
                        .into()
                } else {
                    "service reinstalled with the spec's flags and restarted".into()
                },
                ));
                if let Some(v) = h.facts().and_then(|f| f.status.as_ref()) {
                    token_file_line(h, &v.version, out);
                }
            }
            StepKind::WriteTokenPlaceholder => out.push(line(
                '~',
                format!(
                    "token file {}: a decodable placeholder is written, k0s not restarted (it holds no join token; k0s {} workers refuse to start then, k0s #7202; as k0sctl)",
                    h.spec.map(crate::k0s::desired::token_file).unwrap_or_default(),
                    h.facts()
                        .and_then(|f| f.status.as_ref())
                        .map(|s| s.version.to_string())
                        .unwrap_or_default()
                ),
            )),
            StepKind::MoveHost { from } => {
                let mut kept = vec![format!("node name {}", h.name())];
                if let Some(e) = h.state.and_then(|s| s.etcd.as_ref()) {
                    kept.push(format!("etcd member {}", e.member_id));
                }
                // A move to or from the localhost host keeps the machine-id only: a local
                // host has no SSH host key.
                let local_then = h
                    .state
                    .is_some_and(|s| s.host_key == crate::spec::LOCAL_HOST_KEY);
                let local_now = h.spec.is_some_and(|s| s.ssh.localhost);
                kept.push(if local_then == local_now {
                    "machine-id and host key".into()
                } else {
                    "machine-id".into()
                });
                out.push(line(
                    '~',
                    format!(
                        "state record moved from {from} to {} ({} kept)",
                        h.id,
                        kept.join(", ")
                    ),
                ));
            }
            StepKind::RecordHost if matches!(p.decision, Decision::Adopt) => {
                let f = h.facts().cloned().unwrap_or_default();
                let mid = self.member_of(&h.id).and_then(|m| m.member_id.clone());
                out.push(line('+', identity_text(&f, mid.as_deref())));
            }
            StepKind::ForgetHost => {
                if let Decision::Remove { reset: None, .. } = &p.decision {
                    let text = if !self.opts.destroy {
                        "not reset: unreachable, or no longer the recorded machine"
                    } else if h.excluded {
                        "NOT reset: excluded with -exclude"
                    } else {
                        "nothing to reset: no k0s service, process or data on the host"
                    };
                    out.push(line('!', text.into()));
                }
                out.push(line('-', "forgotten in the state".into()))
            }
            StepKind::ForgetCluster => out.push(line(
                '-',
                "the cluster's identity is forgotten in the state (its lineage is kept)".into(),
            )),
            _ => {}
        }
    }

    /// How many hosts restart at once beside this one: controllers one at a time, workers in
    /// batches of the plan's worker restarts.
    fn upgrade_pace(&self, h: &HostCtx, steps: &StepsByHost) -> String {
        if h.role().is_controller() {
            return "controllers one at a time".to_string();
        }
        let batch = worker_batch_size(
            steps.worker_restarts,
            self.spec.options.worker_disruption_percent,
            self.spec.options.concurrency_limit,
        );
        format!("workers {batch} at a time")
    }
}

/// k0s issue #7202: a worker that restarts on k0s `version` that decodes its token file at every
/// start gets a decodable placeholder there first where the file holds no token (k0sctl
/// `phase/ensure_join_token_workaround.go`; the executor's `token_file_workaround`).
fn token_file_line(h: &HostCtx, version: &crate::version::K0sVersion, out: &mut Vec<Detail>) {
    if h.role() == crate::spec::Role::Worker
        && crate::k0s::quirks::worker_decodes_token_file_at_start(version)
    {
        out.push(line(
            '~',
            format!("token file: a decodable placeholder is written first where it holds no join token (k0s {version} workers refuse to start otherwise, k0s #7202; as k0sctl)"),
        ));
    }
}

/// One file of an upload, on its own line: source → destination (mode, owner, sha256).
fn file_text(f: &crate::files::DesiredFile) -> String {
    let owner = match (&f.user, &f.group) {
        (None, None) => String::new(),
        (Some(u), None) => format!(", owner {u}"),
        (None, Some(g)) => format!(", group {g}"),
        (Some(u), Some(g)) => format!(", {u}:{g}"),
    };
    let from = match &f.url {
        // Shown without any credentials in it.
        Some(u) => crate::k0s::redact::hide_url_credentials(u),
        None if f.source.is_empty() => "inline data".to_string(),
        None => f.source.clone(),
    };
    let sha = if f.sha256.is_empty() {
        // A URL source without `sha256` (k0sctl checks none): the state records what the
        // host got, and the next plan holds the file to that.
        "not verified: no sha256 in the spec".to_string()
    } else {
        format!("sha256 {}", short(&f.sha256))
    };
    format!(
        "file {from} → {} ({}{owner}, {sha})",
        f.remote,
        crate::files::mode_text(f.mode)
    )
}

/// The k0s paths a host known only to the state is reset with: the ones its record names (the
/// state is data others can write: `state::access::recorded_path_problems` refused
/// implausible ones), else k0s's defaults.
fn recorded_paths_text(st: Option<&crate::state::HostState>) -> String {
    let (bin, data_dir, kubelet) = crate::state::HostState::k0s_paths(st);
    // k0s's own default: `<dataDir>/kubelet` (k0s pkg/config/cfgvars.go, NewCfgVars).
    let kubelet = kubelet.unwrap_or_else(|| format!("{data_dir}/kubelet"));
    let paths = format!("k0sInstallPath {bin}, dataDir {data_dir}, kubeletRootDir {kubelet}");
    if st.is_some_and(|s| s.access.is_some()) {
        format!("k0s paths from its state record: {paths}")
    } else {
        format!("k0s paths (none recorded, k0s's defaults): {paths}")
    }
}

pub(super) fn identity_text(f: &HostFacts, member_id: Option<&str>) -> String {
    let mut s = format!(
        "recorded in state: machine-id {}, host key {}",
        short(&f.machine_id),
        short_key(&f.host_key)
    );
    if let Some(m) = member_id {
        s.push_str(&format!(", etcd member {m}"));
    }
    if let Some(v) = f.status.as_ref().map(|s| &s.version) {
        s.push_str(&format!(", k0s {v}"));
    }
    s
}

pub(super) fn object_list(objects: &[ObjectKind]) -> String {
    let names: Vec<&str> = objects
        .iter()
        .map(|o| match o {
            ObjectKind::Node => "Node",
            ObjectKind::EtcdMember => "EtcdMember",
            ObjectKind::ControlNode => "ControlNode",
        })
        .collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}
