//! The resolved cluster spec: what the rest of k0sform reads after loading, defaulting and
//! validation. Field meanings and defaults follow k0sctl (testdata/reference/k0sctl.md §1).

use crate::hostid::HostId;
pub use crate::version::K0sVersion;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Role {
    #[serde(rename = "controller")]
    Controller,
    #[serde(rename = "controller+worker")]
    ControllerWorker,
    #[serde(rename = "worker")]
    Worker,
    #[serde(rename = "single")]
    Single,
}

impl Role {
    /// Runs etcd (a controller of any kind).
    pub fn is_controller(self) -> bool {
        !matches!(self, Role::Worker)
    }
    /// Runs workloads (has a Node object).
    pub fn has_node(self) -> bool {
        !matches!(self, Role::Controller)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::ControllerWorker => "controller+worker",
            Role::Worker => "worker",
            Role::Single => "single",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How k0sform reaches a host over SSH (from `ssh:` or `openSSH:`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SshTarget {
    pub address: String,
    pub port: u16,
    pub user: String,
    /// Absolute path (resolved against the spec file's folder).
    pub key_path: Option<PathBuf>,
    /// An ssh_config file to use (`openSSH.configPath`), absolute.
    pub config_path: Option<PathBuf>,
    /// Extra `-o Key=Value` options (`openSSH.options` / `ssh.options`), sorted by key.
    pub options: BTreeMap<String, String>,
    /// ProxyJump host, if any.
    pub bastion: Option<Box<SshTarget>>,
    /// Pinned host key fingerprint (`ssh.hostKey: "SHA256:…"`), k0sform's own extension.
    pub host_key: Option<String>,
    /// From an `openSSH:` block: connect with the system `ssh`, honouring `config_path` (the
    /// address may be a `Host` alias from it). `user`/`port` hold k0sctl's defaults (root, 22)
    /// when the block does not set them.
    pub openssh: bool,
    /// `localhost: true` (or `{enabled: true}`): the host is the machine k0sform runs on, and
    /// its commands run here (`ssh::local`), as root or through `sudo -n`, never over SSH. The
    /// address is 127.0.0.1 and the port 22, as k0sctl reports them (rig
    /// `protocol/localhost/connection.go` `IPAddress`, k0sctl `cluster/host.go` `Address`); the
    /// other connection fields are unused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub localhost: bool,
}

impl SshTarget {
    pub fn needs_sudo(&self) -> bool {
        self.user != "root"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostSpec {
    pub role: Role,
    pub ssh: SshTarget,
    pub private_address: Option<String>,
    /// `privateInterface`: where k0sctl looks for the private address when none is given.
    pub private_interface: Option<String>,
    /// Set when `private_address` was not in the spec but found on the host as k0sctl finds
    /// it (`k0s::private_address`): the interface it is on.
    pub private_address_detected_on: Option<String>,
    pub hostname: Option<String>,
    /// Extra `k0s install` flags as written.
    pub install_flags: Vec<String>,
    pub environment: BTreeMap<String, String>,
    /// Local k0s binary to upload (absolute path).
    pub k0s_binary_path: Option<PathBuf>,
    /// `k0sDownloadURL` as written (tokens `%v %p %x %%` expanded per host and version).
    pub k0s_download_url: Option<String>,
    /// `k0sDownloadSha256`, k0sform's extension: the sha256 a downloaded binary must have,
    /// instead of the release's published checksum.
    pub k0s_download_sha256: Option<String>,
    /// `uploadBinary`: download k0s on the machine running k0sform (cached) and upload it.
    /// Without it and without `k0sBinaryPath`, the host downloads k0s itself.
    pub upload_binary: bool,
    pub use_existing_k0s: bool,
    /// Remote path of the k0s binary (default /usr/local/bin/k0s).
    pub k0s_install_path: String,
    /// Remote k0s data dir (default /var/lib/k0s).
    pub data_dir: String,
    pub kubelet_root_dir: Option<String>,
    pub no_taints: bool,
    /// `reset: true`: decommission this host.
    pub reset: bool,
    /// 1-based index in spec.hosts (for messages).
    pub index: usize,
    /// Files to upload (`files:`), local sources resolved to absolute paths and checked to
    /// exist; `files::expand` turns them into remote files.
    pub files: Vec<UploadFile>,
    /// Shell lines to run around actions (`hooks:`), as written: the planner turns `install`,
    /// `upgrade`, `reset`, `apply` and `connect.after` hooks into `RunHooks` steps; `backup`
    /// hooks run around `k0sform backup`; `connect.before` is not run (loading warns).
    pub hooks: Hooks,
    /// `os:` override as written (k0sform ignores it; loading warns).
    pub os: Option<String>,
}

/// One `files:` entry, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UploadFile {
    /// `name:` (a label for messages), else the source.
    pub name: String,
    pub source: FileSource,
    /// Remote file path (`dst`, joined with `dstDir` when relative), for a single file or inline data.
    pub dst: Option<String>,
    /// Remote directory (`dstDir`), for a directory source or a file kept under its own name.
    pub dst_dir: Option<String>,
    /// Octal file mode like `0644` (`perm`); None = the local file's mode.
    pub perm: Option<String>,
    /// Octal mode for created directories (`dirPerm`, default `0755`).
    pub dir_perm: String,
    pub user: Option<String>,
    pub group: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum FileSource {
    /// A local file (absolute path).
    File(PathBuf),
    /// A local directory uploaded recursively (absolute path).
    Directory(PathBuf),
    /// A glob's matches (k0sctl `cluster/uploadfile.go` `glob`): the folder before the first
    /// glob character (absolute) and each matched file's path below it (`/`-separated,
    /// sorted), which is also its path below `dstDir`.
    Glob { base: PathBuf, files: Vec<String> },
    /// An http(s) URL the host downloads (k0sctl `phase/uploadfiles.go` `uploadURL`), with
    /// k0sctl's `%v` `%p` `%x` tokens still in it, and the sha256 it must have (`sha256`,
    /// k0sform's extension; None: not verified).
    Url { url: String, sha256: Option<String> },
    /// Inline content (`data:`).
    Inline(String),
}

/// `hooks:` action → stage → shell lines. Keys are k0sctl's: actions `connect apply install
/// upgrade reset backup`, stages `before after`.
pub type Hooks = BTreeMap<String, BTreeMap<String, Vec<String>>>;

impl SshTarget {
    /// A target with k0sctl's defaults (user root, no key, no options).
    pub fn new(address: impl Into<String>, port: u16) -> Self {
        SshTarget {
            address: address.into(),
            port,
            user: "root".into(),
            key_path: None,
            config_path: None,
            options: BTreeMap::new(),
            bastion: None,
            host_key: None,
            openssh: false,
            localhost: false,
        }
    }

    /// The target of a `localhost` host: this machine, at the address k0sctl gives it.
    pub fn local() -> Self {
        SshTarget {
            localhost: true,
            ..SshTarget::new(LOCALHOST_ADDRESS, 22)
        }
    }
}

/// The address of a `localhost` host, as rig reports it (`protocol/localhost/connection.go`
/// `IPAddress`) and k0sctl uses it (SANs, join address, private address detection).
pub const LOCALHOST_ADDRESS: &str = "127.0.0.1";

/// The "host key" of a `localhost` host, recorded as the state's `host_key`: it is reached
/// without SSH, so it has no key, and its machine-id alone says which machine it is
/// (`transport::host_keys_differ`).
pub const LOCAL_HOST_KEY: &str = "local";

impl HostSpec {
    /// A host with k0sctl's defaults for everything but role and SSH target (handy in tests).
    pub fn new(role: Role, ssh: SshTarget, index: usize) -> Self {
        HostSpec {
            role,
            ssh,
            private_address: None,
            private_interface: None,
            private_address_detected_on: None,
            hostname: None,
            install_flags: Vec::new(),
            environment: BTreeMap::new(),
            k0s_binary_path: None,
            k0s_download_url: None,
            k0s_download_sha256: None,
            upload_binary: false,
            use_existing_k0s: false,
            k0s_install_path: DEFAULT_K0S_INSTALL_PATH.into(),
            data_dir: DEFAULT_DATA_DIR.into(),
            kubelet_root_dir: None,
            no_taints: false,
            reset: false,
            index,
            files: Vec::new(),
            hooks: Hooks::new(),
            os: None,
        }
    }

    /// `installFlags` split into argv words the way a shell would split k0sctl's joined flag
    /// line (quotes removed), so every word can be passed as one quoted argument.
    pub fn install_args(&self) -> Vec<String> {
        self.install_flags
            .iter()
            .flat_map(|f| crate::spec::shell_words(f).unwrap_or_else(|_| vec![f.clone()]))
            .collect()
    }

    pub fn id(&self) -> HostId {
        HostId::new(self.ssh.address.clone(), self.ssh.port)
    }

    /// The Node name the host's kubelet registers, when the spec sets one: `hostname` (k0sctl
    /// passes it as written in `--hostname-override`), else a `--hostname-override` in the
    /// `--kubelet-extra-args` of `installFlags` (k0s `cmd/worker/worker.go` `GetNodeName`);
    /// lower-cased, as kubelet does (k8s `pkg/util/node` `GetHostname`).
    pub fn node_name(&self) -> Option<String> {
        let name = self
            .hostname
            .clone()
            .or_else(|| self.hostname_override_flag())?;
        Some(name.trim().to_lowercase()).filter(|n| !n.is_empty())
    }

    /// The `--hostname-override` in the `--kubelet-extra-args` of `installFlags`, as written.
    pub fn hostname_override_flag(&self) -> Option<String> {
        let extra = crate::install_flags::parse_words(&self.install_args())
            .into_iter()
            .find(|f| f.name == "kubelet-extra-args")?
            .value?;
        let words = crate::spec::shell_words(&extra).ok()?;
        words
            .iter()
            .enumerate()
            .find_map(|(i, w)| match w.strip_prefix("--hostname-override") {
                Some(v) if v.starts_with('=') => Some(v[1..].to_string()),
                Some("") => words.get(i + 1).cloned(),
                _ => None,
            })
    }
    /// The address etcd peers use: privateAddress, else the SSH address.
    pub fn peer_address(&self) -> &str {
        self.private_address.as_deref().unwrap_or(&self.ssh.address)
    }
}

/// Remote k0s binary path when `k0sInstallPath` is not set (k0s's default `k0sInstallPath`,
/// one definition).
pub const DEFAULT_K0S_INSTALL_PATH: &str = "/usr/local/bin/k0s";
/// Remote k0s data dir when `dataDir` is not set (k0s's default, one definition).
pub const DEFAULT_DATA_DIR: &str = "/var/lib/k0s";
/// Cluster name when `metadata.name` is not set.
pub const DEFAULT_CLUSTER_NAME: &str = "k0s-cluster";
/// Kubeconfig user name when `metadata.user` is not set.
pub const DEFAULT_KUBECONFIG_USER: &str = "admin";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct K0sSpec {
    /// Desired k0s version, e.g. `v1.33.4+k0s.0`. None = keep what runs; a new cluster gets
    /// the newest release of `version_channel` (looked up by `engine`, not here).
    pub version: Option<K0sVersion>,
    /// `stable` (default) or `latest` (pre-releases too), as k0sctl.
    pub version_channel: Option<String>,
    pub dynamic_config: bool,
    /// `spec.k0s.config` merged with any ClusterConfig documents, as JSON. None = k0s defaults.
    pub config: Option<serde_json::Value>,
    /// Not from the file: a controller of the spec runs k0s (set after the probe by
    /// `k0s::desired::note_running_controllers`). With `dynamic_config`, every controller then
    /// gets only the node part of the config.
    #[serde(skip)]
    pub controllers_run: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Options {
    pub wait: bool,
    pub drain: DrainOptions,
    pub concurrency_limit: usize,
    pub worker_disruption_percent: u32,
    pub concurrent_uploads: usize,
    /// `evictTaint` when enabled: the taint k0sctl puts on a Node before draining it.
    #[serde(default)]
    pub evict_taint: Option<EvictTaint>,
}

/// k0sctl's `spec.options.evictTaint` (pkg/apis/k0sctl.k0sproject.io/v1beta1/cluster/options.go
/// `EvictTaintOption`), enabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvictTaint {
    /// `key=value` (default `k0sctl.k0sproject.io/evict=true`).
    pub taint: String,
    /// `NoExecute` (default), `NoSchedule` or `PreferNoSchedule`.
    pub effect: String,
    /// Also taint nodes of controller+worker hosts (k0sctl: `controllerWorkers`, default false).
    pub controller_workers: bool,
}

impl EvictTaint {
    /// `key=value:Effect`, as `kubectl taint` takes it (k0sctl's `EvictTaintOption.String`).
    pub fn spec(&self) -> String {
        format!("{}:{}", self.taint, self.effect)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DrainOptions {
    pub enabled: bool,
    /// Seconds.
    pub grace_period: u64,
    /// Seconds.
    pub timeout: u64,
    pub force: bool,
    pub ignore_daemon_sets: bool,
    pub delete_empty_dir_data: bool,
    pub pod_selector: Option<String>,
    /// Seconds (`skipWaitForDeleteTimeout`); 0 = not set.
    pub skip_wait_for_delete_timeout: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            wait: true,
            drain: DrainOptions {
                enabled: true,
                grace_period: 120,
                timeout: 300,
                force: true,
                ignore_daemon_sets: true,
                delete_empty_dir_data: true,
                pod_selector: None,
                skip_wait_for_delete_timeout: 0,
            },
            concurrency_limit: 30,
            worker_disruption_percent: 10,
            concurrent_uploads: 5,
            evict_taint: None,
        }
    }
}

/// The whole resolved spec. `Default` is an empty spec (no name, no hosts), for code that builds
/// one field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spec {
    /// metadata.name (default `k0s-cluster`).
    pub name: String,
    /// metadata.user: the user name in the kubeconfig `k0sform kubeconfig` writes (default
    /// `admin`, as k0sctl).
    pub user: String,
    /// Hosts in file order.
    pub hosts: Vec<HostSpec>,
    pub k0s: K0sSpec,
    pub options: Options,
    /// Extra Kubernetes manifests from multi-document files (applied after the cluster is up).
    pub manifests: Vec<serde_json::Value>,
    /// The values the spec took from the environment (`$VAR`, `${VAR}`), as (name, value),
    /// longest value first: output shows them as `${NAME}` (`shown`) unless `-show-secrets`,
    /// so a secret passed in through the environment stays out of plans, events and logs.
    /// Values shorter than `MIN_SHOWN_VALUE` characters are left alone. Never serialized.
    #[serde(skip)]
    #[schemars(skip)]
    pub env_values: Vec<(String, String)>,
}

/// Environment values shorter than this are not replaced by `${NAME}` in output: a 1- or
/// 2-character value (`1`, `on`) is no secret, and replacing it would garble every line.
pub const MIN_SHOWN_VALUE: usize = 3;

/// Environment values (name, value) as `shown_with` replaces them: those of at least
/// `MIN_SHOWN_VALUE` characters, longest first (a value containing another is replaced whole).
pub fn shown_values(values: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = values
        .into_iter()
        .filter(|(_, v)| v.chars().count() >= MIN_SHOWN_VALUE)
        .collect();
    v.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    v.dedup();
    v
}

/// `text` with every value of `values` (from `shown_values`) written back as its `${NAME}`.
pub fn shown_with(values: &[(String, String)], text: &str) -> String {
    let mut out = text.to_string();
    for (name, value) in values {
        if value.chars().count() >= MIN_SHOWN_VALUE && out.contains(value.as_str()) {
            out = out.replace(value.as_str(), &format!("${{{name}}}"));
        }
    }
    out
}

impl Spec {
    /// `text` (built from the spec) as it may be shown: every value the spec took from the
    /// environment written back as the `${NAME}` it came from.
    pub fn shown(&self, text: &str) -> String {
        shown_with(&self.env_values, text)
    }

    /// Record the environment values the spec was expanded with (see `env_values`).
    pub fn set_env_values(&mut self, values: impl IntoIterator<Item = (String, String)>) {
        self.env_values = shown_values(values);
    }

    pub fn host(&self, id: &HostId) -> Option<&HostSpec> {
        // Compared in place: building a HostId per host made the planner's per-host lookups
        // allocate n² strings (a third of a 5,000-host plan's time).
        self.hosts
            .iter()
            .find(|h| h.ssh.port == id.port && h.ssh.address == id.address)
    }
    /// `host` for many lookups: the hosts indexed once (`HostIndex`).
    pub fn host_index(&self) -> crate::hostid::HostIndex<'_, HostSpec> {
        crate::hostid::HostIndex::new(
            self.hosts
                .iter()
                .map(|h| ((h.ssh.address.as_str(), h.ssh.port), h)),
        )
    }
    pub fn controllers(&self) -> impl Iterator<Item = &HostSpec> {
        self.hosts.iter().filter(|h| h.role.is_controller())
    }
}
