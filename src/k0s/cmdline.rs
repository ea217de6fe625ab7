//! k0s command lines (testdata/reference/k0s-cli.md). Each function returns a `RemoteCommand`: an argv run
//! as root with a timeout (k0s's etcd and kubectl calls have none of their own).

use super::TokenRole;
use crate::reality::ServiceKind;
use crate::spec::DrainOptions;
use crate::transport::RemoteCommand;
use std::collections::BTreeMap;
use std::time::Duration;

const QUICK: Duration = Duration::from_secs(30);
const SERVICE: Duration = Duration::from_secs(120);
const ETCD: Duration = Duration::from_secs(60);
const KUBECTL: Duration = Duration::from_secs(60);
const RESET: Duration = Duration::from_secs(600);
const BACKUP: Duration = Duration::from_secs(1800);

fn k0s(bin: &str, args: &[&str]) -> RemoteCommand {
    let mut argv = vec![bin.to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    RemoteCommand::new(argv)
}

fn data_dir_flag(data_dir: &str) -> String {
    format!("--data-dir={data_dir}")
}

/// A spec hook line (`hooks.<action>.<stage>`): run by `sh -c` as the login user, never
/// through sudo, as k0sctl runs hooks. `shown` is the line as people may see it (values from the
/// environment written back as `${NAME}`), in progress, logs and errors.
pub fn hook(line: &str, shown: &str, timeout: Duration) -> RemoteCommand {
    RemoteCommand::new(["sh", "-c", line])
        .as_login_user()
        .timeout(timeout)
        .shown_as(format!("sh -c {}", crate::quote::quote(shown)))
}

/// Why a hook line failed: `hook ACTION.STAGE `LINE` failed (exit N): <its error line>`.
pub fn hook_failure(what: &str, shown: &str, out: &crate::transport::CommandOutput) -> String {
    let how = match out.status {
        Some(c) => format!("exit {c}"),
        None => "killed or timed out".to_string(),
    };
    format!("hook {what} `{shown}` failed ({how}): {}", out.error_line())
}

/// Go's `time.Duration.String()`: `30m0s`, `1h0m0s`, `45s` (k0sctl passes `--expiry 30m0s`).
pub fn go_duration(d: Duration) -> String {
    crate::install_flags::go_duration_string(d.as_nanos() as i128)
}

/// `k0s config validate --config=<path>` (k0s ≥ 1.23.1), with the binary that will read it.
pub fn config_validate(bin: &str, path: &str) -> RemoteCommand {
    k0s(bin, &["config", "validate", &format!("--config={path}")]).timeout(QUICK)
}

/// Put a validated staged k0s.yaml in place (`mv -fT`: a rename within /etc/k0s, atomic; a
/// folder at `path` is an error, not a place to move into).
pub fn install_staged_config(staged: &str, path: &str) -> RemoteCommand {
    RemoteCommand::new(["mv", "-fT", "--", staged, path]).timeout(QUICK)
}

/// Remove a staged k0s.yaml that k0s refused.
pub fn remove_staged_config(staged: &str) -> RemoteCommand {
    RemoteCommand::new(["rm", "-f", staged]).timeout(QUICK)
}

/// The shell function that finds upload staging files, shared by the probe (which reports
/// them) and `settle_leftovers` (which removes them) so both see the same files:
/// `each_leftover DEST CMD` runs `CMD FILE` for each staging file beside `DEST`:
/// `DEST.k0sform-XXXXXX` (an upload's private folder, `mktemp -d`, root's and 0700; older
/// versions made a file there), `DEST.k0sform-tmp` (older versions) and `DEST.k0sform-new` (a
/// staged k0s.yaml or binary) and `DEST.k0sform-new.part` (a download on the host that was cut
/// off: `release::download_on_host`, up to a whole k0s binary). A link there is one (it is
/// removed, never followed); any other folder is not.
macro_rules! each_leftover_sh {
    () => {
        r#"each_leftover() {
  for _f in "$1".k0sform-?????? "$1".k0sform-tmp "$1".k0sform-new "$1".k0sform-new.part; do
    if [ -d "$_f" ] && [ ! -L "$_f" ]; then
      case $_f in "$1".k0sform-??????) ;; *) continue ;; esac
      [ -n "$(find "$_f" -maxdepth 0 -type d -user 0 -perm 700)" ] || continue
    fi
    if [ -e "$_f" ] || [ -L "$_f" ]; then "$2" "$_f"; fi
  done
}
"#
    };
}
pub(crate) use each_leftover_sh;

/// Settle what a killed or failed earlier run left on a host: with `placeholder` (a join of
/// this host was interrupted), a join token still in `token_file` is replaced by the placeholder
/// (the token would stay valid for up to 30 minutes; k0s needs a non-empty file); and staging
/// files beside each of `destinations` (`each_leftover_sh`: found on the host again, whatever
/// the probe reported) are removed; a link there is removed, never followed. Prints one line
/// per file it settled.
pub fn settle_leftovers(
    token_file: &str,
    placeholder: Option<&str>,
    destinations: &[String],
) -> RemoteCommand {
    let script = concat!(
        each_leftover_sh!(),
        r#"removed() { rm -rf -- "$1" && printf '%s\n' "$1"; }
tok=$1 ph=$2
shift 2
if [ -n "$ph" ] && [ -f "$tok" ] && [ ! -L "$tok" ] && [ -s "$tok" ] && [ "$(cat -- "$tok")" != "$ph" ]; then
  printf '%s' "$ph" > "$tok" && printf '%s\n' "$tok"
fi
for d; do each_leftover "$d" removed; done
exit 0"#
    );
    let mut argv = vec![
        "sh".to_string(),
        "-c".into(),
        script.into(),
        "k0sform-settle".into(),
        token_file.into(),
        placeholder.unwrap_or_default().into(),
    ];
    argv.extend(destinations.iter().cloned());
    RemoteCommand::new(argv).timeout(QUICK)
}

/// `k0s version`
pub fn version(bin: &str) -> RemoteCommand {
    k0s(bin, &["version"]).timeout(QUICK)
}

/// `k0s status -o json`
pub fn status_json(bin: &str) -> RemoteCommand {
    k0s(bin, &["status", "-o", "json"]).timeout(QUICK)
}

/// `k0s install controller|worker <args…> [-e K=V…] [--force]`. `args` are the `--name=value`
/// service flags (`desired::install_args`); env entries become `Environment=` lines of the unit.
pub fn install(
    bin: &str,
    kind: ServiceKind,
    args: &[String],
    env: &BTreeMap<String, String>,
    force: bool,
) -> RemoteCommand {
    let mut argv = vec![
        bin.to_string(),
        "install".to_string(),
        match kind {
            ServiceKind::Controller => "controller",
            ServiceKind::Worker => "worker",
        }
        .to_string(),
    ];
    argv.extend(args.iter().cloned());
    // Logs and errors show the variables' names only: their values may be secrets (a proxy's
    // password), and the debug log (`runlog`) keeps every command as shown.
    let mut shown = argv.clone();
    for (k, v) in env {
        argv.push("-e".into());
        argv.push(format!("{k}={v}"));
        shown.push("-e".into());
        shown.push(format!("{k}=(value hidden)"));
    }
    if force {
        argv.push("--force".into());
        shown.push("--force".into());
    }
    let cmd = RemoteCommand::new(argv).timeout(SERVICE);
    if env.is_empty() {
        cmd
    } else {
        cmd.shown_as(crate::quote::join(&shown))
    }
}

/// The file name of k0sctl's drop-in (`k0sctl_env_dropin`), shared with the probe's script:
/// the probe reads the service's environment from exactly the files `install_service` manages
/// (the unit `k0s install` writes, and this drop-in it removes). Any other drop-in is the
/// administrator's: `k0s install` never writes one (pkg/install/systemd_linux.go puts
/// `Environment=` lines in the unit only) and no install removes it, so counting it made the
/// plan show an environment change forever.
macro_rules! k0sctl_env_dropin_name {
    () => {
        "env.conf"
    };
}
pub(crate) use k0sctl_env_dropin_name;

/// The systemd drop-in k0sctl writes a host's `environment` to (rig v2
/// initsystem/systemd.go `ServiceEnvironmentPath`: `/etc/systemd/system/<unit>.service.d/env.conf`).
/// k0sform gives the service its environment with `k0s install -e`; a drop-in left by k0sctl
/// would override those values (systemd reads drop-ins after the unit), so it goes before each
/// install. Nothing else in the folder is touched.
pub fn k0sctl_env_dropin(kind: ServiceKind) -> String {
    let unit = match kind {
        ServiceKind::Controller => "k0scontroller",
        ServiceKind::Worker => "k0sworker",
    };
    format!(
        "/etc/systemd/system/{unit}.service.d/{}",
        k0sctl_env_dropin_name!()
    )
}

/// Where k0sctl puts the service environment on OpenRC (rig v2 initsystem/openrc.go
/// `ServiceEnvironmentPath`), as `export 'NAME=VALUE'` lines: openrc-run sources it before
/// the init script that `k0s install -e` writes. Its `export` lines go before each install
/// (the probe reads them: a variable left there would be a change forever); any other line of
/// the administrator's stays.
pub fn k0sctl_openrc_env(kind: ServiceKind) -> String {
    match kind {
        ServiceKind::Controller => "/etc/conf.d/k0scontroller",
        ServiceKind::Worker => "/etc/conf.d/k0sworker",
    }
    .to_string()
}

/// `k0s install …` (`install`), in one session with what goes right before it: with
/// `swap_in`, the staged binary moves onto the install path (`swap_in_binary`: nothing staged is
/// not an error), and k0sctl's environment drop-in (`k0sctl_env_dropin`) is removed, as are the
/// `export` lines of its OpenRC file (`k0sctl_openrc_env`). Each
/// session is a round trip and an sshd fork on the host, and every join, upgrade and reconfigure
/// installs. A failed move or removal stops before k0s runs, with mv's or rm's own error line.
pub fn install_service(
    bin: &str,
    kind: ServiceKind,
    args: &[String],
    env: &BTreeMap<String, String>,
    swap_in: bool,
) -> RemoteCommand {
    // --force: a leftover unit from an earlier, half-done run is replaced, not an error.
    let install = install(bin, kind, args, env, true);
    let staged = if swap_in {
        staged_binary_path(bin)
    } else {
        String::new()
    };
    let mut argv = vec![
        "sh".to_string(),
        "-c".into(),
        format!(
            r#"if [ -n "$1" ] && [ -e "$1" ]; then mv -fT -- "$1" "$2" || exit; {PRINT_MOVED_STAT}; fi
rm -f -- "$3" || exit
if [ -f "$4" ] && grep -q '^export ' -- "$4"; then sed -i '/^export /d' -- "$4" || exit; fi
shift 4
exec "$@""#
        ),
        "k0sform-install".into(),
        staged,
        bin.to_string(),
        k0sctl_env_dropin(kind),
        k0sctl_openrc_env(kind),
    ];
    let shown = format!(
        "{} (after: staged binary moved in, {} removed)",
        install
            .shown_as
            .clone()
            .unwrap_or_else(|| crate::quote::join(&install.argv)),
        k0sctl_env_dropin(kind)
    );
    argv.extend(install.argv);
    RemoteCommand::new(argv)
        .timeout(install.timeout)
        .shown_as(shown)
}

/// `k0s start` (returns once systemd accepted the job; poll `status` for readiness).
pub fn start(bin: &str) -> RemoteCommand {
    k0s(bin, &["start"]).timeout(SERVICE)
}

/// The host's clock (`date -u +%s`, seconds since the epoch), then `k0s start` (`start`), in
/// one session: the first stdout line is the moment of the (re)start by the host's clock
/// (`parse::parse_started_at`), the rest is k0s's. Kubelets stamp Node conditions with their
/// host's clock, so a restart is timed on that host, never locally. The clock is read first, so
/// anything the new k0s posts is stamped later. When `date` fails, k0s is not started.
pub fn start_at_host_time(bin: &str) -> RemoteCommand {
    let start = start(bin);
    let mut argv = vec![
        "sh".to_string(),
        "-c".into(),
        r#"date -u +%s || exit; exec "$@""#.into(),
        "k0sform-start".into(),
    ];
    argv.extend(start.argv);
    RemoteCommand::new(argv).timeout(start.timeout)
}

/// `k0s stop`
pub fn stop(bin: &str) -> RemoteCommand {
    k0s(bin, &["stop"]).timeout(SERVICE)
}

/// The `stat` format of a k0s binary's stat line (size, device, inode, modification and change
/// time), as the probe prints it (`probe_script`): a binary whose line is the one recorded with
/// its hash is not hashed again.
pub const BINARY_STAT_FORMAT: &str = "%s %d %i %y %z";

/// First stdout line of `install_service` (with a staged binary) and `swap_in_binary` when they
/// moved the staged binary onto the install path (`$2`): its stat line after the move, behind
/// this prefix (`parse::parse_moved_binary_stat`). With the sha256 the upload checked on the
/// host, it spares the next probe hashing the binary again (a real k0s is a few hundred MB).
pub const MOVED_STAT_PREFIX: &str = "k0sform-binary-stat ";

/// Shell printing `MOVED_STAT_PREFIX` and the stat line of `$2` (empty when `stat` fails,
/// which the parser refuses).
const PRINT_MOVED_STAT: &str =
    r#"printf 'k0sform-binary-stat %s\n' "$(stat -L -c '%s %d %i %y %z' -- "$2")""#;

/// Where a new k0s binary waits, beside the install path (same file system: the swap is a
/// rename), until k0s is stopped on that host. The unit restarts k0s by itself
/// (`Restart=always`, `RestartSec=10`: k0s `pkg/install/systemd_linux.go`), so a binary put at
/// the install path early would start at the next crash, out of the upgrade order. k0sctl stages
/// and swaps the same way (k0sctl `phase/upgrade_workers.go`, `cluster/host.go UpdateK0sBinary`).
pub fn staged_binary_path(bin: &str) -> String {
    format!("{bin}.k0sform-new")
}

/// Move the staged binary (`staged_binary_path`) onto the install path, once k0s is stopped.
/// Nothing staged (swapped by an earlier, interrupted run) is not an error.
pub fn swap_in_binary(bin: &str) -> RemoteCommand {
    RemoteCommand::new([
        "sh".to_string(),
        "-c".into(),
        format!(r#"if [ -e "$1" ]; then mv -fT -- "$1" "$2" || exit; {PRINT_MOVED_STAT}; fi"#),
        "k0sform-swap".into(),
        staged_binary_path(bin),
        bin.to_string(),
    ])
    .timeout(QUICK)
}

/// `k0s reset --data-dir=… [--kubelet-root-dir=…]`. Refused by k0s while it runs; does not touch
/// etcd membership.
pub fn reset(bin: &str, data_dir: &str, kubelet_root_dir: Option<&str>) -> RemoteCommand {
    let mut argv = vec![bin.to_string(), "reset".into(), data_dir_flag(data_dir)];
    if let Some(k) = kubelet_root_dir {
        argv.push(format!("--kubelet-root-dir={k}"));
    }
    RemoteCommand::new(argv).timeout(RESET)
}

/// `rm -f -- PATH…`: what destroy takes off a host after `k0s reset` (the binary, the config,
/// the token file); missing files are no error.
pub fn remove_files(paths: &[&str]) -> RemoteCommand {
    let mut argv = vec!["rm".to_string(), "-f".into(), "--".into()];
    argv.extend(paths.iter().map(|p| p.to_string()));
    RemoteCommand::new(argv)
}

/// `k0s token create --role=<role> --expiry=<go duration> --data-dir=…` (prints the token).
pub fn token_create(bin: &str, data_dir: &str, role: TokenRole, expiry: Duration) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "token".into(),
        "create".into(),
        format!("--role={}", role.as_str()),
        format!("--expiry={}", go_duration(expiry)),
        data_dir_flag(data_dir),
    ])
    .timeout(QUICK)
}

/// `k0s token invalidate --data-dir=… <id>`
pub fn token_invalidate(bin: &str, data_dir: &str, id: &str) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "token".into(),
        "invalidate".into(),
        data_dir_flag(data_dir),
        id.to_string(),
    ])
    .timeout(QUICK)
}

/// `k0s etcd member-list --data-dir=…` (blocks without quorum: the timeout matters).
pub fn member_list(bin: &str, data_dir: &str) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "etcd".into(),
        "member-list".into(),
        data_dir_flag(data_dir),
    ])
    .timeout(ETCD)
}

/// `k0s etcd leave --peer-address=<addr> --data-dir=…`, run on a healthy controller to remove the
/// member whose first peer URL is `https://<addr>:2380`. `peer_address` is a bare IP or DNS name
/// (k0s ≥ 1.30 rejects URLs).
pub fn etcd_leave(bin: &str, data_dir: &str, peer_address: &str) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "etcd".into(),
        "leave".into(),
        format!("--peer-address={peer_address}"),
        data_dir_flag(data_dir),
    ])
    .timeout(ETCD)
}

/// `k0s kubectl --data-dir=… <args…>` with the admin kubeconfig.
pub fn kubectl<S: AsRef<str>>(bin: &str, data_dir: &str, args: &[S]) -> RemoteCommand {
    let mut argv = vec![bin.to_string(), "kubectl".into(), data_dir_flag(data_dir)];
    argv.extend(args.iter().map(|a| a.as_ref().to_string()));
    RemoteCommand::new(argv)
        .timeout(KUBECTL)
        .env("KUBECONFIG", format!("{data_dir}/pki/admin.conf"))
}

pub const ETCD_MEMBER_RESOURCE: &str = "etcdmembers.etcd.k0sproject.io";
pub const CONTROL_NODE_RESOURCE: &str = "controlnodes.autopilot.k0sproject.io";

/// The stdout limit of a command that lists every Node (the probe's `kubectl get` of the
/// cluster objects, `get_nodes`): sized for 5,000 Nodes (Kubernetes' largest tested cluster)
/// at up to ~50 KiB each in kubectl's indented JSON (up to 50 images with all their names,
/// labels, annotations, conditions), with the few other objects listed beside them.
pub const NODE_LISTING_LIMIT: u64 = 256 << 20;

/// Node objects as JSON (`parse::parse_nodes`).
pub fn get_nodes(bin: &str, data_dir: &str) -> RemoteCommand {
    kubectl(bin, data_dir, &["get", "nodes", "-o", "json"]).output_limit(NODE_LISTING_LIMIT)
}

/// A shell wrapper for a command that runs until it is told to stop: it runs `"$@"` in the
/// background and kills it when its stdin reaches EOF, which happens when k0sform closes the
/// session (or loses the connection); it exits when the command does. A command cut off from
/// its session would otherwise live on until it next writes, or until its `timeout`. The
/// session's stdin goes to the watcher as fd 3: a non-interactive shell gives background lists
/// /dev/null as stdin.
const UNTIL_STDIN_CLOSES: &str = r#"exec 3<&0
"$@" </dev/null 3<&- & p=$!
{ cat <&3 >/dev/null; kill "$p" 2>/dev/null; } >/dev/null 2>&1 &
exec 3<&-
wait "$p""#;

/// `kubectl get nodes --watch-only -o name`: one line `node/NAME` each time a Node is added,
/// changed or deleted (kubectl's name printer, which the watch output uses line by line), until
/// the session is closed or `limit` passes. The steps waiting for a Node use the lines as a
/// signal to ask again at once instead of at their next poll (`parse_watched_node`).
pub fn watch_nodes(bin: &str, data_dir: &str, limit: Duration) -> RemoteCommand {
    let mut argv: Vec<String> = ["sh", "-c", UNTIL_STDIN_CLOSES, "sh", bin, "kubectl"]
        .map(String::from)
        .to_vec();
    argv.push(data_dir_flag(data_dir));
    argv.extend(["get", "nodes", "--watch-only", "-o", "name"].map(String::from));
    RemoteCommand::new(argv)
        .timeout(limit)
        .env("KUBECONFIG", format!("{data_dir}/pki/admin.conf"))
        .shown_as(format!("{bin} kubectl get nodes --watch-only -o name"))
}

/// `TYPE/NAME`: kubectl reads it as one object however the name starts, where a bare name
/// taken from a host (`--all`, `-l x`) would be read as a flag.
fn object(resource: &str, name: &str) -> String {
    format!("{resource}/{name}")
}

pub fn delete_node(bin: &str, data_dir: &str, name: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &["delete", &object("node", name), "--ignore-not-found"],
    )
}

/// `kubectl drain` with the spec's drain options, as k0sctl passes them
/// (pkg/apis/k0sctl.k0sproject.io/v1beta1/cluster/options.go `DrainOption.ToKubectlArgs`: a zero
/// value is left out), except `--skip-wait-for-delete-timeout`: kubectl reads it as an integer
/// of seconds (kubectl `pkg/cmd/drain/drain.go`, `IntVar`), where k0sctl passes a Go duration
/// (`30s`) that fails every drain. The command's own timeout is the drain timeout plus a margin;
/// kubectl's `--timeout=0` waits forever, so then it is an hour.
pub fn drain(bin: &str, data_dir: &str, name: &str, opts: &DrainOptions) -> RemoteCommand {
    let mut args: Vec<String> = vec!["drain".into()];
    if opts.grace_period > 0 {
        args.push(format!("--grace-period={}", opts.grace_period));
    }
    if opts.timeout > 0 {
        args.push(format!("--timeout={}s", opts.timeout));
    }
    if opts.force {
        args.push("--force".into());
    }
    if opts.ignore_daemon_sets {
        args.push("--ignore-daemonsets".into());
    }
    if opts.delete_empty_dir_data {
        args.push("--delete-emptydir-data".into());
    }
    if let Some(sel) = &opts.pod_selector {
        args.push(format!("--pod-selector={sel}"));
    }
    if opts.skip_wait_for_delete_timeout > 0 {
        args.push(format!(
            "--skip-wait-for-delete-timeout={}",
            opts.skip_wait_for_delete_timeout
        ));
    }
    args.push(object("node", name));
    let limit = if opts.timeout > 0 { opts.timeout } else { 3600 };
    kubectl(bin, data_dir, &args).timeout(Duration::from_secs(limit + 60))
}

/// `kubectl cordon`: the Node takes no new pods (k0sctl `Host.CordonNode`).
pub fn cordon(bin: &str, data_dir: &str, name: &str) -> RemoteCommand {
    kubectl(bin, data_dir, &["cordon", &object("node", name)])
}

/// `kubectl uncordon`: the Node takes pods again (k0sctl `Host.UncordonNode`).
pub fn uncordon(bin: &str, data_dir: &str, name: &str) -> RemoteCommand {
    kubectl(bin, data_dir, &["uncordon", &object("node", name)])
}

/// `kubectl taint nodes --overwrite NAME key=value:Effect` (k0sctl `Host.AddTaint`).
pub fn add_taint(bin: &str, data_dir: &str, name: &str, taint: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &[
            "taint",
            "nodes",
            "--overwrite",
            &object("node", name),
            taint,
        ],
    )
}

/// `kubectl taint nodes NAME key=value:Effect-` (k0sctl `Host.RemoveTaint`). kubectl fails when
/// the Node does not carry the taint (`error: taint "…" not found`), which `kubectl_not_found`
/// recognises.
pub fn remove_taint(bin: &str, data_dir: &str, name: &str, taint: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &[
            "taint",
            "nodes",
            &object("node", name),
            &format!("{taint}-"),
        ],
    )
}

/// EtcdMember objects as JSON (`parse::parse_etcd_members`).
pub fn get_etcd_members(bin: &str, data_dir: &str) -> RemoteCommand {
    kubectl(bin, data_dir, &["get", ETCD_MEMBER_RESOURCE, "-o", "json"])
}

/// Declarative removal: `spec.leave=true`; the k0s leader removes the member from etcd.
pub fn patch_etcd_member_leave(bin: &str, data_dir: &str, name: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &[
            "patch",
            &object(ETCD_MEMBER_RESOURCE, name),
            "--type=merge",
            "-p",
            r#"{"spec":{"leave":true}}"#,
        ],
    )
}

pub fn delete_etcd_member(bin: &str, data_dir: &str, name: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &[
            "delete",
            &object(ETCD_MEMBER_RESOURCE, name),
            "--ignore-not-found",
        ],
    )
}

/// ControlNode objects as JSON (`parse::parse_names`).
pub fn get_control_nodes(bin: &str, data_dir: &str) -> RemoteCommand {
    kubectl(bin, data_dir, &["get", CONTROL_NODE_RESOURCE, "-o", "json"])
}

pub fn delete_control_node(bin: &str, data_dir: &str, name: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &[
            "delete",
            &object(CONTROL_NODE_RESOURCE, name),
            "--ignore-not-found",
        ],
    )
}

/// The kube-system namespace as JSON; its uid is the cluster's identity (`parse::parse_uid`).
pub fn get_cluster_uid(bin: &str, data_dir: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &["get", "namespace", "kube-system", "-o", "json"],
    )
}

/// `kubectl get --raw=/readyz`: prints `ok` when the API server is ready.
pub fn readyz(bin: &str, data_dir: &str) -> RemoteCommand {
    kubectl(bin, data_dir, &["get", "--raw=/readyz"]).timeout(QUICK)
}

/// `k0s kubeconfig admin --data-dir=…`: prints the admin kubeconfig, a secret (the admin's client
/// key). k0sctl `phase/get_kubeconfig.go` runs the same line.
pub fn kubeconfig_admin(bin: &str, data_dir: &str) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "kubeconfig".into(),
        "admin".into(),
        data_dir_flag(data_dir),
    ])
    .timeout(QUICK)
}

/// `k0s backup --save-path=<dir> --data-dir=…`: writes `k0s_backup_<time>.tar.gz` (etcd snapshot,
/// pki, manifests, k0s.yaml) into an existing directory (k0s `cmd/backup/backup_unix.go`; k0sctl
/// `cluster/host.go` `K0sBackupCommand`).
pub fn backup(bin: &str, data_dir: &str, save_path: &str) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "backup".into(),
        format!("--save-path={save_path}"),
        data_dir_flag(data_dir),
    ])
    .timeout(BACKUP)
}

/// `k0s restore --data-dir=… --config-out=<file> <archive>`: unpacks a backup into the data dir of
/// a host where k0s does not run (k0s `cmd/restore/restore_unix.go`). `--config-out` keeps the
/// archive's k0s.yaml out of the login user's working directory, where k0s would put it.
pub fn restore(bin: &str, data_dir: &str, archive: &str, config_out: &str) -> RemoteCommand {
    RemoteCommand::new([
        bin.to_string(),
        "restore".into(),
        data_dir_flag(data_dir),
        format!("--config-out={config_out}"),
        archive.to_string(),
    ])
    .timeout(BACKUP)
}

/// `k0s kubectl apply -f -` with the admin kubeconfig, the manifest on stdin: k0sctl
/// `phase/apply_manifests.go` runs `env KUBECONFIG=<dataDir>/pki/admin.conf k0s kubectl apply
/// -f -` (configurer/linux.go `KubectlCmdf`), client-side apply, no other flag.
pub fn kubectl_apply(bin: &str, data_dir: &str, manifest: Vec<u8>) -> RemoteCommand {
    kubectl(bin, data_dir, &["apply", "-f", "-"])
        .stdin(manifest)
        .shown_as(format!("{bin} kubectl apply -f -"))
}

/// The dynamic config object as YAML: k0sctl `action/config_edit.go` runs `kubectl -n
/// kube-system get clusterconfig k0s -o yaml` (read-only).
pub fn get_cluster_config(bin: &str, data_dir: &str) -> RemoteCommand {
    kubectl(
        bin,
        data_dir,
        &[
            "-n",
            "kube-system",
            "get",
            "clusterconfig",
            "k0s",
            "-o",
            "yaml",
        ],
    )
}

/// The edited dynamic config applied back, on stdin: k0sctl `action/config_edit.go` runs
/// `kubectl apply -n kube-system -f -`.
pub fn apply_cluster_config(bin: &str, data_dir: &str, config: Vec<u8>) -> RemoteCommand {
    kubectl(bin, data_dir, &["apply", "-n", "kube-system", "-f", "-"])
        .stdin(config)
        .shown_as(format!("{bin} kubectl apply -n kube-system -f -"))
}

/// The reconcile events of the dynamic config: k0sctl `action/config_status.go` runs `kubectl
/// -n kube-system get event --field-selector involvedObject.name=k0s [-o FORMAT]`.
pub fn cluster_config_events(bin: &str, data_dir: &str, output: Option<&str>) -> RemoteCommand {
    let mut args = vec![
        "-n".to_string(),
        "kube-system".into(),
        "get".into(),
        "event".into(),
        "--field-selector".into(),
        "involvedObject.name=k0s".into(),
    ];
    if let Some(o) = output {
        args.push("-o".into());
        args.push(o.to_string());
    }
    kubectl(bin, data_dir, &args)
}

#[cfg(test)]
mod tests;
