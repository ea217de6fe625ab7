//! The k0sctl.yaml document exactly as a user writes it (k0sctl v0.32 field names and nesting).
//! This is what schema/spec.schema.json describes; loading checks a document against it, then
//! resolves it into `Spec` with k0sctl's defaults.

use crate::spec::Role;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A k0sctl cluster document (`apiVersion: k0sctl.k0sproject.io/v1beta1`, `kind: Cluster`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "k0sctl.yaml (as read by k0sform)")]
pub struct RawCluster {
    /// Always `k0sctl.k0sproject.io/v1beta1`.
    pub api_version: String,
    /// `Cluster` (any letter case).
    pub kind: String,
    #[serde(default)]
    pub metadata: Option<RawMetadata>,
    #[serde(default)]
    pub spec: Option<RawClusterSpec>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMetadata {
    /// Cluster name (default `k0s-cluster`).
    pub name: Option<String>,
    /// User name in the kubeconfig `k0sform kubeconfig` writes (default `admin`).
    pub user: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawClusterSpec {
    pub hosts: Option<Vec<RawHost>>,
    pub k0s: Option<RawK0s>,
    pub options: Option<RawOptions>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHost {
    /// `controller`, `controller+worker`, `worker` or `single` (a one-host cluster).
    pub role: Role,
    /// Connect with k0sform's SSH client.
    #[serde(default)]
    pub ssh: Option<RawSsh>,
    /// Connect with the system `ssh` and its ssh_config.
    #[serde(default, rename = "openSSH")]
    pub open_ssh: Option<RawOpenSsh>,
    /// Windows hosts over WinRM (k0sctl, experimental): not supported by k0sform.
    #[serde(default, rename = "winRM")]
    pub win_rm: Option<RawWinRm>,
    /// Run on the machine running k0sctl: not supported by k0sform.
    #[serde(default)]
    pub localhost: Option<RawLocalhost>,
    /// Network interface to take the private address from when privateAddress is not set
    /// (default: the interface of the first private global route, else the default route's).
    #[serde(default)]
    pub private_interface: Option<String>,
    /// IP address etcd peers and kubelet use (default: found on the host as k0sctl finds it,
    /// else the SSH address).
    #[serde(default)]
    pub private_address: Option<String>,
    /// Node name override (lower-cased).
    #[serde(default)]
    pub hostname: Option<String>,
    /// Extra `k0s install` flags.
    #[serde(default)]
    pub install_flags: Option<Vec<String>>,
    /// Environment for the k0s service.
    #[serde(default)]
    pub environment: Option<BTreeMap<String, String>>,
    /// Files to upload before installing.
    #[serde(default)]
    pub files: Option<Vec<RawUploadFile>>,
    /// Shell lines k0sctl runs around actions (k0sform does not run them yet).
    #[serde(default)]
    pub hooks: Option<RawHooks>,
    /// Force an OS module (ignored by k0sform).
    #[serde(default)]
    pub os: Option<String>,
    /// Download k0s locally and upload it (instead of downloading on the host).
    #[serde(default)]
    pub upload_binary: Option<bool>,
    /// A local k0s binary to upload (relative to the spec file's folder).
    #[serde(default)]
    pub k0s_binary_path: Option<String>,
    /// Custom download URL with `%v` (version), `%p` (arch), `%x` (extension) tokens.
    #[serde(default, rename = "k0sDownloadURL")]
    pub k0s_download_url: Option<String>,
    /// k0sform's extension: the sha256 the downloaded k0s binary must have (else the release's
    /// published `sha256sums.txt` is used).
    #[serde(default)]
    pub k0s_download_sha256: Option<String>,
    /// Remote path of the k0s binary (default `/usr/local/bin/k0s`).
    #[serde(default)]
    pub k0s_install_path: Option<String>,
    /// Use the k0s binary already on the host; never download or upgrade it.
    #[serde(default)]
    pub use_existing_k0s: Option<bool>,
    /// k0s data dir (default `/var/lib/k0s`).
    #[serde(default)]
    pub data_dir: Option<String>,
    /// kubelet root dir (needs k0s ≥ 1.32.1).
    #[serde(default)]
    pub kubelet_root_dir: Option<String>,
    /// `--no-taints` for a `controller+worker`.
    #[serde(default)]
    pub no_taints: Option<bool>,
    /// Decommission this host on the next apply.
    #[serde(default)]
    pub reset: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawSsh {
    /// IP address or DNS name.
    pub address: String,
    /// Login user (default `root`; others need passwordless sudo).
    #[serde(default)]
    pub user: Option<String>,
    /// Port (default 22).
    #[serde(default)]
    pub port: Option<u16>,
    /// Private key (relative to the spec file's folder, `~/` allowed).
    #[serde(default)]
    pub key_path: Option<String>,
    /// k0sform extension: pin the host key, `SHA256:<base64>` as `ssh-keygen -lf` prints it.
    #[serde(default)]
    pub host_key: Option<String>,
    /// Jump host.
    #[serde(default)]
    pub bastion: Option<Box<RawSsh>>,
    /// ssh_config options (`Key: value`).
    #[serde(default)]
    pub options: Option<BTreeMap<String, OptionValue>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOpenSsh {
    /// Address or a `Host` alias from the ssh_config.
    pub address: String,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub key_path: Option<String>,
    /// ssh_config file (relative to the spec file's folder).
    #[serde(default)]
    pub config_path: Option<String>,
    /// `-o Key=Value` options.
    #[serde(default)]
    pub options: Option<BTreeMap<String, OptionValue>>,
    /// Do not use ControlMaster (ignored: k0sform always multiplexes).
    #[serde(default)]
    pub disable_multiplexing: Option<bool>,
}

/// An ssh option value: text, a number or a boolean (`yes`/`no`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum OptionValue {
    Bool(bool),
    Int(i64),
    Text(String),
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWinRm {
    pub address: String,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default, rename = "useHTTPS")]
    pub use_https: Option<bool>,
    #[serde(default)]
    pub insecure: Option<bool>,
    #[serde(default, rename = "useNTLM")]
    pub use_ntlm: Option<bool>,
    #[serde(default)]
    pub ca_cert_path: Option<String>,
    #[serde(default)]
    pub cert_path: Option<String>,
    #[serde(default)]
    pub key_path: Option<String>,
    #[serde(default)]
    pub tls_server_name: Option<String>,
    #[serde(default)]
    pub bastion: Option<Box<RawSsh>>,
}

/// `localhost: true` or `localhost: {enabled: true}`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum RawLocalhost {
    Flag(bool),
    Block(RawLocalhostBlock),
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLocalhostBlock {
    pub enabled: Option<bool>,
}

impl RawLocalhost {
    pub fn enabled(&self) -> bool {
        match self {
            RawLocalhost::Flag(b) => *b,
            RawLocalhost::Block(b) => b.enabled.unwrap_or(false),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawUploadFile {
    /// A label for messages.
    pub name: Option<String>,
    /// Local file, directory or glob (relative to the spec file's folder; a glob's matches keep
    /// their path below the glob's base under `dstDir`), or an http(s) URL the host downloads
    /// (k0sctl's tokens: `%v` k0s version, `%p` architecture, `%x` binary extension, `%%`).
    pub src: Option<String>,
    /// k0sform's extension: the sha256 a URL `src` must have (k0sctl checks none). Without it
    /// the download is not verified; the state records the hash the host computed.
    pub sha256: Option<String>,
    /// Inline content instead of `src`.
    pub data: Option<String>,
    /// Remote directory.
    pub dst_dir: Option<String>,
    /// Remote file name (single file or data).
    pub dst: Option<String>,
    /// File mode, e.g. `"0644"` (quote it: unquoted 0644 is the decimal number 644 in YAML 1.2).
    pub perm: Option<Perm>,
    /// Mode of created directories (default `0755`).
    pub dir_perm: Option<Perm>,
    pub user: Option<String>,
    pub group: Option<String>,
}

/// A file mode as an octal string (`"0644"`) or a number.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Perm {
    Number(u32),
    Text(String),
}

/// `hooks.<action>.<before|after>: [shell lines]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHooks {
    pub connect: Option<RawHookStages>,
    pub apply: Option<RawHookStages>,
    pub install: Option<RawHookStages>,
    pub upgrade: Option<RawHookStages>,
    pub reset: Option<RawHookStages>,
    pub backup: Option<RawHookStages>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHookStages {
    pub before: Option<Vec<String>>,
    pub after: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawK0s {
    /// k0s version, e.g. `v1.33.4+k0s.0`. Unset: keep what runs (k0sform looks nothing up online).
    pub version: Option<String>,
    /// `stable` or `latest` (only used by k0sctl's online lookup).
    pub version_channel: Option<String>,
    /// Use k0s dynamic configuration.
    pub dynamic_config: Option<bool>,
    /// k0s ClusterConfig (free form).
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOptions {
    pub wait: Option<RawWait>,
    pub drain: Option<RawDrain>,
    pub evict_taint: Option<RawEvictTaint>,
    pub concurrency: Option<RawConcurrency>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWait {
    /// Wait for nodes to become ready (default true).
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDrain {
    /// Drain nodes before disruptive steps (default true).
    pub enabled: Option<bool>,
    /// Go duration, e.g. `2m` (default).
    pub grace_period: Option<String>,
    /// Go duration, e.g. `5m` (default).
    pub timeout: Option<String>,
    pub force: Option<bool>,
    pub ignore_daemon_sets: Option<bool>,
    pub delete_empty_dir_data: Option<bool>,
    pub pod_selector: Option<String>,
    /// Go duration.
    pub skip_wait_for_delete_timeout: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawEvictTaint {
    /// Taint nodes before draining them (default false).
    pub enabled: Option<bool>,
    /// Default `k0sctl.k0sproject.io/evict=true`.
    pub taint: Option<String>,
    /// Default `NoExecute`.
    pub effect: Option<String>,
    pub controller_workers: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConcurrency {
    /// Hosts worked on at once (default 30, 0 = unlimited).
    pub limit: Option<u32>,
    /// Share of workers disrupted at once, percent (default 10).
    pub worker_disruption_percent: Option<u32>,
    /// Uploads at once (default 5).
    pub uploads: Option<u32>,
}

/// The JSON Schema of a k0sctl.yaml as k0sform reads it (schema/spec.schema.json).
pub fn schema() -> schemars::Schema {
    schemars::schema_for!(RawCluster)
}
