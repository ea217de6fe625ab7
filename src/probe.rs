//! Gathers `Reality` from all hosts in parallel: one connection and one batched command per host.
//! Hosts of the spec and hosts known only to the state (they may need removal) are probed; an
//! unreachable host is `Probe::Unreachable`, never "fresh". Also saves/loads a `Reality` as JSON
//! (`plan -probe-out` / `-probe-in`).

use crate::hostid::HostId;
use crate::k0s;
use crate::reality::{HostReality, Probe, Reality};
use crate::spec::{Spec, SshTarget};
use crate::state::State;
use crate::transport::{ConnectedHost, Transport, TransportError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// `-replace ADDR`: a changed host key is accepted for these hosts (they were rebuilt).
    pub replace: Vec<String>,
    /// At most this many hosts are probed at once (`-parallelism`, default 32).
    pub parallelism: usize,
    /// `-exclude ADDR`: not contacted at all and absent from the result.
    pub exclude: Vec<String>,
    /// Remote paths of each spec host's `files:` to report on.
    pub files: std::collections::BTreeMap<HostId, Vec<String>>,
    /// Each spec host's destinations to look beside for upload staging files an earlier run
    /// left (`ops::staging_destinations`).
    pub staging: std::collections::BTreeMap<HostId, Vec<String>>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            files: Default::default(),
            staging: Default::default(),
            replace: Vec::new(),
            parallelism: 32,
            exclude: Vec::new(),
        }
    }
}

/// How one host is going to be probed. Pure data, derived from spec, state and options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostProbe {
    pub id: HostId,
    pub target: SshTarget,
    /// The state's recorded public key (`<type> <base64>`), trusted strictly unless `accept_changed`.
    pub recorded_key: Option<String>,
    /// The state's recorded fingerprint, checked after first contact when no key text is recorded.
    pub recorded_fingerprint: Option<String>,
    /// `-replace` names the host, or its `ssh.hostKey` pin differs from the recorded key.
    pub accept_changed: bool,
    pub bin: String,
    pub data_dir: String,
    /// Remote paths of the spec's `files:` to report on.
    pub files: Vec<String>,
    /// Destinations to look beside for upload staging files an earlier run left.
    pub staging: Vec<String>,
    /// sha256 of the k0s.yaml k0sform would write on this controller: a host whose file has it
    /// is not asked for k0s's defaults (one start of k0s less per probe).
    pub want_config_sha256: Option<String>,
    /// The k0s.yaml to read (`desired::config_file`; the default for a state-only host).
    pub config: String,
    /// The binary as the state records it: not hashed again while its `stat` line is the same.
    pub known_binary: Option<crate::state::BinaryRecord>,
    /// A worker's token file (`desired::token_file`), reported on as decodable or not
    /// (`HostFacts::worker_token_file`).
    pub token_file: Option<String>,
    /// A controller of a spec with `dynamicConfig`: also read the ClusterConfig object.
    pub cluster_config: bool,
    /// Why the host must not be contacted at all (its recorded access is invalid).
    pub refused: Option<String>,
    /// How each hop of `target.bastion` is checked (hop order): the state's recorded bastion key,
    /// dropped when `-replace` names the bastion or its `ssh.hostKey` pin names another key.
    pub bastions: Vec<crate::transport::BastionTrust>,
}

/// How the bastion hops of `target` are checked, from the state's `bastions` and the options.
pub fn bastion_trust(
    target: &SshTarget,
    state: &State,
    replace: &[String],
) -> Vec<crate::transport::BastionTrust> {
    let mut out = Vec::new();
    let mut hop = target.bastion.as_deref();
    while let Some(b) = hop {
        let id = HostId::new(b.address.clone(), b.port);
        let rec = state.bastion(&id);
        let pin_moves = match (&b.host_key, rec) {
            (Some(pin), Some(r)) => pin != &r.host_key,
            _ => false,
        };
        out.push(crate::transport::BastionTrust {
            recorded_key: rec.map(|r| r.host_public_key.clone()),
            accept_changed: pin_moves || replace.iter().any(|s| id.matches(s)),
        });
        hop = b.bastion.as_deref();
    }
    out
}

/// Which hosts to probe and how, sorted by id. A host only in the state is reached as its
/// recorded `access` says (its spec entry when it was last recorded). States from before that
/// was recorded give the connection settings (user, keyPath, configPath, options, bastion) of
/// the spec's first host, else k0sctl's defaults (root, no key), and k0s's default binary path
/// and data dir.
pub fn plan_probes(spec: &Spec, state: &State, opts: &ProbeOptions) -> Vec<HostProbe> {
    let excluded = |id: &HostId| opts.exclude.iter().any(|s| id.matches(s));
    let replaced = |id: &HostId| opts.replace.iter().any(|s| id.matches(s));
    let mut out: Vec<HostProbe> = Vec::new();
    // Looked up per host: an index and a set, not scans (quadratic in hosts).
    let by_state = state.host_index();
    let mut planned: std::collections::HashSet<HostId> = std::collections::HashSet::new();
    let recorded = |id: &HostId| {
        by_state.get(id).map(|h| {
            (
                h.host_public_key.clone(),
                Some(h.host_key.clone()).filter(|k| !k.is_empty()),
            )
        })
    };
    for h in &spec.hosts {
        let id = h.id();
        if excluded(&id) || !planned.insert(id.clone()) {
            continue;
        }
        let (recorded_key, recorded_fingerprint) = recorded(&id).unwrap_or((None, None));
        // A pin that names another key than the recorded one is the user accepting the change.
        let pin_moves = match (&h.ssh.host_key, &recorded_fingerprint) {
            (Some(pin), Some(rec)) => pin != rec,
            _ => false,
        };
        out.push(HostProbe {
            accept_changed: replaced(&id) || pin_moves,
            target: h.ssh.clone(),
            recorded_key,
            recorded_fingerprint,
            bin: h.k0s_install_path.clone(),
            data_dir: h.data_dir.clone(),
            files: opts.files.get(&id).cloned().unwrap_or_default(),
            staging: opts.staging.get(&id).cloned().unwrap_or_default(),
            want_config_sha256: h
                .role
                .is_controller()
                .then(|| crate::hash::sha256_hex(k0s::desired::config_yaml(spec, h))),
            config: k0s::desired::config_file(h),
            known_binary: by_state.get(&id).and_then(|r| r.k0s_binary.clone()),
            token_file: (h.role == crate::spec::Role::Worker).then(|| k0s::desired::token_file(h)),
            cluster_config: spec.k0s.dynamic_config && h.role.is_controller(),
            refused: None,
            bastions: bastion_trust(&h.ssh, state, &opts.replace),
            id,
        });
    }
    for h in &state.hosts {
        let id = h.id();
        if excluded(&id) || !planned.insert(id.clone()) {
            continue;
        }
        // A host that left the spec is reached as its spec entry said when it was recorded,
        // checked like a spec entry and reduced to what a state may say (`state::access`).
        let (target, bin, data_dir, refused) = match crate::state::access::reach(h, spec) {
            Ok(r) => (r.ssh, r.k0s_install_path, r.data_dir, None),
            Err(problems) => (
                SshTarget::new(h.address.clone(), h.port),
                String::new(),
                String::new(),
                Some(format!(
                    "not contacted: the state's recorded access is not valid ({})",
                    problems.join("; ")
                )),
            ),
        };
        out.push(HostProbe {
            accept_changed: replaced(&id),
            bastions: bastion_trust(&target, state, &opts.replace),
            target,
            recorded_key: h.host_public_key.clone(),
            recorded_fingerprint: Some(h.host_key.clone()).filter(|k| !k.is_empty()),
            bin,
            data_dir,
            files: Vec::new(),
            staging: Vec::new(),
            want_config_sha256: None,
            config: k0s::desired::CONFIG_FILE.to_string(),
            known_binary: h.k0s_binary.clone(),
            token_file: None,
            cluster_config: false,
            refused,
            id,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// The probe of `id` among `plan_probes`' (sorted by id, one per host).
pub fn find_probe<'a>(probes: &'a [HostProbe], id: &HostId) -> Option<&'a HostProbe> {
    let i = probes.binary_search_by(|p| p.id.cmp(id)).ok()?;
    probes.get(i)
}

/// Probe every host of the spec and the state (except `-exclude`d ones), at most
/// `opts.parallelism` at a time. Connections stay open in `transport` for the rest of the run.
pub async fn probe_all<T: Transport + Clone + 'static>(
    spec: &Spec,
    state: &State,
    transport: &T,
    opts: &ProbeOptions,
) -> Reality {
    let plans = plan_probes(spec, state, opts);
    probe_planned(transport, &plans, BTreeMap::new(), opts.parallelism).await
}

/// How far a host's connection got: the keys it (and each bastion on the way) was accepted
/// with, or the probe result that ends there (unreachable, another key than recorded: nothing
/// ran on the host).
pub type Connection = Result<ConnectedHost, Probe>;

/// Only the key exchange with each host of `plans`, at most `parallelism` at a time: no command
/// runs on any host. `-trust-new-host-keys=false` looks at the keys before anything runs
/// (`plan::refuse_first_contact_keys`); `probe_planned` then goes on from these connections.
pub async fn connect_all<T: Transport + Clone + 'static>(
    transport: &T,
    plans: &[HostProbe],
    parallelism: usize,
) -> BTreeMap<HostId, Connection> {
    let limit = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for p in plans.iter().cloned() {
        let transport = transport.clone();
        let limit = limit.clone();
        tasks.spawn(async move {
            let _permit = limit.acquire_owned().await.ok();
            let c = connect_host(&transport, &p).await;
            (p.id, c)
        });
    }
    let mut out = BTreeMap::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((id, c)) => {
                out.insert(id, c);
            }
            // The host is connected again by `probe_planned`.
            Err(e) => tracing::error!("connect task failed: {e}"),
        }
    }
    out
}

/// Probe each host of `plans`, going on from its entry in `connected` (`connect_all`) or
/// connecting first.
pub async fn probe_planned<T: Transport + Clone + 'static>(
    transport: &T,
    plans: &[HostProbe],
    mut connected: BTreeMap<HostId, Connection>,
    parallelism: usize,
) -> Reality {
    let limit = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for p in plans.iter().cloned() {
        let transport = transport.clone();
        let limit = limit.clone();
        let conn = connected.remove(&p.id);
        tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only fails if it were.
            let _permit = limit.acquire_owned().await.ok();
            let conn = match conn {
                Some(c) => c,
                None => connect_host(&transport, &p).await,
            };
            let probe = match conn {
                Ok(c) => run_probe(&transport, &p, c).await,
                Err(probe) => probe,
            };
            HostReality { id: p.id, probe }
        });
    }
    let mut reality = Reality::default();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(h) => reality.hosts.push(h),
            Err(e) => tracing::error!("probe task failed: {e}"),
        }
    }
    // A task that panicked still leaves its host in the result, as unreachable.
    let probed: std::collections::BTreeSet<HostId> =
        reality.hosts.iter().map(|h| h.id.clone()).collect();
    for p in plans {
        if !probed.contains(&p.id) {
            reality.hosts.push(HostReality {
                id: p.id.clone(),
                probe: Probe::Unreachable {
                    error: "probe task failed".into(),
                },
            });
        }
    }
    reality.sort();
    reality
}

/// One host: connect (host key checked), run the batched probe, parse.
pub async fn probe_host<T: Transport>(transport: &T, p: &HostProbe) -> Probe {
    match connect_host(transport, p).await {
        Ok(c) => run_probe(transport, p, c).await,
        Err(probe) => probe,
    }
}

/// One host's key exchange (host key, bastions' and pins checked); nothing runs on it.
pub async fn connect_host<T: Transport>(transport: &T, p: &HostProbe) -> Connection {
    if let Some(why) = &p.refused {
        return Err(Probe::Unreachable { error: why.clone() });
    }
    let connected = match transport
        .connect(
            &p.id,
            &p.target,
            p.recorded_key.as_deref(),
            p.accept_changed,
            &p.bastions,
        )
        .await
    {
        Ok(c) => c,
        Err(TransportError::HostKeyChanged {
            expected, offered, ..
        }) => {
            return Err(Probe::HostKeyChanged {
                expected,
                offered,
                bastion: None,
            });
        }
        Err(TransportError::BastionKeyChanged {
            bastion,
            expected,
            offered,
            ..
        }) => {
            return Err(Probe::HostKeyChanged {
                expected,
                offered,
                bastion: Some(bastion),
            });
        }
        Err(e) => {
            return Err(Probe::Unreachable {
                error: e.to_string(),
            });
        }
    };
    // A state with a fingerprint but no key text (older state): the key was trusted on first use
    // this run, so compare fingerprints before running anything.
    if p.recorded_key.is_none()
        && !p.accept_changed
        && let Some(rec) = &p.recorded_fingerprint
        && crate::transport::host_keys_differ(rec, &connected.fingerprint)
    {
        transport.close(&p.id).await;
        return Err(Probe::HostKeyChanged {
            expected: rec.clone(),
            offered: connected.fingerprint,
            bastion: None,
        });
    }
    Ok(connected)
}

/// The batched probe on a connected host, parsed.
pub async fn run_probe<T: Transport>(
    transport: &T,
    p: &HostProbe,
    connected: ConnectedHost,
) -> Probe {
    let k0s::ProbeCommand { command, reader } = k0s::probe(
        &p.bin,
        &p.data_dir,
        true,
        p.want_config_sha256.as_deref(),
        p.known_binary.as_ref(),
        &p.files,
        &p.staging,
    )
    .reading_config_at(&p.config)
    .checking_token_file_at(p.token_file.as_deref().unwrap_or_default())
    .reading_cluster_config(p.cluster_config);
    let out = match transport.run(&p.id, command).await {
        Ok(o) => o,
        Err(e) => {
            return Probe::Unreachable {
                error: e.to_string(),
            };
        }
    };
    match reader.parse(&out) {
        Ok(mut facts) => {
            facts.host_key = connected.fingerprint;
            // A `localhost` host has no key (`transport::LOCAL_HOST_KEY`).
            facts.host_public_key = Some(connected.public_key).filter(|k| !k.is_empty());
            facts.bastions = connected
                .bastions
                .into_iter()
                .map(|b| crate::reality::BastionKey {
                    bastion: b.id,
                    host_key: b.fingerprint,
                    host_public_key: b.public_key,
                })
                .collect();
            Probe::Reached(Box::new(facts))
        }
        Err(e @ k0s::ProbeError::K0sNotAnswering(_)) => Probe::K0sNotAnswering {
            error: format!("{}: {e}", p.id),
        },
        Err(e) => Probe::Unreachable {
            error: format!("{}: probe failed: {e}", p.id),
        },
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RealityFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a probe result: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A host's facts fail the checks a live probe applies (`k0s::facts::check`).
    #[error("{path}: host {host}: {message}")]
    Invalid {
        path: PathBuf,
        host: crate::hostid::HostId,
        message: String,
    },
    /// An address, peer URL, member ID, machine-id or fingerprint in the file breaks its rule
    /// (`spec::recorded_field_problem`).
    #[error("{path}: {field}: {problem}")]
    Address {
        path: PathBuf,
        field: String,
        problem: String,
    },
}

/// What a probe file whose k0s.yaml texts were redacted says so with (its `redacted` field).
pub const REDACTED_NOTE: &str = "secret values in the hosts' k0s.yaml (passwords, tokens, DSNs, URL credentials) are replaced by (secret) and its sha256 is left out: a plan from this file shows them as changed";

/// Write `reality` as pretty JSON (hosts sorted), atomically (temp file + rename). The hosts'
/// k0s.yaml texts are written with their secrets redacted (`k0s::redact`) and without their
/// sha256 (of the real text: a dictionary away from a weak password); the file then says so
/// in its `redacted` field. Returns the hosts whose k0s.yaml was redacted.
pub fn save(reality: &Reality, path: &Path) -> Result<Vec<HostId>, RealityFileError> {
    let io = |source| RealityFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let json_err = |source| RealityFileError::Json {
        path: path.to_path_buf(),
        source,
    };
    let mut sorted = reality.clone();
    sorted.sort();
    let mut redacted = Vec::new();
    for h in &mut sorted.hosts {
        if let Probe::Reached(f) = &mut h.probe
            && let Some(text) = &f.config_text
        {
            let r = crate::k0s::redact::redact(text);
            if &r != text {
                f.config_text = Some(r);
                f.config_sha256 = None;
                redacted.push(h.id.clone());
            }
        }
    }
    let mut value = serde_json::to_value(&sorted).map_err(json_err)?;
    if !redacted.is_empty()
        && let Some(o) = value.as_object_mut()
    {
        o.insert("redacted".into(), REDACTED_NOTE.into());
    }
    let mut text = serde_json::to_string_pretty(&value).map_err(json_err)?;
    text.push('\n');
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(redacted)
}

/// Read a `Reality` written by `save` (or by hand, for tests and bug reports).
pub fn load(path: &Path) -> Result<Reality, RealityFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| RealityFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r: Reality = serde_json::from_str(&text).map_err(|source| RealityFileError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    // A probe file is as untrusted as the hosts it claims to describe. Its addresses (hosts,
    // the bastions they were reached through), peer URLs, member IDs, machine-ids and host key
    // fingerprints are recorded in the state, printed, and some reach commands.
    let value = serde_json::to_value(&r).map_err(|source| RealityFileError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some((field, problem)) = crate::spec::json_field_problem(&value) {
        return Err(RealityFileError::Address {
            path: path.to_path_buf(),
            field,
            problem,
        });
    }
    for h in &r.hosts {
        if let Probe::Reached(f) = &h.probe {
            crate::k0s::facts::check(f).map_err(|message| RealityFileError::Invalid {
                path: path.to_path_buf(),
                host: h.id.clone(),
                message,
            })?;
        }
    }
    r.sort();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reality::{ClusterView, HostFacts, MemberView};
    use crate::spec::{HostSpec, Role};
    use crate::state::HostState;

    fn spec_with(hosts: Vec<HostSpec>) -> Spec {
        let mut h0 = HostSpec::new(Role::Controller, SshTarget::new("127.0.0.1", 22), 1);
        h0.ssh.user = "ubuntu".into();
        let mut s = Spec {
            name: "t".into(),
            user: "admin".into(),
            hosts,
            ..Default::default()
        };
        if s.hosts.is_empty() {
            s.hosts.push(h0);
        }
        s
    }

    fn state_host(addr: &str, port: u16, fp: &str, key: Option<&str>) -> HostState {
        HostState {
            address: addr.into(),
            port,
            role: Role::Controller,
            node_name: None,
            machine_id: "m".into(),
            host_key: fp.into(),
            host_public_key: key.map(String::from),
            etcd: None,
            k0s_version: None,
            install_flags_sha256: None,
            config_sha256: None,
            k0s_binary: None,
            access: None,
        }
    }

    #[test]
    fn state_only_hosts_are_probed_as_recorded() {
        let a = HostSpec::new(Role::Controller, SshTarget::new("127.0.0.1", 22), 1);
        let spec = spec_with(vec![a]);
        let mut gone = HostSpec::new(Role::Worker, SshTarget::new("127.0.0.9", 2209), 2);
        gone.ssh.user = "ops".into();
        gone.ssh.key_path = Some("/keys/ops".into());
        let key = tempfile::NamedTempFile::new().unwrap();
        gone.ssh.bastion = Some(Box::new(SshTarget::new("127.0.0.50", 22)));
        gone.k0s_install_path = "/opt/bin/k0s".into();
        gone.data_dir = "/srv/k0s".into();
        let mut state = State::new();
        let mut rec = state_host("127.0.0.9", 2209, "SHA256:old", None);
        rec.access = Some(crate::state::HostAccess::of(&gone));
        state.upsert_host(rec);
        let plans = plan_probes(&spec, &state, &ProbeOptions::default());
        let p = &plans[1];
        assert_eq!(p.id, HostId::new("127.0.0.9", 2209));
        // /keys/ops is not on this machine: the first host's key (none) stands in.
        assert_eq!(p.target.key_path, None);
        assert_eq!(
            SshTarget {
                key_path: gone.ssh.key_path.clone(),
                ..p.target.clone()
            },
            gone.ssh
        );
        assert_eq!(p.bin, "/opt/bin/k0s");
        assert_eq!(p.data_dir, "/srv/k0s");
        assert_eq!(p.recorded_fingerprint.as_deref(), Some("SHA256:old"));

        // A recorded key that exists here is used as recorded.
        gone.ssh.key_path = Some(key.path().to_path_buf());
        let mut rec = state_host("127.0.0.9", 2209, "SHA256:old", None);
        rec.access = Some(crate::state::HostAccess::of(&gone));
        state.upsert_host(rec);
        let plans = plan_probes(&spec, &state, &ProbeOptions::default());
        assert_eq!(plans[1].target, gone.ssh);
    }

    /// States written before k0sform recorded `access`.
    #[test]
    fn state_only_hosts_are_probed_with_the_first_hosts_settings() {
        let mut a = HostSpec::new(Role::Controller, SshTarget::new("127.0.0.1", 2201), 1);
        a.ssh.user = "ubuntu".into();
        a.ssh.key_path = Some("/keys/id".into());
        a.ssh.host_key = Some("SHA256:pin".into());
        a.k0s_install_path = "/opt/k0s".into();
        let spec = spec_with(vec![a]);
        let mut state = State::new();
        state.upsert_host(state_host(
            "127.0.0.9",
            2209,
            "SHA256:old",
            Some("ssh-ed25519 AAAA"),
        ));
        let plans = plan_probes(&spec, &state, &ProbeOptions::default());
        assert_eq!(plans.len(), 2);
        let gone = &plans[1];
        assert_eq!(gone.id, HostId::new("127.0.0.9", 2209));
        assert_eq!(gone.target.address, "127.0.0.9");
        assert_eq!(gone.target.port, 2209);
        assert_eq!(gone.target.user, "ubuntu");
        assert_eq!(gone.target.key_path.as_deref(), Some(Path::new("/keys/id")));
        assert_eq!(
            gone.target.host_key, None,
            "the first host's pin is not inherited"
        );
        assert_eq!(gone.recorded_key.as_deref(), Some("ssh-ed25519 AAAA"));
        assert_eq!(gone.bin, crate::spec::DEFAULT_K0S_INSTALL_PATH);
        assert_eq!(gone.data_dir, crate::spec::DEFAULT_DATA_DIR);
        assert!(!gone.accept_changed);
        assert_eq!(plans[0].bin, "/opt/k0s");
    }

    #[test]
    fn replace_pins_and_exclude() {
        let mut a = HostSpec::new(Role::Controller, SshTarget::new("127.0.0.1", 2201), 1);
        a.ssh.host_key = Some("SHA256:new".into());
        let b = HostSpec::new(Role::Worker, SshTarget::new("127.0.0.2", 22), 2);
        let c = HostSpec::new(Role::Worker, SshTarget::new("127.0.0.3", 22), 3);
        let spec = spec_with(vec![a, b, c]);
        let mut state = State::new();
        state.upsert_host(state_host(
            "127.0.0.1",
            2201,
            "SHA256:old",
            Some("ssh-ed25519 A"),
        ));
        state.upsert_host(state_host(
            "127.0.0.2",
            22,
            "SHA256:b",
            Some("ssh-ed25519 B"),
        ));
        state.upsert_host(state_host("127.0.0.3", 22, "SHA256:c", None));
        let opts = ProbeOptions {
            replace: vec!["127.0.0.2".into()],
            exclude: vec!["127.0.0.3:22".into()],
            parallelism: 4,
            files: Default::default(),
            staging: Default::default(),
        };
        let plans = plan_probes(&spec, &state, &opts);
        let ids: Vec<String> = plans.iter().map(|p| p.id.to_string()).collect();
        assert_eq!(ids, ["127.0.0.1:2201", "127.0.0.2"]);
        assert!(
            plans[0].accept_changed,
            "pin names another key than recorded"
        );
        assert!(plans[1].accept_changed, "-replace");
        // A pin equal to the recorded key changes nothing.
        let mut spec2 = spec.clone();
        spec2.hosts[0].ssh.host_key = Some("SHA256:old".into());
        assert!(!plan_probes(&spec2, &state, &ProbeOptions::default())[0].accept_changed);
    }

    /// `-probe-out` files keep no k0s.yaml secrets (nor the sha256 of the real text), and say
    /// so; they still load.
    /// A reached host's minimal facts.
    fn facts_of(hostname: &str) -> HostFacts {
        HostFacts {
            machine_id: "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3".into(),
            hostname: hostname.into(),
            host_key: "SHA256:x".into(),
            ..Default::default()
        }
    }

    /// A probe of one reached host, 127.0.0.1:22.
    fn one_host(facts: HostFacts) -> (HostId, Reality) {
        let id = HostId::new("127.0.0.1", 22);
        let reality = Reality {
            hosts: vec![HostReality {
                id: id.clone(),
                probe: Probe::Reached(Box::new(facts)),
            }],
        };
        (id, reality)
    }

    #[test]
    fn probe_files_redact_the_config_secrets_and_say_so() {
        let config = "spec:\n  storage:\n    kine:\n      dataSource: mysql://k0s:hunter2@db:3306/k0s\n  extensions:\n    helm:\n      repositories:\n      - url: https://ci:t0ken@charts.example\n";
        let (id, reality) = one_host(HostFacts {
            config_sha256: Some(crate::hash::sha256_hex(config)),
            config_text: Some(config.into()),
            ..facts_of("c0")
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reality.json");
        assert_eq!(save(&reality, &path).unwrap(), vec![id.clone()]);
        let text = std::fs::read_to_string(&path).unwrap();
        for secret in ["hunter2", "t0ken", &crate::hash::sha256_hex(config)] {
            assert!(!text.contains(secret), "{secret} in\n{text}");
        }
        assert!(text.contains(REDACTED_NOTE), "{text}");
        let back = load(&path).unwrap();
        let f = back.facts(&id).unwrap();
        assert_eq!(f.config_sha256, None);
        assert!(
            f.config_text
                .as_deref()
                .unwrap()
                .contains("dataSource: (secret)\n"),
            "{f:?}"
        );
    }

    /// A worker's token file verdict reads back; one the probe never prints is refused, naming
    /// the file; a file without it (older probe) loads as none.
    #[test]
    fn token_file_verdict_in_a_probe_file_is_validated() {
        let (id, reality) = one_host(HostFacts {
            worker_token_file: Some(crate::reality::TokenFileState::Undecodable),
            ..facts_of("w0")
        });
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reality.json");
        save(&reality, &path).unwrap();
        assert_eq!(load(&path).unwrap(), reality);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\"worker_token_file\": \"undecodable\""),
            "{text}"
        );
        for bad in ["\"decodes; rm -rf /\"", "\"\"", "true", "{}"] {
            std::fs::write(&path, text.replace("\"undecodable\"", bad)).unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(e.contains("reality.json"), "{bad}: {e}");
        }
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["hosts"][0]["probe"]
            .as_object_mut()
            .unwrap()
            .remove("worker_token_file");
        std::fs::write(&path, json.to_string()).unwrap();
        assert_eq!(
            load(&path).unwrap().facts(&id).unwrap().worker_token_file,
            None
        );
    }

    #[test]
    fn reality_round_trips_through_a_file() {
        let facts = HostFacts {
            machine_id: "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3".into(),
            hostname: "c0".into(),
            host_key: "SHA256:x".into(),
            view: Some(ClusterView {
                cluster_uid: Some("7c3f".into()),
                members: vec![MemberView {
                    name: "c0".into(),
                    peer_url: "https://127.0.0.10:2380".into(),
                    member_id: Some("8e9e05c52164694d".into()),
                    invocation: None,
                }],
                ..Default::default()
            }),
            staging_leftovers: vec!["/usr/local/bin/k0s".into()],
            ..Default::default()
        };
        let reality = Reality {
            hosts: vec![
                HostReality {
                    id: HostId::new("127.0.0.2", 22),
                    probe: Probe::Unreachable {
                        error: "Connection refused".into(),
                    },
                },
                HostReality {
                    id: HostId::new("127.0.0.1", 22),
                    probe: Probe::Reached(Box::new(facts)),
                },
                HostReality {
                    id: HostId::new("127.0.0.3", 22),
                    probe: Probe::HostKeyChanged {
                        expected: "SHA256:a".into(),
                        offered: "SHA256:b".into(),
                        bastion: None,
                    },
                },
            ],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reality.json");
        assert_eq!(save(&reality, &path).unwrap(), Vec::<HostId>::new());
        let back = load(&path).unwrap();
        let mut sorted = reality.clone();
        sorted.sort();
        assert_eq!(back, sorted);
        let text = std::fs::read_to_string(&path).unwrap();
        // A probe file from before `staging_leftovers` loads (none found); a made-up entry
        // that is no destination path is refused.
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let probe = &mut json["hosts"][0]["probe"];
        assert_eq!(
            probe["staging_leftovers"],
            serde_json::json!(["/usr/local/bin/k0s"])
        );
        probe.as_object_mut().unwrap().remove("staging_leftovers");
        std::fs::write(&path, json.to_string()).unwrap();
        let facts = |r: &Reality| r.facts(&HostId::new("127.0.0.1", 22)).cloned().unwrap();
        assert_eq!(facts(&load(&path).unwrap()), {
            let mut f = facts(&sorted);
            f.staging_leftovers.clear();
            f
        });
        json["hosts"][0]["probe"]["staging_leftovers"] = serde_json::json!(["k0s\u{1b}[2K"]);
        std::fs::write(&path, json.to_string()).unwrap();
        assert!(matches!(load(&path), Err(RealityFileError::Invalid { .. })));
        // A probe file naming a host `--all` is refused like a live probe would be.
        std::fs::write(
            &path,
            text.replace("\"name\": \"c0\"", "\"name\": \"--all\""),
        )
        .unwrap();
        assert!(matches!(load(&path), Err(RealityFileError::Invalid { .. })));
        assert_eq!(back.hosts[0].id, HostId::new("127.0.0.1", 22));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"result\": \"unreachable\""), "{text}");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(load(&path), Err(RealityFileError::Json { .. })));
        assert!(matches!(
            load(&dir.path().join("missing.json")),
            Err(RealityFileError::Io { .. })
        ));
    }

    /// A probe file's host key fingerprints, machine-ids, member IDs and peer URLs are held to
    /// the state's rules when read (`spec::recorded_field_problem`): refused naming the file and
    /// the field, the value escaped.
    #[test]
    fn probe_file_with_hostile_facts_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let facts = |f: &dyn Fn(&mut HostFacts)| {
            let mut facts = HostFacts {
                machine_id: "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3".into(),
                hostname: "c0".into(),
                host_key: "SHA256:x".into(),
                view: Some(ClusterView {
                    members: vec![MemberView {
                        name: "c0".into(),
                        peer_url: "https://127.0.0.10:2380".into(),
                        member_id: Some("8e9e05c52164694d".into()),
                        invocation: None,
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            };
            f(&mut facts);
            Reality {
                hosts: vec![HostReality {
                    id: HostId::new("127.0.0.1", 22),
                    probe: Probe::Reached(Box::new(facts)),
                }],
            }
        };
        let hostile = "x\u{1b}[2K$(id)";
        for (field, reality) in [
            (".host_key: ", facts(&|f| f.host_key = hostile.into())),
            (".machine_id: ", facts(&|f| f.machine_id = hostile.into())),
            (
                ".members[0].peer_url: ",
                facts(&|f| f.view.as_mut().unwrap().members[0].peer_url = hostile.into()),
            ),
            (
                ".members[0].member_id: ",
                facts(&|f| f.view.as_mut().unwrap().members[0].member_id = Some(hostile.into())),
            ),
        ] {
            save(&reality, &path).unwrap();
            let err = load(&path).unwrap_err().to_string();
            assert!(err.contains("r.json: hosts[0]"), "{err}");
            assert!(
                err.contains(&format!("{field}`x\\x1b[2K$(id)` is not")),
                "{err}"
            );
        }
        // A peer URL with a path, or without a port, is not one either.
        for url in [
            "https://127.0.0.10:2380/x",
            "https://127.0.0.10",
            "ftp://127.0.0.10:2380",
        ] {
            save(
                &facts(&|f| f.view.as_mut().unwrap().members[0].peer_url = url.into()),
                &path,
            )
            .unwrap();
            let err = load(&path).unwrap_err().to_string();
            assert!(err.contains("peer_url"), "{url}: {err}");
        }
    }

    /// A probe file's addresses (a host's, a bastion it was reached through) are held to the
    /// spec's rule when read: refused naming the file and the field, shown escaped.
    #[test]
    fn probe_file_with_a_hostile_address_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        for (field, reality) in [
            (
                "hosts[0].id.address",
                Reality {
                    hosts: vec![HostReality {
                        id: HostId::new("\u{1b}[2Kx'$(id)'", 22),
                        probe: Probe::Unreachable { error: "e".into() },
                    }],
                },
            ),
            (
                "hosts[0].probe.bastion.address",
                Reality {
                    hosts: vec![HostReality {
                        id: HostId::new("10.0.0.1", 22),
                        probe: Probe::HostKeyChanged {
                            expected: "SHA256:a".into(),
                            offered: "SHA256:b".into(),
                            bastion: Some(HostId::new("\u{1b}[2Kx'$(id)'", 22)),
                        },
                    }],
                },
            ),
        ] {
            save(&reality, &path).unwrap();
            let err = load(&path).unwrap_err().to_string();
            assert!(
                err.contains(&format!("r.json: {field}: `\\x1b[2Kx'$(id)'` is neither")),
                "{err}"
            );
        }
    }
}
