//! The probe's one batched, read-only remote command per host, and its parser into `HostFacts`.
//!
//! The script prints one line per section: `K0SFORM <name> <exit code> o:<base64 stdout>
//! e:<base64 stderr>`, so no output (a k0s.yaml, an error text) can be mistaken for a delimiter.
//! Cluster queries run only when `k0s status` reports a running controller, each under `timeout`.

use super::parse::{
    K0sFailure, classify, is_not_running, parse_etcd_members, parse_member_list,
    parse_names_checked, parse_nodes, parse_status, parse_uid, parse_version,
};
use super::{EtcdMemberObject, K0sError};
use crate::reality::{ClusterView, HostFacts, MemberView, ServiceKind};
use crate::transport::{CommandOutput, RemoteCommand};
use base64::Engine;
use std::collections::BTreeMap;
use std::time::Duration;

/// The k0s.yaml the probe reads (the one k0sform writes).
pub const CONFIG_PATH: &str = super::desired::CONFIG_FILE;

/// Hard limit for the whole probe of one host (each inner query has its own, shorter one).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// kubectl runs as k0sctl runs it (`env KUBECONFIG=<dd>/pki/admin.conf k0s kubectl …`).
/// Arguments: $1 k0s binary, $2 data dir, $3 "1" to ask a running controller for its view,
/// $4 the k0s.yaml path.
const SCRIPT: &str = r#"bin=$1 dd=$2 view=$3 cfg=$4
b64() { base64 | tr -d '\n'; }
t() { timeout -k 2 "$@"; }
kc() { t 10 env KUBECONFIG="$dd/pki/admin.conf" "$bin" kubectl "$@"; }
units() {
  for u in k0scontroller k0sworker k0sserver; do
    if [ -e "/etc/systemd/system/$u.service" ] || [ -e "/etc/init.d/$u" ]; then echo "$u"; fi
  done
}
exec 3>&1
# emit NAME CMD...: run CMD, print its exit code, stdout and stderr (base64) on one line. Empty
# output is not piped through base64 (three processes less per section: most stderrs are empty).
# The sub-shell exits 10 when CMD succeeded and printed a running controller's status, 11 for
# any other output naming a Version (a running worker's status).
emit() {
  _n=$1; shift
  _e=$( { _o=$("$@" 2>&4); _r=$?
          _b=; [ -z "$_o" ] || _b=$(printf '%s' "$_o" | b64)
          printf 'K0SFORM %s %s o:%s ' "$_n" "$_r" "$_b" >&3
          if [ "$_r" = 0 ]; then
            case $_o in *'"Role": "controller"'*|*'"Role":"controller"'*|*'"Role": "server'*|*'"Role":"server'*) exit 10;; esac
            case $_o in *'"Version"'*) exit 11;; esac
          fi
          exit 0; } 4>&1 )
  _c=$?
  [ -z "$_e" ] || _e=$(printf '%s' "$_e" | b64)
  printf 'e:%s\n' "$_e"
  return $_c
}
emit machine_id cat /etc/machine-id
emit hostname uname -n
emit arch uname -m
emit os_release cat /etc/os-release
emit units units
emit etcd_data test -e "$dd/etcd/member/snap/db"
if [ -f "$cfg" ]; then
  emit config_sha256 sha256sum "$cfg"
  emit config cat "$cfg"
fi
if [ -e "$bin" ]; then
  emit binary_sha256 sha256sum "$bin"
  emit status t 10 "$bin" status -o json
  running=$?
  # A running k0s names its version in the status: `k0s version` would cost one more start of
  # the binary on every host (a third of a worker's probe).
  [ "$running" = 0 ] && emit version t 10 "$bin" version
  if [ "$running" = 10 ] && [ "$view" = 1 ]; then
    emit member_list t 10 "$bin" etcd member-list --data-dir="$dd"
    emit etcd_members kc get etcdmembers.etcd.k0sproject.io -o json
    emit cluster_uid kc get namespace kube-system -o json
    emit nodes kc get nodes -o json
    emit control_nodes kc get controlnodes.autopilot.k0sproject.io -o json
  fi
fi
echo "K0SFORM end 0 o: e:"
"#;

/// The batched probe command for one host. `want_view`: ask a running controller for its view
/// of the cluster (member list with IDs, uid, nodes, control nodes).
pub fn probe(bin: &str, data_dir: &str, want_view: bool) -> RemoteCommand {
    RemoteCommand::new([
        "sh",
        "-c",
        SCRIPT,
        "k0sform-probe",
        bin,
        data_dir,
        if want_view { "1" } else { "0" },
        CONFIG_PATH,
    ])
    .timeout(PROBE_TIMEOUT)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    rc: i32,
    out: String,
    err: String,
}

impl Section {
    fn ok(&self) -> bool {
        self.rc == 0
    }
    fn as_output(&self) -> CommandOutput {
        CommandOutput {
            status: Some(self.rc),
            stdout: self.out.clone().into_bytes(),
            stderr: self.err.clone().into_bytes(),
        }
    }
    /// The line to show when the section failed.
    fn error(&self) -> String {
        let line = self.as_output().error_line();
        if line.is_empty() {
            format!("exit code {}", self.rc)
        } else {
            line
        }
    }
}

fn sections(stdout: &str) -> Result<BTreeMap<String, Section>, K0sError> {
    const WHAT: &str = "probe output";
    let b64 = base64::engine::general_purpose::STANDARD;
    let decode = |field: &str, prefix: &str| -> Result<String, K0sError> {
        let data = field
            .strip_prefix(prefix)
            .ok_or_else(|| K0sError::parse(WHAT, format!("malformed field {field:?}")))?;
        let bytes = b64
            .decode(data)
            .map_err(|e| K0sError::parse(WHAT, format!("bad base64: {e}")))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let mut map = BTreeMap::new();
    for line in stdout.lines() {
        let mut f = line.split(' ');
        if f.next() != Some("K0SFORM") {
            continue;
        }
        let (Some(name), Some(rc), Some(o), Some(e)) = (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(K0sError::parse(WHAT, format!("malformed line {line:?}")));
        };
        let rc: i32 = rc
            .parse()
            .map_err(|_| K0sError::parse(WHAT, format!("bad exit code in {line:?}")))?;
        map.insert(
            name.to_string(),
            Section {
                rc,
                out: decode(o, "o:")?,
                err: decode(e, "e:")?,
            },
        );
    }
    if !map.contains_key("end") {
        return Err(K0sError::parse(
            WHAT,
            "the probe script did not finish (no end marker)",
        ));
    }
    Ok(map)
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

/// Join `k0s etcd member-list` (name → URL) with the EtcdMember objects (IDs). An object gives
/// its ID to the member of the same name only if its peer address matches the member's URL (an
/// object can be stale: kept after leaving, or from the host's previous life).
pub fn merge_members(
    list: &BTreeMap<String, String>,
    objects: &[EtcdMemberObject],
) -> Vec<MemberView> {
    let mut members: Vec<MemberView> = list
        .iter()
        .map(|(name, url)| {
            let member_id = objects
                .iter()
                .find(|o| {
                    !name.is_empty()
                        && &o.name == name
                        && o.peer_address
                            .as_deref()
                            .is_none_or(|a| a == peer_url_host(url))
                })
                .and_then(|o| o.member_id.clone());
            MemberView {
                name: name.clone(),
                peer_url: url.clone(),
                member_id,
            }
        })
        .collect();
    members.sort_by(|a, b| (&a.name, &a.peer_url).cmp(&(&b.name, &b.peer_url)));
    members
}

fn view(s: &BTreeMap<String, Section>) -> Option<ClusterView> {
    let ml = s.get("member_list")?;
    let mut v = ClusterView::default();
    let list = if ml.ok() {
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
}

/// Turn the probe command's output into `HostFacts` (the SSH key fields are the caller's).
pub fn parse_probe(out: &CommandOutput) -> Result<HostFacts, ProbeError> {
    let s = sections(&out.stdout_str()).map_err(|e| {
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
                "cannot read /etc/machine-id: {}",
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
    let units = text("units").unwrap_or_default();
    f.service = if units
        .lines()
        .any(|u| u == "k0scontroller" || u == "k0sserver")
    {
        Some(ServiceKind::Controller)
    } else if units.lines().any(|u| u == "k0sworker") {
        Some(ServiceKind::Worker)
    } else {
        None
    };
    f.config_sha256 = text("config_sha256").and_then(|v| first_word(&v));
    f.config_text = sec("config").filter(|x| x.ok()).map(|x| {
        // The shell's command substitution drops trailing newlines; files end with one.
        let mut t = x.out.clone();
        if !t.is_empty() && !t.ends_with('\n') {
            t.push('\n');
        }
        t
    });

    if let Some(st) = sec("status") {
        if st.ok() {
            match parse_status(&st.out) {
                Ok(status) => f.status = Some(status),
                Err(K0sError::NotRunning) => {}
                Err(e) => return Err(e.into()),
            }
        } else {
            let o = st.as_output();
            // Anything but "not running" (or a binary that cannot run) leaves the state unknown:
            // guessing "stopped" could make the planner rejoin a healthy controller.
            if !is_not_running(&o) && classify(&o) != Some(K0sFailure::BinaryMissing) {
                return Err(ProbeError::Host(format!(
                    "k0s status failed: {}",
                    st.error()
                )));
            }
        }
    }
    // `version` is skipped while k0s runs: the running binary's version stands for it (a
    // replaced binary still shows in k0s_binary_sha256).
    if sec("version").is_none() {
        f.k0s_version = f.status.as_ref().map(|st| st.version.clone());
    }
    f.view = view(&s);
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run_script(bin: &str, dd: &str, view: bool, cfg: &str) -> CommandOutput {
        let cmd = probe(bin, dd, view);
        let mut argv = cmd.argv.clone();
        *argv.last_mut().unwrap() = cfg.to_string();
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        CommandOutput {
            status: out.status.code(),
            stdout: out.stdout,
            stderr: out.stderr,
        }
    }

    /// A fake k0s (shell script) answering like a running controller, for running the real
    /// probe script locally.
    fn fake_k0s(dir: &std::path::Path, status_json: &str) -> String {
        let bin = dir.join("k0s");
        let script = format!(
            r#"#!/bin/sh
case "$1" in
  version) echo called >>"{calls}"; echo v1.33.4+k0s.0 ;;
  status) cat <<'EOF'
{status_json}
EOF
  ;;
  etcd) echo '{{"members":{{"c0":"https://127.0.0.10:2380","c1":"https://127.0.0.11:2380"}}}}' ;;
  kubectl)
    shift
    [ "$KUBECONFIG" = "{dd}/pki/admin.conf" ] || {{ echo "Error: bad KUBECONFIG" >&2; exit 1; }}
    case "$2" in
      etcdmembers.etcd.k0sproject.io) echo '{{"items":[{{"metadata":{{"name":"c0"}},"status":{{"peerAddress":"127.0.0.10","memberID":"8e9e05c52164694d","conditions":[{{"type":"Joined","status":"True"}}]}}}},{{"metadata":{{"name":"c1"}},"status":{{"peerAddress":"127.0.0.99","memberID":"1111111111111111"}}}}]}}' ;;
      namespace) echo '{{"metadata":{{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}}}}' ;;
      nodes) echo '{{"items":[{{"metadata":{{"name":"c0"}},"status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}]}}' ;;
      controlnodes.autopilot.k0sproject.io) echo "Error from server: the server could not find the requested resource" >&2; exit 1 ;;
    esac ;;
esac
"#,
            dd = dir.join("data").display(),
            calls = dir.join("version-calls").display()
        );
        std::fs::write(&bin, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin.display().to_string()
    }

    const RUNNING: &str = r#"{
   "Version": "v1.33.4+k0s.0",
   "Pid": 42,
   "Role": "controller",
   "Workloads": false,
   "SingleNode": false,
   "Args": ["/usr/local/bin/k0s", "controller", "--config=/etc/k0s/k0s.yaml"],
   "ClusterConfig": {"spec": {"storage": {"etcd": {"peerAddress": "127.0.0.10"}}}}
}"#;

    #[test]
    fn probe_script_on_a_running_controller() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_k0s(dir.path(), RUNNING);
        let dd = dir.path().join("data");
        std::fs::create_dir_all(dd.join("etcd/member/snap")).unwrap();
        std::fs::write(dd.join("etcd/member/snap/db"), "").unwrap();
        let cfg = dir.path().join("k0s.yaml");
        std::fs::write(
            &cfg,
            "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n'quoted': \"$(x)\"\n",
        )
        .unwrap();
        let out = run_script(&bin, dd.to_str().unwrap(), true, cfg.to_str().unwrap());
        assert!(out.success(), "{}", out.stderr_str());
        assert!(
            !dir.path().join("version-calls").exists(),
            "`k0s version` ran although the status named the version"
        );
        let f = parse_probe(&out).unwrap();
        assert!(!f.machine_id.is_empty());
        assert!(!f.hostname.is_empty());
        assert!(!f.arch.is_empty());
        assert_eq!(f.k0s_version.as_deref(), Some("v1.33.4+k0s.0"));
        assert_eq!(f.k0s_binary_sha256.as_ref().map(String::len), Some(64));
        assert!(f.has_etcd_data);
        assert_eq!(
            f.config_text.as_deref(),
            Some(
                "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n'quoted': \"$(x)\"\n"
            )
        );
        {
            use sha2::Digest;
            let want = hex::encode(sha2::Sha256::digest(std::fs::read(&cfg).unwrap()));
            assert_eq!(f.config_sha256.as_deref(), Some(want.as_str()));
        }
        let st = f.status.as_ref().unwrap();
        assert_eq!((st.pid, st.role.as_str()), (42, "controller"));
        assert_eq!(st.peer_address.as_deref(), Some("127.0.0.10"));
        let v = f.view.as_ref().unwrap();
        assert_eq!(
            v.cluster_uid.as_deref(),
            Some("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f")
        );
        assert_eq!(
            v.members,
            vec![
                MemberView {
                    name: "c0".into(),
                    peer_url: "https://127.0.0.10:2380".into(),
                    member_id: Some("8e9e05c52164694d".into())
                },
                // The c1 object's peer address does not match: a stale object gives no ID.
                MemberView {
                    name: "c1".into(),
                    peer_url: "https://127.0.0.11:2380".into(),
                    member_id: None
                },
            ]
        );
        assert_eq!(v.nodes.len(), 1);
        assert!(v.nodes[0].ready);
        assert!(v.control_nodes.is_empty());
        assert_eq!(v.errors.len(), 1, "{:?}", v.errors);
        assert!(
            v.errors[0].starts_with("controlnodes: Error from server"),
            "{:?}",
            v.errors
        );
    }

    #[test]
    fn probe_script_without_view_or_without_binary() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_k0s(dir.path(), RUNNING);
        let out = run_script(&bin, "/nonexistent", false, "/nonexistent/k0s.yaml");
        let f = parse_probe(&out).unwrap();
        assert!(f.status.is_some());
        assert!(f.view.is_none(), "view not asked for");
        assert!(!f.has_etcd_data);
        assert_eq!(f.config_text, None);

        let out = run_script(
            "/nonexistent/k0s",
            "/nonexistent",
            true,
            "/nonexistent/k0s.yaml",
        );
        let f = parse_probe(&out).unwrap();
        assert_eq!(f.k0s_version, None);
        assert_eq!(f.k0s_binary_sha256, None);
        assert_eq!(f.status, None);
        assert!(f.view.is_none());
    }

    #[test]
    fn worker_and_stopped_hosts_get_no_view() {
        let dir = tempfile::tempdir().unwrap();
        let worker = RUNNING.replace(r#""Role": "controller""#, r#""Role": "worker""#);
        let bin = fake_k0s(dir.path(), &worker);
        let f = parse_probe(&run_script(&bin, "/x", true, "/x/k0s.yaml")).unwrap();
        assert_eq!(f.status.as_ref().map(|s| s.role.as_str()), Some("worker"));
        assert_eq!(f.k0s_version.as_deref(), Some("v1.33.4+k0s.0"));
        assert!(
            !dir.path().join("version-calls").exists(),
            "worker: version ran"
        );
        assert!(f.view.is_none());

        let stopped = dir.path().join("stopped");
        std::fs::create_dir(&stopped).unwrap();
        let bin = stopped.join("k0s");
        std::fs::write(
            &bin,
            "#!/bin/sh\n[ \"$1\" = version ] && { echo v1.33.4+k0s.0; exit 0; }\necho 'Error: status: can'\\''t get \"status\" via \"/run/k0s/status.sock\": Get \"http://localhost/status\": dial unix /run/k0s/status.sock: connect: no such file or directory' >&2\nexit 1\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = parse_probe(&run_script(
            bin.to_str().unwrap(),
            "/x",
            true,
            "/x/k0s.yaml",
        ))
        .unwrap();
        assert_eq!(f.k0s_version.as_deref(), Some("v1.33.4+k0s.0"));
        assert_eq!(f.status, None);
        assert!(f.view.is_none());
    }

    #[test]
    fn unexplained_status_failure_is_an_error_not_stopped() {
        let line = |name: &str, rc: i32, o: &str, e: &str| {
            let b = base64::engine::general_purpose::STANDARD;
            format!("K0SFORM {name} {rc} o:{} e:{}\n", b.encode(o), b.encode(e))
        };
        let stdout = [
            line("machine_id", 0, "abc\n", ""),
            line("status", 1, "", "Error: permission denied\n"),
            line("end", 0, "", ""),
        ]
        .concat();
        let out = CommandOutput {
            status: Some(0),
            stdout: stdout.into_bytes(),
            stderr: Vec::new(),
        };
        let err = parse_probe(&out).unwrap_err();
        assert!(err.to_string().contains("permission denied"), "{err}");
        // Truncated output (no end marker) is refused.
        let cut = CommandOutput {
            status: Some(0),
            stdout: line("machine_id", 0, "abc", "").into_bytes(),
            stderr: Vec::new(),
        };
        assert!(parse_probe(&cut).is_err());
    }

    #[test]
    fn helpers() {
        assert_eq!(peer_url_host("https://10.0.0.1:2380"), "10.0.0.1");
        assert_eq!(peer_url_host("https://[fd00::1]:2380"), "fd00::1");
        assert_eq!(peer_url_host("http://c1.example:2380/"), "c1.example");
        assert_eq!(
            os_name(
                "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n"
            ),
            "debian 12"
        );
        assert_eq!(os_name("PRETTY_NAME=\"Alpine\"\n"), "Alpine");
    }
}
