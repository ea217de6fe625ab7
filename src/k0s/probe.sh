bin=$1 dd=$2 view=$3 cfg=$4 N=$5 objects=$6 want_cfg=$7 known_bin=$8 status_bound=10
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
# (no install changes them): not read. On OpenRC k0sctl writes them to /etc/conf.d/<unit> as
# `export 'NAME=VALUE'` (rig v2 initsystem/openrc.go), which openrc-run sources before the
# init script (whose own exports then win) and whose exports every install removes.
# Values may be secrets: the parser keeps only their sha256.
service_env() {
  for u in k0scontroller k0sworker k0sserver; do
    # shellcheck disable=SC2154 # k0sctl_dropin is set by the line SCRIPT (probe_script.rs) puts first
    for f in "/etc/systemd/system/$u.service" "/etc/conf.d/$u" "/etc/init.d/$u" "/etc/systemd/system/$u.service.d/$k0sctl_dropin"; do
      if [ -f "$f" ]; then grep -e '^Environment=' -e '^export ' -- "$f"; fi
    done
  done
  return 0
}
emit service_env service_env
# /etc/environment, where k0sctl writes the hosts' `environment` too (phase/prepare_hosts.go);
# values may be secrets: the parser keeps only their sha256. A missing file is an empty one.
etc_environment() { if [ -f /etc/environment ]; then show /etc/environment; fi; }
emit etc_environment etc_environment
emit etcd_data test -e "$dd/etcd/member/snap/db"
# The host's IPv4 addresses and routes, as k0sctl reads them to find its private address
# (configurer/linux.go PrivateInterface, PrivateAddress; its PATH): k0s::private_address.
net() (
  PATH=/usr/local/sbin:/usr/sbin:/sbin:$PATH
  echo '@@net-addr'; ip -o -4 addr show scope global 2>/dev/null | head -n 256
  echo '@@net-route'; ip route list scope global 2>/dev/null | head -n 256
  echo '@@net-default'; ip route list 2>/dev/null | grep -m1 '^default'
  return 0
)
emit net net
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
  if [ "$role" = controller ] && [ "$view" != 0 ]; then
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
    # view=2 (dynamic config): the ClusterConfig object k0s works from, read-only (k0sctl
    # action/config_edit.go reads it the same way).
    [ "$view" = 2 ] && emit cluster_config kc -n kube-system get clusterconfig k0s -o json
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
