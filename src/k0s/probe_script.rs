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
use crate::reality::{ClusterView, HostFacts, MemberView, ServiceKind, TokenFileState};
use crate::state::BinaryRecord;
use crate::transport::{CommandOutput, RemoteCommand};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where k0sform keeps the id it generates for a host that has neither /etc/machine-id nor
/// /var/lib/dbus/machine-id.
pub const GENERATED_MACHINE_ID: &str = "/etc/k0s/k0sform-machine-id";

/// The k0s.yaml the probe reads by default (the one k0sform writes where the host's
/// installFlags name no `--config`: [`ProbeCommand::reading_config_at`]).
pub const CONFIG_PATH: &str = super::desired::CONFIG_FILE;

/// Where the k0s.yaml path is in the probe's argv (the script's `$4`).
const CONFIG_ARG: usize = 7;

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
pub(super) const SCRIPT: &str = concat!(
    super::cmdline::each_leftover_sh!(),
    super::token_file::token_decodes_sh!(),
    "k0sctl_dropin=",
    super::cmdline::k0sctl_env_dropin_name!(),
    "\n",
    r#"bin=$1 dd=$2 view=$3 cfg=$4 N=$5 objects=$6 want_cfg=$7 known_bin=$8 status_bound=10
t() { timeout -k 2 "$@"; }
kc() { t 10 env KUBECONFIG="$dd/pki/admin.conf" "$bin" kubectl "$@"; }
units() {
  for u in k0scontroller k0sworker k0sserver; do
    if [ -e "/etc/systemd/system/$u.service" ] || [ -e "/etc/init.d/$u" ]; then echo "$u"; fi
  done
}
begin() { printf '%s begin %s\n' "$N" "$1"; printf '%s begin %s\n' "$N" "$1" >&2; }
end() { printf '\n%s end %s %s\n' "$N" "$1" "$2"; printf '\n%s end %s\n' "$N" "$1" >&2; }
# emit NAME CMD...: CMD's exit code, stdout and stderr, framed; returns CMD's exit code.
emit() { _n=$1; shift; begin "$_n"; "$@"; _r=$?; end "$_n" "$_r"; return "$_r"; }
# show FILE: a small text file through the shell's own `read` (no process per file, which a
# plan pays on every host); a last line without a newline is shown without one.
show() {
  _l=
  { while IFS= read -r _l; do printf '%s\n' "$_l"; done; printf '%s' "$_l"; } < "$1"
}
# The host's identity: systemd's machine-id, else D-Bus's, else (minimal and container images
# have neither) an id k0sform generates once, kept beside k0s's config (`k0s reset` keeps it).
machine_id() {
  for f in /etc/machine-id /var/lib/dbus/machine-id /etc/k0s/k0sform-machine-id; do
    if [ -s "$f" ]; then show "$f"; return; fi
  done
  f=/etc/k0s/k0sform-machine-id
  mkdir -p "${f%/*}" && (umask 022; tr -d '-' < /proc/sys/kernel/random/uuid > "$f.tmp" && mv -f "$f.tmp" "$f") && show "$f"
}
# The kernel's hostname as k0s reads it (Go's os.Hostname, src/os/sys_linux.go: this file,
# else uname).
hostname() { show /proc/sys/kernel/hostname 2>/dev/null || uname -n; }
emit machine_id machine_id
emit hostname hostname
emit arch uname -m
emit os_release show /etc/os-release
emit units units
# The installed service's environment, as `k0s install -e` wrote it (pkg/install/systemd_linux.go
# `Environment="NAME=VALUE"`, openrc_linux.go `export NAME=VALUE`), then k0sctl's drop-in (it
# writes its hosts' `environment` to `<unit>.service.d/env.conf`: rig v2 initsystem/systemd.go),
# which systemd reads after the unit and every install removes. Other drop-ins are not k0sform's
# (no install changes them): not read. Values may be secrets: the parser keeps only their sha256.
service_env() {
  for u in k0scontroller k0sworker k0sserver; do
    for f in "/etc/systemd/system/$u.service" "/etc/init.d/$u" "/etc/systemd/system/$u.service.d/$k0sctl_dropin"; do
      if [ -f "$f" ]; then grep -e '^Environment=' -e '^export ' -- "$f"; fi
    done
  done
  return 0
}
emit service_env service_env
emit etcd_data test -e "$dd/etcd/member/snap/db"
if [ -f "$cfg" ]; then
  begin config_sha256; cfg_sha=$(sha256sum "$cfg"); r=$?; printf '%s' "$cfg_sha"; end config_sha256 "$r"
  emit config cat "$cfg"
fi
if [ -e "$bin" ]; then
  # A real k0s binary is a few hundred MB: it is hashed only when its stat line (size, device,
  # inode, modification and change time; any write, rename or replacement moves the change
  # time) is not the one recorded with its hash.
  begin binary_stat; bin_stat=$(stat -L -c '%s %d %i %y %z' -- "$bin"); r=$?; printf '%s' "$bin_stat"; end binary_stat "$r"
  if [ "$r" != 0 ] || [ -z "$known_bin" ] || [ "$bin_stat" != "$known_bin" ]; then
    emit binary_sha256 sha256sum "$bin"
  fi
  # The status decides what else to ask, so it is captured (trailing newlines are dropped).
  begin status; st=$(t "$status_bound" "$bin" status -o json); r=$?; printf '%s' "$st"; end status "$r"
  role=none
  if [ "$r" = 0 ]; then
    case $st in
      *'"Role": "controller"'*|*'"Role":"controller"'*|*'"Role": "server'*|*'"Role":"server'*) role=controller;;
      *'"Version"'*) role=running;;
    esac
  fi
  # A running k0s names its version in the status: `k0s version` would cost one more start of
  # the binary on every host.
  [ "$role" = none ] && emit version t 10 "$bin" version
  # k0s's own defaults for this host, so a k0s.yaml that spells them out compares equal to one
  # that leaves them out (what k0sctl bases its config on: `k0s config create`). Not needed
  # when the file is byte for byte the one k0sform would write: that saves a start of k0s.
  if [ -f "$cfg" ] && [ "${cfg_sha%% *}" != "$want_cfg" ]; then
    emit config_defaults t 10 "$bin" config create
  fi
  if [ "$role" = controller ] && [ "$view" = 1 ]; then
    # The etcd member list runs beside the one kubectl for the four lists: one start of k0s
    # less on the path of every plan (and while etcd is down, the two 10 s bounds run at once).
    # The list waits in a private temp folder until the kubectl is done; without one, they run
    # one after the other. Its stderr is kept: a kine controller refuses `k0s etcd` (`wrong
    # storage type: kine`, k0s cmd/etcd/etcd.go) and has no EtcdMember CRD, so the kubectl that
    # asked for EtcdMembers is refused and asked again without them.
    if ml_dir=$(mktemp -d 2>/dev/null) && [ -d "$ml_dir" ]; then
      t 10 "$bin" etcd member-list --data-dir="$dd" >"$ml_dir/out" 2>"$ml_dir/err" &
      ml_pid=$!
      emit objects kc get "$objects" -o json
      r=$?
      wait "$ml_pid"
      ml_r=$?
      ml_err=$(show "$ml_dir/err")
      begin member_list; show "$ml_dir/out"; printf '%s' "$ml_err" >&2; end member_list "$ml_r"
      rm -rf -- "$ml_dir"
    else
      begin member_list
      { ml_err=$(t 10 "$bin" etcd member-list --data-dir="$dd" 2>&1 1>&3); ml_r=$?; } 3>&1
      printf '%s' "$ml_err" >&2; end member_list "$ml_r"
      r=
    fi
    kine=0
    case $ml_err in *'Error: wrong storage type: kine'*) kine=1; objects=${objects#etcdmembers.etcd.k0sproject.io,};; esac
    if [ -z "$r" ]; then
      emit objects kc get "$objects" -o json
      r=$?
    elif [ "$r" != 0 ] && [ "$kine" = 1 ] && [ "$r" != 124 ] && [ "$r" != 137 ]; then
      emit kine_objects kc get "$objects" -o json
      r=$?
    fi
    # One list at a time where a type is missing (autopilot disabled, EtcdMember before k0s
    # 1.30), not after a timeout.
    if [ "$r" != 0 ] && [ "$r" != 124 ] && [ "$r" != 137 ]; then
      [ "$kine" = 1 ] || emit etcd_members kc get etcdmembers.etcd.k0sproject.io -o json
      emit cluster_uid kc get namespace kube-system -o json
      emit nodes kc get nodes -o json
      emit control_nodes kc get controlnodes.autopilot.k0sproject.io -o json
    fi
  fi
fi
# A worker's token file ($9): does it hold what k0s decodes as a join token (k0s v1.35.1+k0s.0
# workers refuse to start otherwise, k0s #7202)? Only the verdict is printed, never the content.
if [ -n "$9" ]; then
  begin token_file
  if token_decodes "$9"; then echo decodes
  elif [ -e "$9" ]; then echo undecodable
  else echo missing; fi
  end token_file 0
fi
# The spec's files (the first $10 arguments after it): one line each,
# `<sha256> <mode> <user> <group> <uid> <gid>` or `-`.
shift 9
nfiles=$1
shift
if [ "$nfiles" -gt 0 ]; then
  begin files
  i=0
  for f in "$@"; do
    [ "$i" -lt "$nfiles" ] || break
    if [ -f "$f" ]; then
      printf '%s %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$(stat -c '%a %U %G %u %g' -- "$f")"
    else
      echo -
    fi
    i=$((i+1))
  done
  end files 0
  shift "$nfiles"
fi
# Upload staging files an earlier run left (the remaining arguments are the destinations they
# would be beside): the index of each destination that has one, never a file's name.
if [ $# -gt 0 ]; then
  seen() { left=1; }
  begin staging
  i=0
  for d in "$@"; do
    left=0
    each_leftover "$d" seen
    [ "$left" = 0 ] || echo "$i"
    i=$((i+1))
  done
  end staging 0
fi
printf '%s done\n' "$N"
"#
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

#[derive(Debug, Clone, PartialEq, Eq, Default)]
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

/// One stream's framed sections: name → (exit code from the end marker, output), and whether
/// the final `done` marker was seen.
type Frames = (BTreeMap<String, (Option<i32>, String)>, bool);

/// The framed sections of one stream. Text outside frames (a login banner, sudo's warnings) is
/// ignored.
fn frames(text: &str, nonce: &str) -> Result<Frames, K0sError> {
    const WHAT: &str = "probe output";
    let bad = |m: String| K0sError::parse(WHAT, m);
    let mut map = BTreeMap::new();
    let mut done = false;
    let mut open: Option<(String, String)> = None;
    // Every piece starts right after a marker's nonce: " begin NAME\n<output>\n",
    // " end NAME RC\n", " done\n".
    for piece in marker_pieces(text, nonce) {
        let (header, body) = piece.split_once('\n').unwrap_or((piece, ""));
        let words: Vec<&str> = header.split(' ').collect();
        match (words.as_slice(), open.take()) {
            (["", "begin", name], None) => open = Some((name.to_string(), body.to_string())),
            (["", "end", name, rest @ ..], Some((opened, output))) if *name == opened => {
                let rc = match rest {
                    [] => None,
                    [rc] => Some(
                        rc.parse()
                            .map_err(|_| bad(format!("bad exit code {rc:?} of {name}")))?,
                    ),
                    _ => return Err(bad(format!("malformed marker {header:?}"))),
                };
                // The end marker starts with a newline of its own.
                let output = output
                    .strip_suffix('\n')
                    .ok_or_else(|| bad(format!("section {name} is not closed by a new line")))?;
                map.insert(opened, (rc, output.to_string()));
            }
            (["", "done"], None) => done = true,
            _ => return Err(bad(format!("unexpected marker {header:?}"))),
        }
    }
    if let Some((name, _)) = open {
        return Err(bad(format!("section {name} has no end")));
    }
    Ok((map, done))
}

/// The text after each marker up to the next one. A marker is the nonce at the start of a line
/// (the script prints each one after a line break): the nonce anywhere else is output, whatever
/// a host (which sees its own command line) prints.
fn marker_pieces<'a>(text: &'a str, nonce: &str) -> Vec<&'a str> {
    let starts: Vec<usize> = text
        .match_indices(nonce)
        .map(|(at, _)| at)
        .filter(|&at| at == 0 || text.as_bytes()[at - 1] == b'\n')
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            let end = starts.get(i + 1).copied().unwrap_or(text.len());
            &text[at + nonce.len()..end]
        })
        .collect()
}

fn sections(out: &CommandOutput, nonce: &str) -> Result<BTreeMap<String, Section>, K0sError> {
    const WHAT: &str = "probe output";
    let (stdout, done) = frames(&out.stdout_str(), nonce)?;
    if !done {
        return Err(K0sError::parse(
            WHAT,
            "the probe script did not finish (no end marker)",
        ));
    }
    // stderr is framed too, but only read as far as it is well-formed: it carries the frames
    // and whatever else the host's shell or sudo printed.
    let (mut stderr, _) = frames(&out.stderr_str(), nonce).unwrap_or_default();
    stdout
        .into_iter()
        .map(|(name, (rc, text))| {
            let rc = rc
                .ok_or_else(|| K0sError::parse(WHAT, format!("section {name} has no exit code")))?;
            let err = stderr.remove(&name).map(|(_, e)| e).unwrap_or_default();
            Ok((name, Section { rc, out: text, err }))
        })
        .collect()
}

/// `os-release` → `"<ID> <VERSION_ID>"` (e.g. `debian 12`), else PRETTY_NAME, else "linux".
/// The `Environment=` (systemd: k0s writes `Environment="NAME=VALUE"`, k0sctl's drop-in
/// `Environment=NAME=VALUE` or `Environment='NAME=VALUE'`) and `export NAME=VALUE` (OpenRC) lines
/// of the installed k0s service, in the order systemd reads them, as name → sha256 of the value:
/// the values may be secrets and never leave this function. A later assignment wins and an
/// empty `Environment=` clears the list, as in systemd.
pub fn parse_service_env(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        let rest = if let Some(rest) = line.strip_prefix("Environment=") {
            rest
        } else if let Some(rest) = line.strip_prefix("export ") {
            rest
        } else {
            continue;
        };
        let words = unquote_words(rest)?;
        if words.is_empty() && line.starts_with("Environment=") {
            env.clear();
        }
        for assignment in words {
            let Some((name, value)) = assignment.split_once('=') else {
                return Err(
                    "the k0s service has an environment line without `NAME=` (edited by hand?)"
                        .into(),
                );
            };
            if !crate::spec::valid_env_name(name) {
                return Err(format!(
                    "the k0s service sets an environment variable with an invalid name ({:?})",
                    name.chars().take(64).collect::<String>()
                ));
            }
            env.insert(name.to_string(), crate::hash::sha256_hex(value));
        }
    }
    Ok(env)
}

/// Words as systemd (and a shell) split an `Environment=` value: whitespace separates,
/// `'…'` is literal, `"…"` takes `\"` and `\\` escapes, a backslash outside quotes escapes
/// the next character, and adjacent pieces join (`'a'"'"'b'` is `a'b`).
fn unquote_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("unterminated ' in the service environment".into()),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => w.push(c),
                            None => return Err("unterminated \" in the service environment".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("unterminated \" in the service environment".into()),
                    }
                }
            }
            '\\' => {
                if let Some(c) = chars.next() {
                    cur.get_or_insert_with(String::new).push(c);
                }
            }
            c => cur.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = cur {
        words.push(w);
    }
    Ok(words)
}

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
    f.k0s_binary_stat = text("binary_stat").filter(|v| super::is_binary_stat(v));
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
    if f.service.is_some() {
        let env = sec("service_env")
            .filter(|x| x.ok())
            .map(|x| x.out.as_str())
            .unwrap_or_default();
        f.service_env = Some(parse_service_env(env).map_err(ProbeError::Host)?);
    }
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
        if st.ok() {
            match parse_status(&st.out) {
                Ok(status) => f.status = Some(status),
                Err(K0sError::NotRunning) => {}
                Err(e) => return Err(e.into()),
            }
        } else {
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
        }
    }
    // `version` is skipped while k0s runs: the running binary's version stands for it (a
    // replaced binary still shows in k0s_binary_sha256).
    if sec("version").is_none() {
        f.k0s_version = f.status.as_ref().map(|st| st.version.clone());
    }
    f.view = view(&s);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The probe of a host with no k0s (nothing at its binary path or data dir).
    fn probe_nowhere(files: &[String], staging: &[String]) -> ProbeCommand {
        probe(
            "/nonexistent/k0s",
            "/nonexistent",
            false,
            None,
            None,
            files,
            staging,
        )
    }

    /// Run the real probe script locally (with `cfg` for the k0s.yaml path) and parse it.
    fn probe_locally(bin: &str, dd: &str, view: bool, cfg: &str) -> (CommandOutput, ProbeCommand) {
        probe_locally_wanting(bin, dd, view, cfg, None)
    }

    /// [`probe_locally`] with the sha256 of the k0s.yaml k0sform would write.
    fn probe_locally_wanting(
        bin: &str,
        dd: &str,
        view: bool,
        cfg: &str,
        want_cfg: Option<&str>,
    ) -> (CommandOutput, ProbeCommand) {
        let p = probe(bin, dd, view, want_cfg, None, &[], &[]);
        let mut argv = p.command.argv.clone();
        let at = argv.iter().position(|a| a == CONFIG_PATH).unwrap();
        argv[at] = cfg.to_string();
        (run_in_tmpdir(&argv, None), p)
    }

    /// Run `argv` here, with `TMPDIR` set to `tmpdir` if given.
    fn run_in_tmpdir(argv: &[String], tmpdir: Option<&std::path::Path>) -> CommandOutput {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        if let Some(t) = tmpdir {
            c.env("TMPDIR", t);
        }
        let out = c.output().unwrap();
        CommandOutput {
            status: out.status.code(),
            stdout: out.stdout,
            stderr: out.stderr,
        }
    }

    /// k0s issue #7202: a worker's token file is reported as k0s v1.35.1 decodes it (base64 of
    /// gzip, k0s `pkg/token/joindecode.go`), never its content; the spec's files after it are
    /// still read; a host not asked has no verdict.
    #[test]
    fn token_file_is_reported_as_decodable_or_not_never_its_content() {
        use base64::Engine as _;
        let d = tempfile::tempdir().unwrap();
        let placeholder = super::super::placeholder_token(super::super::TokenRole::Worker);
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let cases: Vec<(&str, Option<String>, TokenFileState)> = vec![
            ("token", Some(placeholder.clone()), TokenFileState::Decodes),
            (
                "token-nl",
                Some(format!("{placeholder}\n")),
                TokenFileState::Decodes,
            ),
            (
                "k0sctl",
                Some("# overwritten by k0sctl after join\n".into()),
                TokenFileState::Undecodable,
            ),
            ("empty", Some(String::new()), TokenFileState::Undecodable),
            // Go decodes the whole string: a token followed by garbage is refused.
            (
                "trailing",
                Some(format!("{placeholder}!!")),
                TokenFileState::Undecodable,
            ),
            (
                "plain-base64",
                Some(b64(b"not gzip")),
                TokenFileState::Undecodable,
            ),
            ("missing", None, TokenFileState::Missing),
        ];
        let other = d.path().join("other.conf");
        std::fs::write(&other, "x\n").unwrap();
        let files = vec![other.display().to_string()];
        for (name, content, want) in cases {
            let path = d.path().join(name);
            if let Some(c) = &content {
                std::fs::write(&path, c).unwrap();
            }
            let p = probe_nowhere(&files, &[]).checking_token_file_at(path.to_str().unwrap());
            let out = run_in_tmpdir(&p.command.argv, None);
            let text = String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(!text.contains(&placeholder[..40]), "{name}: {text}");
            assert!(!text.contains("overwritten by k0sctl"), "{name}: {text}");
            let f = p.reader.parse(&out).unwrap();
            assert_eq!(f.worker_token_file, Some(want), "{name}");
            assert_eq!(f.files.len(), 1, "{name}");
            assert!(f.files[0].sha256.is_some(), "{name}: {:?}", f.files);
        }
        let p = probe_nowhere(&files, &[]);
        let f = p
            .reader
            .parse(&run_in_tmpdir(&p.command.argv, None))
            .unwrap();
        assert_eq!(f.worker_token_file, None);
        assert!(f.files[0].sha256.is_some());
    }

    /// A token file verdict of another shape is refused.
    #[test]
    fn token_file_verdict_is_parsed_strictly() {
        let p = probe_nowhere(&[], &[]).checking_token_file_at("/etc/k0s/k0stoken");
        let n = &p.reader.nonce;
        for (verdict, ok) in [
            ("decodes", true),
            ("missing", true),
            ("yes", false),
            ("", false),
        ] {
            let out = CommandOutput {
                status: Some(0),
                stdout: format!(
                    "{n} begin machine_id\n0123456789abcdef0123456789abcdef\n{n} end machine_id 0\n\
                     {n} begin token_file\n{verdict}\n{n} end token_file 0\n{n} done\n"
                )
                .into_bytes(),
                stderr: format!(
                    "{n} begin machine_id\n\n{n} end machine_id\n{n} begin token_file\n\n{n} end token_file\n"
                )
                .into_bytes(),
            };
            assert_eq!(p.reader.parse(&out).is_ok(), ok, "{verdict:?}");
        }
    }

    #[test]
    fn files_section_reports_hash_mode_owner_or_missing() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let there = d.path().join("there.conf");
        std::fs::write(&there, "x\n").unwrap();
        std::fs::set_permissions(&there, std::fs::Permissions::from_mode(0o640)).unwrap();
        let files = vec![
            there.display().to_string(),
            d.path().join("gone").display().to_string(),
            d.path().display().to_string(), // a folder is not a file
        ];
        let p = probe_nowhere(&files, &[]);
        let out = Command::new(&p.command.argv[0])
            .args(&p.command.argv[1..])
            .output()
            .unwrap();
        let out = CommandOutput {
            status: out.status.code(),
            stdout: out.stdout,
            stderr: out.stderr,
        };
        let f = p.reader.parse(&out).unwrap();
        let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        assert_eq!(f.files.len(), 3);
        assert_eq!(f.files[0].path, files[0]);
        assert_eq!(
            f.files[0].sha256.as_deref(),
            Some(crate::hash::sha256_hex("x\n").as_str())
        );
        assert_eq!(f.files[0].mode, Some(0o640));
        assert_eq!(f.files[0].user.as_deref(), Some(me.trim()));
        let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
        assert_eq!(f.files[0].uid, uid.trim().parse().ok());
        assert!(f.files[0].owned_by(Some(uid.trim()), None));
        assert!(f.files[0].owned_by(Some(me.trim()), None));
        assert!(!f.files[0].owned_by(Some("nobody-else"), None));
        assert_eq!(f.files[1].sha256, None);
        assert_eq!(f.files[2].sha256, None);
        // A short answer is an error, not files taken for missing.
        assert!(parse_files(&files, "- \n-\n").is_err());
    }

    /// Run a command's argv locally.
    fn run_locally(argv: &[String]) -> CommandOutput {
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        CommandOutput {
            status: out.status.code(),
            stdout: out.stdout,
            stderr: out.stderr,
        }
    }

    /// The probe reports the destinations that have staging files beside them, and the
    /// cleanup (`cmdline::settle_leftovers`, the same search) removes exactly those files:
    /// a link is removed without following it, a folder is left alone, the `files:` section
    /// before it is unaffected.
    #[test]
    fn probe_reports_the_staging_files_the_cleanup_removes() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let p = |n: &str| d.path().join(n).display().to_string();
        std::fs::write(p("victim"), "keep\n").unwrap();
        std::fs::write(p("app.conf"), "x\n").unwrap();
        let dests: Vec<String> = [
            "k0s", "k0s.yaml", "k0stoken", "app.conf", "clean", "odd dir", "dl",
        ]
        .iter()
        .map(|n| p(n))
        .collect();
        std::fs::write(p("k0s.k0sform-Xy34Zw"), "").unwrap();
        std::fs::write(p("k0s.k0sform-new"), "").unwrap();
        symlink(p("victim"), p("app.conf.k0sform-tmp")).unwrap();
        // A folder at a staging name is nobody's upload: not reported, not removed.
        std::fs::create_dir(p("clean.k0sform-new")).unwrap();
        // Names that only look alike (a longer random part) are not staging files.
        std::fs::write(p("odd dir.k0sform-1234567"), "").unwrap();
        std::fs::write(p("k0s.yaml.k0sform-Ab12Cd"), "").unwrap();
        // A download on the host that was cut off.
        std::fs::write(p("dl.k0sform-new.part"), "").unwrap();
        // An upload's private folder (root's, 0700) with its file is a leftover; a folder of
        // another mode at such a name is not this program's.
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir(p("dl.k0sform-Pq12Rs")).unwrap();
        std::fs::write(p("dl.k0sform-Pq12Rs/f"), "half").unwrap();
        std::fs::set_permissions(
            p("dl.k0sform-Pq12Rs"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        // Under `cargo test` as an ordinary user that folder is the user's, not root's: kept.
        let private_is_roots = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(p("dl.k0sform-Pq12Rs")).unwrap().uid() == 0
        };
        std::fs::create_dir(p("clean.k0sform-Ab12Cd")).unwrap();
        std::fs::set_permissions(
            p("clean.k0sform-Ab12Cd"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();

        let files = vec![p("app.conf"), p("gone")];
        let probe_now = || {
            let pc = probe_nowhere(&files, &dests);
            pc.reader.parse(&run_locally(&pc.command.argv)).unwrap()
        };
        let f = probe_now();
        assert_eq!(
            f.staging_leftovers,
            [p("k0s"), p("k0s.yaml"), p("app.conf"), p("dl")]
        );
        assert_eq!(f.files.len(), 2);
        assert!(f.files[0].sha256.is_some() && f.files[1].sha256.is_none());

        let settle = super::super::cmdline::settle_leftovers(&p("k0stoken"), None, &dests);
        let out = run_locally(&settle.argv);
        assert!(out.success(), "{}", out.stderr_str());
        let mut removed: Vec<String> = out.stdout_str().lines().map(String::from).collect();
        removed.sort();
        let mut want = vec![
            p("app.conf.k0sform-tmp"),
            p("k0s.k0sform-Xy34Zw"),
            p("k0s.k0sform-new"),
            p("k0s.yaml.k0sform-Ab12Cd"),
            p("dl.k0sform-new.part"),
        ];
        if private_is_roots {
            want.push(p("dl.k0sform-Pq12Rs"));
        }
        want.sort();
        assert_eq!(removed, want);
        assert_eq!(std::fs::read_to_string(p("victim")).unwrap(), "keep\n");
        assert!(std::path::Path::new(&p("clean.k0sform-new")).is_dir());
        assert!(std::path::Path::new(&p("clean.k0sform-Ab12Cd")).is_dir());
        assert_eq!(
            std::path::Path::new(&p("dl.k0sform-Pq12Rs")).exists(),
            !private_is_roots
        );
        assert!(std::path::Path::new(&p("odd dir.k0sform-1234567")).exists());
        assert_eq!(probe_now().staging_leftovers, Vec::<String>::new());
    }

    /// The probe reads the service environment from exactly the files `install_service`
    /// manages: the unit and k0sctl's drop-in it removes, no other drop-in (issue 28, item 11).
    #[test]
    fn the_probe_reads_the_dropin_install_removes_and_no_other() {
        assert!(SCRIPT.contains("\nk0sctl_dropin=env.conf\n"));
        assert!(SCRIPT.contains(r#""/etc/systemd/system/$u.service.d/$k0sctl_dropin""#));
        assert!(!SCRIPT.contains(".service.d\"/*"), "every drop-in is read");
        for kind in [ServiceKind::Controller, ServiceKind::Worker] {
            assert!(
                super::super::cmdline::k0sctl_env_dropin(kind).ends_with(".service.d/env.conf")
            );
        }
    }

    #[test]
    fn staging_report_is_parsed_strictly() {
        let dests: Vec<String> = ["/a", "/b c", "/d"].iter().map(|s| s.to_string()).collect();
        assert_eq!(parse_staging(&dests, ""), Ok(vec![]));
        assert_eq!(
            parse_staging(&dests, "0\n2\n"),
            Ok(vec!["/a".to_string(), "/d".to_string()])
        );
        assert_eq!(parse_staging(&dests, "1"), Ok(vec!["/b c".to_string()]));
        for hostile in [
            "3",
            "99999999999999999999999999",
            "1\n0",
            "1\n1",
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1 /etc/passwd",
            "/etc/passwd",
            "0\n\u{1b}[2Kcleaned up",
        ] {
            let err = parse_staging(&dests, hostile).unwrap_err();
            assert!(
                err.starts_with("the probe's report of staging files has the line"),
                "{hostile:?}: {err}"
            );
            assert!(!err.contains('\u{1b}'), "{err}");
        }
        // Through the whole parser: a hostile line fails the probe, so does a missing report.
        let base = [("machine_id", 0, "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3\n", "")];
        let with = |body: &'static str| {
            let mut v = base.to_vec();
            v.push(("staging", 0, body, ""));
            framed(&v, true)
        };
        let f = parse_probe(&with("1"), NONCE, &[], &dests).unwrap();
        assert_eq!(f.staging_leftovers, ["/b c"]);
        let err = parse_probe(&with("7"), NONCE, &[], &dests).unwrap_err();
        assert!(matches!(err, ProbeError::Host(_)), "{err:?}");
        assert!(err.to_string().contains("staging files"), "{err}");
        let err = parse_probe(&framed(&base, true), NONCE, &[], &dests).unwrap_err();
        assert_eq!(err.to_string(), "the probe did not report on staging files");
        let mut failed = base.to_vec();
        failed.push(("staging", 1, "", "sh: boom"));
        assert!(parse_probe(&framed(&failed, true), NONCE, &[], &dests).is_err());
        // Not asked: whatever a host prints there is ignored.
        assert_eq!(
            parse_probe(&with("7"), NONCE, &[], &[])
                .unwrap()
                .staging_leftovers,
            Vec::<String>::new()
        );
    }

    fn run_script(bin: &str, dd: &str, view: bool, cfg: &str) -> Result<HostFacts, ProbeError> {
        let (out, p) = probe_locally(bin, dd, view, cfg);
        p.reader.parse(&out)
    }

    /// A fake k0s (shell script) answering like a running controller, for running the real
    /// probe script locally.
    fn fake_k0s(dir: &std::path::Path, status_json: &str) -> String {
        let bin = dir.join("k0s");
        let script = format!(
            r#"#!/bin/sh
# With {dir}/together: `together ME OTHER` marks ME as started and returns once OTHER has
# started too (at most 3 s): the two only pass when they run at the same time.
together() {{
  [ -e "{dir}/together" ] || return 0
  : > "{dir}/started-$1"
  i=0
  while [ ! -e "{dir}/started-$2" ]; do
    i=$((i + 1)); [ "$i" -gt 30 ] && {{ echo "Error: $1 ran without $2" >&2; return 1; }}
    sleep 0.1
  done
}}
case "$1" in
  version) echo called >>"{calls}"; echo v1.33.4+k0s.0 ;;
  status) cat <<'EOF'
{status_json}
EOF
  ;;
  config) echo "$*" >>"{dir}/config-calls" ;;
  etcd)
    together etcd kubectl || exit 1
    [ -e "{dir}/kine" ] && {{ echo 'Error: wrong storage type: kine' >&2; exit 1; }}
    echo '{{"members":{{"c0":"https://127.0.0.10:2380","c1":"https://127.0.0.11:2380"}}}}' ;;
  kubectl)
    together kubectl etcd || exit 1
    shift
    [ "$KUBECONFIG" = "{dd}/pki/admin.conf" ] || {{ echo "Error: bad KUBECONFIG" >&2; exit 1; }}
    echo "$2" >>"{dir}/kubectl-calls"
    case "$2" in
      etcdmembers.etcd.k0sproject.io,namespaces,nodes,controlnodes.autopilot.k0sproject.io)
        [ -e "{dir}/kine" ] && {{ echo 'error: the server doesn'\''t have a resource type "etcdmembers"' >&2; exit 1; }}
        [ -e "{dir}/combined" ] || {{ echo 'error: the server doesn'\''t have a resource type "controlnodes"' >&2; exit 1; }}
        cat "{dir}/combined" ;;
      namespaces,nodes,controlnodes.autopilot.k0sproject.io) cat "{dir}/combined" ;;
      etcdmembers.etcd.k0sproject.io) echo '{{"items":[{{"metadata":{{"name":"c0"}},"status":{{"peerAddress":"127.0.0.10","memberID":"8e9e05c52164694d","conditions":[{{"type":"Joined","status":"True"}}]}}}},{{"metadata":{{"name":"c1"}},"status":{{"peerAddress":"127.0.0.99","memberID":"1111111111111111"}}}}]}}' ;;
      namespace) echo '{{"metadata":{{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}}}}' ;;
      nodes) echo '{{"items":[{{"metadata":{{"name":"c0"}},"status":{{"conditions":[{{"type":"Ready","status":"True"}}]}}}}]}}' ;;
      controlnodes.autopilot.k0sproject.io) echo "Error from server: the server could not find the requested resource" >&2; exit 1 ;;
    esac ;;
esac
"#,
            dd = dir.join("data").display(),
            dir = dir.display(),
            calls = dir.join("version-calls").display()
        );
        std::fs::write(&bin, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin.display().to_string()
    }

    /// A real k0s binary is a few hundred MB: the probe hashes it only when its `stat` line is
    /// not the recorded one, and then the record's hash stands for it.
    #[test]
    fn binary_is_hashed_only_when_its_stat_line_changed() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_k0s(dir.path(), RUNNING);
        let run = |known: Option<&BinaryRecord>| {
            let pc = probe(&bin, "/nonexistent", false, None, known, &[], &[]);
            let out = run_locally(&pc.command.argv);
            assert!(out.success(), "{}", out.stderr_str());
            let hashed = String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.ends_with(" begin binary_sha256"));
            (pc.reader.parse(&out).unwrap(), hashed)
        };
        let (first, hashed) = run(None);
        assert!(hashed, "nothing recorded: hashed");
        let rec = first.binary_record().expect("a hash and a stat line");
        assert!(crate::k0s::is_binary_stat(&rec.stat), "{}", rec.stat);

        let (again, hashed) = run(Some(&rec));
        assert!(!hashed, "an unchanged binary was hashed again");
        assert_eq!(again.binary_record(), Some(rec.clone()));

        // The same bytes written again, the modification time set back: the change time moved.
        let bytes = std::fs::read(&bin).unwrap();
        let mtime = std::fs::metadata(&bin).unwrap().modified().unwrap();
        std::fs::write(&bin, &bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&bin)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let (rewritten, hashed) = run(Some(&rec));
        assert!(hashed, "a rewritten binary was not hashed");
        assert_eq!(rewritten.k0s_binary_sha256, Some(rec.sha256.clone()));
        assert_ne!(rewritten.k0s_binary_stat, Some(rec.stat.clone()));

        // Other bytes: another hash, never the record's.
        std::fs::write(&bin, [bytes.as_slice(), b"# patched\n"].concat()).unwrap();
        let (patched, hashed) = run(Some(&rec));
        assert!(hashed);
        assert_ne!(patched.k0s_binary_sha256, Some(rec.sha256.clone()));
        assert!(patched.k0s_binary_sha256.is_some());
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
    fn k0s_defaults_are_asked_for_only_when_the_config_is_not_the_one_k0sform_writes() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_k0s(dir.path(), RUNNING);
        let dd = dir.path().join("data");
        let cfg = dir.path().join("k0s.yaml");
        let text = "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n";
        std::fs::write(&cfg, text).unwrap();
        let calls = dir.path().join("config-calls");
        let same = crate::hash::sha256_hex(text);
        let (dd, cfg) = (dd.to_str().unwrap(), cfg.to_str().unwrap());
        let (out, p) = probe_locally_wanting(&bin, dd, false, cfg, Some(&same));
        let f = p.reader.parse(&out).unwrap();
        assert_eq!(f.config_sha256.as_deref(), Some(same.as_str()));
        assert_eq!(f.config_defaults, None);
        assert!(
            !calls.exists(),
            "`k0s config create` ran for the file k0sform writes"
        );
        let other = crate::hash::sha256_hex("something else");
        let (out, p) = probe_locally_wanting(&bin, dd, false, cfg, Some(&other));
        p.reader.parse(&out).unwrap();
        assert_eq!(std::fs::read_to_string(&calls).unwrap(), "config create\n");
    }

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
        let (out, p) = probe_locally(&bin, dd.to_str().unwrap(), true, cfg.to_str().unwrap());
        assert!(out.success(), "{}", out.stderr_str());
        assert!(
            !dir.path().join("version-calls").exists(),
            "`k0s version` ran although the status named the version"
        );
        // The combined kubectl failed (no controlnodes type): one list at a time.
        let calls = std::fs::read_to_string(dir.path().join("kubectl-calls")).unwrap();
        assert_eq!(calls.lines().count(), 5, "{calls}");
        let f = p.reader.parse(&out).unwrap();
        assert!(!f.machine_id.is_empty());
        assert!(!f.hostname.is_empty());
        assert!(!f.arch.is_empty());
        assert_eq!(
            f.k0s_version.as_ref().map(ToString::to_string).as_deref(),
            Some("v1.33.4+k0s.0")
        );
        assert_eq!(f.k0s_binary_sha256.as_ref().map(String::len), Some(64));
        assert!(f.has_etcd_data);
        assert_eq!(
            f.config_text.as_deref(),
            Some(
                "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n'quoted': \"$(x)\"\n"
            )
        );
        {
            let want = crate::hash::sha256_hex(std::fs::read(&cfg).unwrap());
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
                    member_id: Some("8e9e05c52164694d".into()),
                    invocation: None,
                },
                // The c1 object's peer address does not match: a stale object gives no ID.
                MemberView {
                    name: "c1".into(),
                    peer_url: "https://127.0.0.11:2380".into(),
                    member_id: None,
                    invocation: None,
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
        let f = run_script(&bin, "/nonexistent", false, "/nonexistent/k0s.yaml").unwrap();
        assert!(f.status.is_some());
        assert!(f.view.is_none(), "view not asked for");
        assert!(!f.has_etcd_data);
        assert_eq!(f.config_text, None);

        let f = run_script(
            "/nonexistent/k0s",
            "/nonexistent",
            true,
            "/nonexistent/k0s.yaml",
        )
        .unwrap();
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
        let f = run_script(&bin, "/x", true, "/x/k0s.yaml").unwrap();
        assert_eq!(f.status.as_ref().map(|s| s.role.as_str()), Some("worker"));
        assert_eq!(
            f.k0s_version.as_ref().map(ToString::to_string).as_deref(),
            Some("v1.33.4+k0s.0")
        );
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
        let f = run_script(bin.to_str().unwrap(), "/x", true, "/x/k0s.yaml").unwrap();
        assert_eq!(
            f.k0s_version.as_ref().map(ToString::to_string).as_deref(),
            Some("v1.33.4+k0s.0")
        );
        assert_eq!(f.status, None);
        assert!(f.view.is_none());
    }

    /// A kine controller: k0s refuses `k0s etcd member-list` (`wrong storage type: kine`) and
    /// has no EtcdMember CRD. The view has no members and no errors: the kubectl that ran beside
    /// the member list is refused for the EtcdMember type, and one more leaves it out.
    #[test]
    fn kine_controller_has_no_members_and_no_errors() {
        let dir = tempfile::tempdir().unwrap();
        let status = RUNNING.replace(
            r#""ClusterConfig": {"spec": {"storage": {"etcd": {"peerAddress": "127.0.0.10"}}}}"#,
            r#""ClusterConfig": {"spec": {"storage": {"type": "kine", "kine": {"dataSource": "sqlite:///var/lib/k0s/db/state.db"}}}}"#,
        );
        let bin = fake_k0s(dir.path(), &status);
        std::fs::write(dir.path().join("kine"), "").unwrap();
        std::fs::write(
            dir.path().join("combined"),
            r#"{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"s1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}},
 {"apiVersion":"autopilot.k0sproject.io/v1beta2","kind":"ControlNode","metadata":{"name":"s1"}}
]}"#,
        )
        .unwrap();
        let dd = dir.path().join("data");
        let f = run_script(&bin, dd.to_str().unwrap(), true, "/x/k0s.yaml").unwrap();
        assert!(f.runs_kine());
        let calls = std::fs::read_to_string(dir.path().join("kubectl-calls")).unwrap();
        assert_eq!(
            calls.trim(),
            format!("{CLUSTER_OBJECTS}\nnamespaces,nodes,controlnodes.autopilot.k0sproject.io")
        );
        let v = f.view.unwrap();
        assert_eq!(v.errors, Vec::<String>::new());
        assert!(v.members.is_empty());
        assert_eq!(
            v.cluster_uid.as_deref(),
            Some("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f")
        );
        assert_eq!(v.control_nodes, ["s1"]);

        // Any other member-list failure is still an error of the view.
        std::fs::remove_file(dir.path().join("kine")).unwrap();
        std::fs::write(dir.path().join("combined"), r#"{"kind":"List","items":[]}"#).unwrap();
        let bin2 = dir.path().join("k0s");
        let text = std::fs::read_to_string(&bin2).unwrap().replace(
            "  etcd)\n",
            "  etcd)\n    echo 'Error: wrong storage type: etcd2' >&2; exit 1\n",
        );
        std::fs::write(&bin2, text).unwrap();
        let v = run_script(&bin, dd.to_str().unwrap(), true, "/x/k0s.yaml")
            .unwrap()
            .view
            .unwrap();
        assert!(
            v.errors.iter().any(|e| e.starts_with("member-list")),
            "{:?}",
            v.errors
        );
    }

    /// The member list and the objects' kubectl run at the same time (the fake lets each pass
    /// only once the other has started), and both land in their sections.
    #[test]
    fn member_list_runs_beside_the_objects_kubectl() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_k0s(dir.path(), RUNNING);
        std::fs::write(dir.path().join("combined"), r#"{"kind":"List","items":[]}"#).unwrap();
        std::fs::write(dir.path().join("together"), "").unwrap();
        let dd = dir.path().join("data");
        let tmp = tempfile::tempdir().unwrap();
        let p = probe(&bin, dd.to_str().unwrap(), true, None, None, &[], &[]);
        let argv = &p.command.argv;
        let out = run_in_tmpdir(argv, Some(tmp.path()));
        let v = p.reader.parse(&out).unwrap().view.unwrap();
        // Only the uid is missing from the empty list: both queries passed.
        assert_eq!(v.members.len(), 2, "{:?}", v.errors);
        assert!(
            v.errors.len() == 1 && v.errors[0].starts_with("kube-system uid:"),
            "{:?}",
            v.errors
        );
        // The member list's temp folder is gone.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

        // Without a temp folder they run one after the other (and the fake refuses that).
        for m in ["started-etcd", "started-kubectl"] {
            std::fs::remove_file(dir.path().join(m)).unwrap();
        }
        let out = run_in_tmpdir(argv, Some(&dir.path().join("missing")));
        let stderr = out.stderr_str();
        assert!(stderr.contains("ran without"), "{stderr}");
    }

    /// Issue 28, item 6: the probe that lists the cluster's objects takes as much output as
    /// 5,000 Nodes make; the others keep the default limit.
    #[test]
    fn the_view_has_room_for_every_node() {
        let with = probe("/k0s", "/var/lib/k0s", true, None, None, &[], &[]);
        assert_eq!(
            with.command.output_limit,
            super::super::cmdline::NODE_LISTING_LIMIT
        );
        let without = probe("/k0s", "/var/lib/k0s", false, None, None, &[], &[]);
        assert_eq!(without.command.output_limit, crate::transport::OUTPUT_LIMIT);
    }

    #[test]
    fn one_kubectl_for_the_cluster_objects() {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_k0s(dir.path(), RUNNING);
        std::fs::write(
            dir.path().join("combined"),
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[
 {"apiVersion":"etcd.k0sproject.io/v1beta1","kind":"EtcdMember","metadata":{"name":"c1"},"status":{"peerAddress":"127.0.0.11","memberID":"1111111111111111"}},
 {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"default","uid":"00000000-0000-0000-0000-000000000000"}},
 {"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kube-system","uid":"7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f"}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"w1"},"status":{"conditions":[{"type":"Ready","status":"False"}]}},
 {"apiVersion":"autopilot.k0sproject.io/v1beta2","kind":"ControlNode","metadata":{"name":"c1"}}
]}"#,
        )
        .unwrap();
        let dd = dir.path().join("data");
        let dd = dd.to_str().unwrap();
        let f = run_script(&bin, dd, true, "/x/k0s.yaml").unwrap();
        let calls = std::fs::read_to_string(dir.path().join("kubectl-calls")).unwrap();
        assert_eq!(calls.trim(), CLUSTER_OBJECTS, "one kubectl only");
        let v = f.view.unwrap();
        assert_eq!(v.errors, Vec::<String>::new());
        assert_eq!(
            v.cluster_uid.as_deref(),
            Some("7c3f2b8e-1d2a-4c5b-9e8f-0a1b2c3d4e5f")
        );
        assert_eq!(v.members.len(), 2);
        assert_eq!(v.members[1].member_id.as_deref(), Some("1111111111111111"));
        assert_eq!(v.members[0].member_id, None);
        assert_eq!((v.nodes.len(), v.nodes[0].ready), (1, false));
        assert_eq!(v.control_nodes, vec!["c1".to_string()]);

        // A list without kube-system is an error of the uid, not of the whole view.
        std::fs::write(
            dir.path().join("combined"),
            r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"w1"}}]}"#,
        )
        .unwrap();
        let v = run_script(&bin, dd, true, "/x/k0s.yaml")
            .unwrap()
            .view
            .unwrap();
        assert_eq!(v.cluster_uid, None);
        assert_eq!(v.nodes.len(), 1);
        assert!(
            v.errors[0].starts_with("kube-system uid:"),
            "{:?}",
            v.errors
        );
    }

    const NONCE: &str = "K0SFORM-0123456789abcdef0123456789abcdef";

    /// Output framed as the script frames it, with nonce `NONCE`.
    fn framed(sections: &[(&str, i32, &str, &str)], done: bool) -> CommandOutput {
        let (mut o, mut e) = (String::from("motd noise\n"), String::from("sudo noise\n"));
        for (name, rc, out, err) in sections {
            o += &format!("{NONCE} begin {name}\n{out}\n{NONCE} end {name} {rc}\n");
            e += &format!("{NONCE} begin {name}\n{err}\n{NONCE} end {name}\n");
        }
        if done {
            o += &format!("{NONCE} done\n");
        }
        CommandOutput {
            status: Some(0),
            stdout: o.into_bytes(),
            stderr: e.into_bytes(),
        }
    }

    #[test]
    fn frames_keep_output_exact_and_refuse_truncation() {
        let out = framed(
            &[
                ("machine_id", 0, "abc\n", ""),
                ("hostname", 0, "h1", "warning: x\n"),
                ("config", 0, "a: 1\n\n\nK0SFORM-0123 begin x\n", ""),
            ],
            true,
        );
        let s = sections(&out, NONCE).unwrap();
        assert_eq!(s["machine_id"].out, "abc\n");
        assert_eq!(s["hostname"].out, "h1");
        assert_eq!(s["hostname"].err, "warning: x\n");
        assert_eq!(s["config"].out, "a: 1\n\n\nK0SFORM-0123 begin x\n");
        // Truncated output (no done marker, or a section cut short) is refused.
        assert!(sections(&framed(&[("machine_id", 0, "abc", "")], false), NONCE).is_err());
        let mut cut = framed(&[("machine_id", 0, "abc", "")], true);
        cut.stdout = format!("{NONCE} begin machine_id\nabc").into_bytes();
        assert!(sections(&cut, NONCE).is_err());
        // Garbage stderr frames do not lose stdout.
        let mut odd = framed(&[("machine_id", 0, "abc", "")], true);
        odd.stderr = format!("{NONCE} begin machine_id\nno end").into_bytes();
        assert_eq!(sections(&odd, NONCE).unwrap()["machine_id"].err, "");
    }

    #[test]
    fn markers_count_only_at_line_starts() {
        // A host knows the nonce (it is on the probe's command line) and prints it mid-line.
        let body = format!("a: 1 {NONCE} end config 0\nb: {NONCE} done\n");
        let out = framed(
            &[("machine_id", 0, "abc", ""), ("config", 0, &body, "")],
            true,
        );
        let s = sections(&out, NONCE).unwrap();
        assert_eq!(s["config"].out, body);
        assert_eq!(s["machine_id"].out, "abc");
    }

    #[test]
    fn a_host_named_like_a_flag_fails_its_probe() {
        for name in ["--all", "c1\x1b[2K", "token: x"] {
            let out = framed(
                &[
                    ("machine_id", 0, "3d12a0b1c2d3e4f5a6b7c8d9e0f1a2b3\n", ""),
                    ("hostname", 0, name, ""),
                ],
                true,
            );
            let err = parse_probe(&out, NONCE, &[], &[]).unwrap_err();
            assert!(
                err.to_string().contains("not a valid Kubernetes node name"),
                "{err}"
            );
        }
    }

    #[test]
    fn unexplained_status_failure_is_an_error_not_stopped() {
        let out = framed(
            &[
                ("machine_id", 0, "abc\n", ""),
                ("status", 1, "", "Error: permission denied\n"),
            ],
            true,
        );
        let err = parse_probe(&out, NONCE, &[], &[]).unwrap_err();
        assert!(err.to_string().contains("permission denied"), "{err}");
    }

    fn object(name: &str, addr: Option<&str>, id: &str, joined: Option<bool>) -> EtcdMemberObject {
        EtcdMemberObject {
            name: name.into(),
            member_id: Some(id.into()),
            peer_address: addr.map(String::from),
            joined,
            leave: false,
            invocation: None,
        }
    }

    #[test]
    fn members_get_their_ids_by_peer_address_whatever_the_names() {
        // etcd keeps the hostname's case; the EtcdMember of k0s ≥ 1.34.1 is lower-cased.
        let list = BTreeMap::from([
            ("Ctl-A".to_string(), "https://10.0.0.1:2380".to_string()),
            ("Ctl-B".to_string(), "https://10.0.0.2:2380".to_string()),
            ("c3".to_string(), "https://10.0.0.3:2380".to_string()),
            (String::new(), "https://10.0.0.4:2380".to_string()),
        ]);
        let objects = vec![
            object("ctl-a", Some("10.0.0.1"), "a1", Some(true)),
            // Left, kept after leaving; the current one wins.
            object("ctl-b-old", Some("10.0.0.2"), "b0", Some(false)),
            object("ctl-b", Some("10.0.0.2"), "b1", Some(true)),
            // Same name, another address: a stale object of the host's previous life.
            object("c3", Some("10.0.0.99"), "c0", None),
            // Not reconciled yet (no peer address): matched by name, ignoring case.
            object("C3", None, "c1", None),
        ];
        let m = merge_members(&list, &objects);
        let id = |url: &str| {
            m.iter()
                .find(|v| v.peer_url == url)
                .and_then(|v| v.member_id.clone())
        };
        assert_eq!(id("https://10.0.0.1:2380").as_deref(), Some("a1"));
        assert_eq!(id("https://10.0.0.2:2380").as_deref(), Some("b1"));
        assert_eq!(id("https://10.0.0.3:2380").as_deref(), Some("c1"));
        assert_eq!(id("https://10.0.0.4:2380"), None, "unstarted, no object");
    }

    /// The probe script with its machine-id paths moved under `root`.
    fn script_with_root(root: &std::path::Path) -> String {
        SCRIPT
            .replace(
                "/etc/machine-id",
                &format!("{}/etc/machine-id", root.display()),
            )
            .replace(
                "/var/lib/dbus/machine-id",
                &format!("{}/var/lib/dbus/machine-id", root.display()),
            )
            .replace(
                GENERATED_MACHINE_ID,
                &format!("{}{GENERATED_MACHINE_ID}", root.display()),
            )
    }

    fn machine_id_under(root: &std::path::Path) -> Result<String, ProbeError> {
        let p = probe_nowhere(&[], &[]);
        let mut argv = p.command.argv.clone();
        argv[2] = script_with_root(root);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        let out = CommandOutput {
            status: out.status.code(),
            stdout: out.stdout,
            stderr: out.stderr,
        };
        p.reader.parse(&out).map(|f| f.machine_id)
    }

    #[test]
    fn machine_id_falls_back_to_dbus_then_to_a_generated_stable_id() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::create_dir_all(root.join("var/lib/dbus")).unwrap();
        std::fs::write(
            root.join("var/lib/dbus/machine-id"),
            "d0b5000000000000000000000000d0b5\n",
        )
        .unwrap();
        assert_eq!(
            machine_id_under(root).unwrap(),
            "d0b5000000000000000000000000d0b5"
        );
        std::fs::write(
            root.join("etc/machine-id"),
            "e7c0000000000000000000000000e7c0\n",
        )
        .unwrap();
        assert_eq!(
            machine_id_under(root).unwrap(),
            "e7c0000000000000000000000000e7c0"
        );

        // Neither: one is generated and kept, so the next probe sees the same.
        std::fs::remove_file(root.join("etc/machine-id")).unwrap();
        std::fs::remove_file(root.join("var/lib/dbus/machine-id")).unwrap();
        let first = machine_id_under(root).unwrap();
        assert_eq!(first.len(), 32, "{first}");
        assert!(first.chars().all(|c| c.is_ascii_hexdigit()), "{first}");
        assert_eq!(machine_id_under(root).unwrap(), first);
        let kept = root.join(GENERATED_MACHINE_ID.trim_start_matches('/'));
        assert_eq!(std::fs::read_to_string(kept).unwrap().trim(), first);
    }

    #[test]
    fn a_status_that_times_out_is_k0s_not_answering() {
        assert!(SCRIPT.contains(&format!("status_bound={STATUS_BOUND_SECS}\n")));
        for rc in [124, 137] {
            let out = framed(
                &[("machine_id", 0, "abc\n", ""), ("status", rc, "", "")],
                true,
            );
            let err = parse_probe(&out, NONCE, &[], &[]).unwrap_err();
            assert_eq!(err, ProbeError::K0sNotAnswering(STATUS_BOUND_SECS));
            assert!(err.to_string().starts_with("k0s not answering"), "{err}");
        }
    }

    /// The unit lines `k0s install -e` writes (pkg/install/systemd_linux.go, openrc_linux.go),
    /// read as name → sha256 of the value; nothing of a value is kept.
    #[test]
    fn service_environment_is_read_as_hashes() {
        let unit = "[Service]\nExecStart=/usr/local/bin/k0s worker\nEnvironment=\"HTTP_PROXY=http://p:3128\"\nEnvironment=\"TOKEN=a=b\"\nRestartSec=10\n";
        let env = parse_service_env(unit).unwrap();
        assert_eq!(env.len(), 2);
        assert_eq!(env["HTTP_PROXY"], crate::hash::sha256_hex("http://p:3128"));
        assert_eq!(env["TOKEN"], crate::hash::sha256_hex("a=b"));
        let openrc = parse_service_env("export EMPTY=\nexport X=1\n").unwrap();
        assert_eq!(openrc["EMPTY"], crate::hash::sha256_hex(""));
        assert!(parse_service_env("").unwrap().is_empty());
        assert!(parse_service_env("Environment=\"NOEQUALS\"\n").is_err());
        // k0sctl's drop-in (rig v2 ServiceEnvironmentContent: shellescape.Quote), read after the
        // unit: its values win; an empty Environment= clears what came before.
        let merged = parse_service_env(
            "Environment=\"A=unit\"\nEnvironment=\"B=unit\"\nEnvironment=A=dropin\nEnvironment='SP=hello world' 'Q=it'\"'\"'s'\n",
        )
        .unwrap();
        assert_eq!(merged["A"], crate::hash::sha256_hex("dropin"));
        assert_eq!(merged["B"], crate::hash::sha256_hex("unit"));
        assert_eq!(merged["SP"], crate::hash::sha256_hex("hello world"));
        assert_eq!(merged["Q"], crate::hash::sha256_hex("it's"));
        let cleared =
            parse_service_env("Environment=\"A=1\"\nEnvironment=\nEnvironment=B=2\n").unwrap();
        assert_eq!(cleared.keys().collect::<Vec<_>>(), ["B"]);
        assert!(parse_service_env("Environment='A=1\n").is_err());
        assert!(parse_service_env("Environment=\"BAD-NAME=1\"\n").is_err());
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
