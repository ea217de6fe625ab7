#!/usr/bin/python3
"""k0sform test lab: simulated hosts, each a loopback address with a real sshd in its own
PID/mount/UTS namespaces and a private disk under DIR/hosts/<name>/disk.

Owns host lifecycle (create, power-off/on, wipe, destroy, teardown), the address-range claims
under /tmp/k0sform-lab-ranges/ and the per-host "systemd" boot emulation. Runs as root.
"""

import argparse
import base64
import ctypes
import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

sys.dont_write_bytecode = True  # no __pycache__ beside labnet.py in the repo
import labnet  # noqa: E402

LAB_PY = os.path.abspath(__file__)
RANGES_DIR = "/tmp/k0sform-lab-ranges"
SUDO_USER = "k0slab"
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Inside a host, its lab folder DIR/hosts/<name> is visible here (sshd config, keys, log, address).
HOST_LAB_DIR = "/etc/k0s-lab"
SERVICE_RUN_DIR = "/run/k0s-service"
UNITS = ("k0scontroller.service", "k0sworker.service")

# (path inside the host, name under DIR/hosts/<name>/disk, kind). /tmp is mounted last because the
# lab folder itself usually lives under the real /tmp.
DISK_MOUNTS = [
    ("/root", "root", "dir"),
    ("/etc/k0s", "etc-k0s", "dir"),
    ("/var/lib/k0s", "var-lib-k0s", "dir"),
    ("/usr/local/bin", "usr-local-bin", "dir"),
    ("/etc/systemd/system", "etc-systemd-system", "dir"),
    # Where operators put their own k0s paths and `files:`: private, so a test never writes to
    # the real machine's /opt or /srv.
    ("/opt", "opt", "dir"),
    ("/srv", "srv", "dir"),
    ("/etc/machine-id", "machine-id", "file"),
    ("/etc/hostname", "hostname", "file"),
    ("/etc/hosts", "hosts", "file"),
    # k0sform writes a host's `environment` there, as k0sctl does: never the real machine's.
    ("/etc/environment", "environment", "file"),
    ("/tmp", "tmp", "dir"),
]


class LabError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# small helpers


def log(msg):
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_json(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def pid_alive(pid):
    """True when pid exists and is not a zombie."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def pid_start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def kill_pid(pid, start=None, sig=signal.SIGKILL):
    """Kill pid only if it is still the process we started (same start time)."""
    if not pid_alive(pid):
        return
    if start is not None and pid_start_time(pid) != start:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_dead(pid, timeout=5.0):
    end = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < end:
        time.sleep(0.01)
    return not pid_alive(pid)


def port_open(addr, port, timeout=0.2):
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return True
    except OSError:
        return False


def can_bind(addr, port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def fingerprint(pub_path):
    with open(pub_path) as f:
        blob = base64.b64decode(f.read().split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def own_address(h):
    """The address the host has on its first interface: the SSH address, except for a host in
    its own network namespace (its 'public' address, else its private one)."""
    if not h.get("net"):
        return h["address"]
    return h.get("public_address") or h["private_address"]


def keygen(path, comment):
    for p in (path, path + ".pub"):
        if os.path.exists(p):
            os.unlink(p)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    os.chmod(path, 0o600)


class DirLock:
    """Serialises mutations of one lab folder (parallel test threads may power hosts at once)."""

    def __init__(self, lab_dir):
        self.path = os.path.join(lab_dir, ".lock")

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


# ---------------------------------------------------------------------------------------------
# lab folder layout


class Lab:
    def __init__(self, lab_dir):
        self.dir = os.path.abspath(lab_dir)

    @property
    def info_path(self):
        return os.path.join(self.dir, "lab.json")

    @property
    def state_path(self):
        return os.path.join(self.dir, "state.json")

    def info(self):
        if not os.path.exists(self.info_path):
            raise LabError(f"{self.dir} is not a lab folder (no lab.json)")
        return read_json(self.info_path)

    def state(self):
        if os.path.exists(self.state_path):
            return read_json(self.state_path)
        return {"hosts": {}}

    def host_dir(self, name):
        return os.path.join(self.dir, "hosts", name)

    def host(self, info, name):
        for h in info["hosts"]:
            if h["name"] == name:
                return h
        raise LabError(f"no host {name!r} in lab {self.dir}")

    # -- files derived from lab.json ------------------------------------------------------

    def write_client_files(self, info):
        key = info["ssh_key"]
        lines = []
        for h in info["hosts"]:
            lines += [
                f"Host {h['name']}",
                f"  HostName {h['address']}",
                f"  Port {h['port']}",
                "  User root",
                f"  IdentityFile {key}",
                "  IdentitiesOnly yes",
                f"  UserKnownHostsFile {self.dir}/known_hosts",
                "  GlobalKnownHostsFile /dev/null",
                "  StrictHostKeyChecking accept-new",
                "  BatchMode yes",
                "  ConnectTimeout 5",
                "  LogLevel ERROR",
            ]
            if info.get("bastion") and h["name"] != info["bastion"]:
                lines.append(f"  ProxyJump {info['bastion']}")
            lines.append("")
        with open(os.path.join(self.dir, "ssh_config"), "w") as f:
            f.write("\n".join(lines))
        known = []
        for h in info["hosts"]:
            with open(os.path.join(self.host_dir(h["name"]), "ssh_host_ed25519_key.pub")) as f:
                kt, kb = f.read().split()[:2]
            known.append(f"{h['address']} {kt} {kb}\n")
        with open(os.path.join(self.dir, "known_hosts"), "w") as f:
            f.write("".join(known))

    def write_host_config(self, info, h):
        hd = self.host_dir(h["name"])
        addr = h["address"]
        # A host in its own network namespace listens on all of its addresses, as a cloud
        # machine's sshd does; the others share this machine's and keep to their own address.
        listen = "0.0.0.0" if h.get("net") else addr
        cfg = f"""# sshd of simulated host {h['name']} (k0sform lab)
ListenAddress {listen}:{h['port']}
HostKey {HOST_LAB_DIR}/ssh_host_ed25519_key
PidFile /run/sshd.pid
AuthorizedKeysFile {HOST_LAB_DIR}/authorized_keys/%u
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
LogLevel VERBOSE
AllowTcpForwarding yes
MaxStartups 200:30:400
MaxSessions 100
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
"""
        with open(os.path.join(hd, "sshd_config"), "w") as f:
            f.write(cfg)
        with open(os.path.join(hd, "address"), "w") as f:
            f.write(addr + "\n")
        with open(os.path.join(hd, "name"), "w") as f:
            f.write(h["name"] + "\n")
        # The double reads this: a host with its own network namespace finds its own addresses
        # as k0s does (internal/pkg/iface); the others use `address` as their own.
        net_file = os.path.join(hd, "net")
        if h.get("net"):
            with open(net_file, "w") as f:
                f.write(h["net"] + "\n")
        elif os.path.exists(net_file):
            os.unlink(net_file)
        ak = os.path.join(hd, "authorized_keys")
        os.makedirs(ak, exist_ok=True)
        with open(info["ssh_key"] + ".pub") as f:
            pub = f.read()
        users = ["root"] + ([h["sudo_user"]] if h.get("sudo_user") else [])
        for u in os.listdir(ak):
            if u not in users:
                os.unlink(os.path.join(ak, u))
        for u in users:
            with open(os.path.join(ak, u), "w") as f:
                f.write(pub)
            os.chmod(os.path.join(ak, u), 0o644)

    def make_disk(self, h):
        """A fresh, empty disk with a new machine-id and host key: what `wipe` and `create` give."""
        hd = self.host_dir(h["name"])
        disk = os.path.join(hd, "disk")
        if os.path.exists(disk):
            shutil.rmtree(disk)
        os.makedirs(disk)
        for _, sub, kind in DISK_MOUNTS:
            p = os.path.join(disk, sub)
            if kind == "dir":
                os.makedirs(p)
        os.chmod(os.path.join(disk, "tmp"), 0o1777)
        os.chmod(os.path.join(disk, "root"), 0o700)
        machine_id = uuid.uuid4().hex
        with open(os.path.join(disk, "machine-id"), "w") as f:
            f.write(machine_id + "\n")
        with open(os.path.join(disk, "hostname"), "w") as f:
            f.write(h["name"] + "\n")
        with open(os.path.join(disk, "hosts"), "w") as f:
            f.write(
                "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                f"{own_address(h)}\t{h['name']}\n"
            )
        open(os.path.join(disk, "environment"), "w").close()
        keygen(os.path.join(hd, "ssh_host_ed25519_key"), f"root@{h['name']}")
        h["machine_id"] = machine_id
        h["host_key_fingerprint"] = fingerprint(os.path.join(hd, "ssh_host_ed25519_key.pub"))

    # -- power ------------------------------------------------------------------------------

    def is_on(self, state, name):
        hs = state["hosts"].get(name)
        return bool(hs) and pid_alive(hs.get("init_pid")) and pid_start_time(hs["init_pid"]) == hs.get("init_start")

    def spawn(self, name, netns=None):
        """Boot one host: unshare → `lab.py _boot` as PID 1 of the host's namespaces (inside its
        network namespace, when it has one: nsenter execs unshare, so the PID is unshare's)."""
        hd = self.host_dir(name)
        logf = open(os.path.join(hd, "init.log"), "ab")
        enter = ["nsenter", f"--net={labnet.NETNS_DIR}/{netns}", "--"] if netns else []
        p = subprocess.Popen(
            enter + ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--uts",
             "--propagation", "private", "--mount-proc",
             "/usr/bin/python3", LAB_PY, "_boot", hd],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, cwd="/",
            env={"PATH": CLEAN_PATH, "LANG": "C.UTF-8", "HOME": "/root"},
            start_new_session=True,
        )
        logf.close()
        return p.pid

    def find_init(self, unshare_pid, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with open(f"/proc/{unshare_pid}/task/{unshare_pid}/children") as f:
                    kids = f.read().split()
                if kids:
                    return int(kids[0])
            except OSError:
                raise LabError(f"host start-up failed (unshare {unshare_pid} exited)")
            time.sleep(0.005)
        raise LabError("host start-up failed: no namespace init appeared")

    def power_on_many(self, names):
        info = self.info()
        state = self.state()
        started = []
        for name in names:
            if self.is_on(state, name):
                continue
            h = self.host(info, name)
            if not h.get("net") and not can_bind(h["address"], h["port"]):
                raise LabError(f"{h['address']}:{h['port']} is busy: cannot power on {name}")
            self.write_host_config(info, h)
            unshare_pid = self.spawn(name, h.get("netns"))
            started.append((name, h, unshare_pid))
        for name, h, unshare_pid in started:
            init_pid = self.find_init(unshare_pid)
            state["hosts"][name] = {
                "unshare_pid": unshare_pid,
                "unshare_start": pid_start_time(unshare_pid),
                "init_pid": init_pid,
                "init_start": pid_start_time(init_pid),
            }
        write_json(self.state_path, state)
        end = time.monotonic() + 15
        for name, h, _ in started:
            while not port_open(h["address"], h["port"]):
                if time.monotonic() > end or not pid_alive(state["hosts"][name]["init_pid"]):
                    raise LabError(f"sshd of {name} did not come up; see {self.host_dir(name)}/init.log")
                time.sleep(0.02)

    def power_off(self, name):
        state = self.state()
        hs = state["hosts"].get(name)
        if not hs:
            return
        # Killing the namespace's PID 1 makes the kernel kill every process of the host; unshare
        # follows (--kill-child works the other way round, covering a killed unshare).
        kill_pid(hs.get("init_pid"), hs.get("init_start"))
        kill_pid(hs.get("unshare_pid"), hs.get("unshare_start"))
        wait_dead(hs.get("init_pid"))
        wait_dead(hs.get("unshare_pid"))
        info = self.info()
        try:
            h = self.host(info, name)
            end = time.monotonic() + 5
            while port_open(h["address"], h["port"]) and time.monotonic() < end:
                time.sleep(0.01)
        except LabError:
            pass
        del state["hosts"][name]
        write_json(self.state_path, state)


# ---------------------------------------------------------------------------------------------
# address ranges


def claim_range():
    """Claim a free 127.A.B.0/24; the flock is held by the lab's keeper process for the lab's life."""
    os.makedirs(RANGES_DIR, exist_ok=True)
    candidates = [(a, b) for a in range(100, 200) for b in range(0, 256)]
    random.shuffle(candidates)
    for a, b in candidates[:2000]:
        path = os.path.join(RANGES_DIR, f"127.{a}.{b}.lock")
        fd = labnet.try_lock(path)
        if fd is None:
            continue
        # A leftover of a crashed run may still listen here; skip such ranges.
        if not all(can_bind(f"127.{a}.{b}.{i}", 22) for i in (10, 11, 12)):
            os.close(fd)
            continue
        return f"127.{a}.{b}", path, fd
    raise LabError("no free 127.x.y.0/24 range")


def start_keeper(lab_dir, lock_fds, owner):
    args = ["/usr/bin/python3", LAB_PY, "_keeper", lab_dir] + [f"--lock-fd={fd}" for fd in lock_fds]
    if owner:
        args += ["--owner", str(owner), "--owner-start", str(pid_start_time(owner))]
    p = subprocess.Popen(
        args, pass_fds=list(lock_fds), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(lab_dir, "keeper.log"), "ab"), start_new_session=True, cwd="/",
    )
    return p.pid


def ensure_sudo_user():
    os.makedirs(RANGES_DIR, exist_ok=True)
    fd = os.open(os.path.join(RANGES_DIR, ".users.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if subprocess.run(["id", SUDO_USER], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", SUDO_USER], check=True)
        # '*' = no password but not locked: sshd refuses key logins for locked ('!') accounts.
        subprocess.run(["usermod", "-p", "*", SUDO_USER], check=True)
        rule = f"{SUDO_USER} ALL=(ALL:ALL) NOPASSWD:ALL\n"
        path = f"/etc/sudoers.d/{SUDO_USER}"
        if not os.path.exists(path) or open(path).read() != rule:
            with open(path + ".tmp", "w") as f:
                f.write(rule)
            os.chmod(path + ".tmp", 0o440)
            os.replace(path + ".tmp", path)
    finally:
        os.close(fd)


def ensure_mount_points():
    for inside, _, kind in DISK_MOUNTS + [(HOST_LAB_DIR, "", "dir")]:
        if kind == "dir":
            os.makedirs(inside, exist_ok=True)
        elif not os.path.exists(inside):
            open(inside, "a").close()
    os.makedirs("/run/sshd", exist_ok=True)


# ---------------------------------------------------------------------------------------------
# commands


def cmd_create(a):
    if os.geteuid() != 0:
        raise LabError("the lab must run as root")
    lab = Lab(a.dir)
    os.makedirs(lab.dir, exist_ok=True)
    if os.path.exists(lab.info_path):
        raise LabError(f"{lab.dir} already holds a lab")
    specs = []
    for item in a.hosts.split(","):
        name, _, role = item.partition(":")
        if not name or not role:
            raise LabError(f"bad host {item!r}: expected NAME:ROLE")
        specs.append((name, role))
    names = [n for n, _ in specs]
    if len(set(names)) != len(names):
        raise LabError("host names must be unique")
    nets = labnet.parse_nets(a.net)
    for n in list(a.sudo_user) + ([a.bastion] if a.bastion else []) + list(nets):
        if n not in names:
            raise LabError(f"unknown host {n!r}")
    ensure_mount_points()
    if a.sudo_user:
        ensure_sudo_user()
    prefix, lock_path, lock_fd = claim_range()
    fds = [lock_fd]
    slot = None
    if nets:
        try:
            slot, _, net_fd = labnet.claim_slot()
        except labnet.NetError:
            os.close(lock_fd)
            raise
        fds.append(net_fd)
    keeper = start_keeper(lab.dir, fds, a.owner_pid)
    for fd in fds:
        os.close(fd)
    with open(lock_path, "w") as f:
        json.dump({"dir": lab.dir, "keeper": keeper}, f)
    write_json(lab.state_path, {"hosts": {}, "range": prefix, "lock": lock_path, "keeper_pid": keeper,
                                "keeper_start": pid_start_time(keeper),
                                **({"net": {"slot": slot, "netns": []}} if slot is not None else {})})
    key = os.path.join(lab.dir, "id_ed25519")
    keygen(key, "k0sform-lab")
    info = {"dir": lab.dir, "range": prefix + ".0/24", "ssh_key": key,
            "ssh_config": os.path.join(lab.dir, "ssh_config"),
            "known_hosts": os.path.join(lab.dir, "known_hosts"), "hosts": []}
    if a.bastion:
        info["bastion"] = a.bastion
    try:
        if slot is not None:
            info["net"] = labnet.create_bridges(slot)
        for i, (name, role) in enumerate(specs):
            h = {"name": name, "role": role, "address": f"{prefix}.{11 + i}", "port": 22}
            if name in a.sudo_user:
                h["sudo_user"] = SUDO_USER
            if name in nets:
                add_host_net(lab, slot, i, h, nets[name])
            os.makedirs(lab.host_dir(name))
            lab.make_disk(h)
            info["hosts"].append(h)
        if slot is not None:
            labnet.write_lab_rules(info)
        write_json(lab.info_path, info)
        lab.write_client_files(info)
        with DirLock(lab.dir):
            lab.power_on_many(names)
    except BaseException:
        teardown(lab)
        raise
    print(json.dumps(info, indent=2))


def add_host_net(lab, slot, idx, h, kind):
    """Gives host h (index idx in the lab) its own network namespace of the given kind."""
    state = lab.state()
    state["net"]["netns"].append(labnet.netns_name(slot, idx))  # recorded first: torn down if half made
    write_json(lab.state_path, state)
    h.update(labnet.create_host(slot, idx, kind))


def teardown(lab):
    state = lab.state()
    for name in list(state["hosts"]):
        lab.power_off(name)
    state = lab.state()
    labnet.remove_lab(state)
    if state.get("keeper_pid") and state["keeper_pid"] != os.getpid():
        kill_pid(state["keeper_pid"], state.get("keeper_start"), signal.SIGKILL)
        wait_dead(state["keeper_pid"])
    lock = state.get("lock")
    if lock and os.path.exists(lock):
        try:
            if read_json(lock).get("dir") == lab.dir:
                os.unlink(lock)
        except (OSError, ValueError):
            pass
    state["hosts"] = {}
    if os.path.isdir(lab.dir):
        write_json(lab.state_path, state)


def cmd_teardown(a):
    lab = Lab(a.dir)
    if not os.path.exists(lab.state_path):
        return
    with DirLock(lab.dir):
        teardown(lab)


def cmd_power_on(a):
    lab = Lab(a.dir)
    with DirLock(lab.dir):
        lab.power_on_many([a.name])


def cmd_power_off(a):
    lab = Lab(a.dir)
    with DirLock(lab.dir):
        lab.host(lab.info(), a.name)
        lab.power_off(a.name)


def cmd_wipe(a):
    lab = Lab(a.dir)
    with DirLock(lab.dir):
        info = lab.info()
        h = lab.host(info, a.name)
        lab.power_off(a.name)
        lab.make_disk(h)
        write_json(lab.info_path, info)
        lab.write_client_files(info)
        lab.power_on_many([a.name])
    print(json.dumps(h, indent=2))


def cmd_readdress(a):
    """The same machine at a new address (DHCP lease, re-IP): powered off, given another
    address of the lab's range (ADDRESS, or the first free one from .100), booted again with
    the same disk, machine-id, host key and installed k0s units."""
    lab = Lab(a.dir)
    with DirLock(lab.dir):
        info = lab.info()
        h = lab.host(info, a.name)
        if h.get("net"):
            raise LabError(f"{a.name} has its own network namespace: readdress is for the others")
        prefix = info["range"].split("/")[0].rsplit(".", 1)[0]
        used = {x["address"] for x in info["hosts"]}
        if a.address:
            new = a.address
            if not new.startswith(prefix + ".") or new in used:
                raise LabError(f"{new} is not a free address of the lab's range {info['range']}")
        else:
            new = next((f"{prefix}.{i}" for i in range(100, 255) if f"{prefix}.{i}" not in used), None)
            if new is None:
                raise LabError(f"no free address left in {info['range']}")
        lab.power_off(a.name)
        old = h["address"]
        h["address"] = new
        hosts_file = os.path.join(lab.host_dir(a.name), "disk", "hosts")
        with open(hosts_file) as f:
            text = f.read()
        with open(hosts_file, "w") as f:
            f.write(text.replace(f"{old}\t{h['name']}", f"{new}\t{h['name']}"))
        write_json(lab.info_path, info)
        lab.write_client_files(info)
        lab.power_on_many([a.name])
    print(json.dumps(h, indent=2))


def cmd_destroy(a):
    lab = Lab(a.dir)
    with DirLock(lab.dir):
        info = lab.info()
        lab.host(info, a.name)
        lab.power_off(a.name)
        shutil.rmtree(lab.host_dir(a.name), ignore_errors=True)
        gone = lab.host(info, a.name)
        info["hosts"] = [h for h in info["hosts"] if h["name"] != a.name]
        if info.get("bastion") == a.name:
            del info["bastion"]
        if gone.get("netns"):
            labnet.delete_host(gone["netns"])
            labnet.write_lab_rules(info)
        write_json(lab.info_path, info)
        lab.write_client_files(info)


def cmd_exec(a):
    lab = Lab(a.dir)
    state = lab.state()
    if not lab.is_on(state, a.name):
        lab.host(lab.info(), a.name)
        raise LabError(f"host {a.name} is powered off")
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        raise LabError("exec needs a command after --")
    pid = state["hosts"][a.name]["init_pid"]
    env = {"PATH": CLEAN_PATH, "HOME": "/root", "LANG": "C.UTF-8", "USER": "root", "LOGNAME": "root"}
    os.execvpe("nsenter", ["nsenter", "-t", str(pid), "-m", "-u", "-p", "-n", "--wd=/", "--"] + cmd, env)


def cmd_hide(a):
    """Hide programs inside a running host (e.g. /usr/bin/curl): an empty, non-executable file
    is bind-mounted over each path in the host's mount namespace, until it powers off."""
    lab = Lab(a.dir)
    state = lab.state()
    if not lab.is_on(state, a.name):
        raise LabError(f"host {a.name} is powered off")
    empty = os.path.join(lab.host_dir(a.name), "hidden")
    open(empty, "w").close()
    os.chmod(empty, 0o644)
    pid = state["hosts"][a.name]["init_pid"]
    for path in a.paths:
        subprocess.run(["nsenter", "-t", str(pid), "-m", "--", "mount", "--bind",
                        f"{HOST_LAB_DIR}/hidden", path], check=True)


def cmd_status(a):
    lab = Lab(a.dir)
    info = lab.info()
    state = lab.state()
    for h in info["hosts"]:
        on = lab.is_on(state, h["name"])
        pid = state["hosts"][h["name"]]["init_pid"] if on else "-"
        net = f" {h['net']} {h['private_address']}" if h.get("net") else ""
        print(f"{h['name']:<12} {h['role']:<18} {h['address']:<16} {'on' if on else 'off':<4} {pid}{net}")


def cmd_teardown_all(a):
    """Tear down labs whose keeper died (crashed runs); with --all, every lab on this machine."""
    live = set()
    if os.path.isdir(RANGES_DIR):
        for fn in sorted(os.listdir(RANGES_DIR)):
            if not fn.endswith(".lock") or fn.startswith("."):
                continue
            path = os.path.join(RANGES_DIR, fn)
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                stale = True
            except BlockingIOError:
                stale = False
            try:
                d = read_json(path).get("dir")
            except (OSError, ValueError):
                d = None
            if stale or a.all:
                if d and os.path.exists(os.path.join(d, "state.json")):
                    log(f"tearing down {d}")
                    teardown(Lab(d))
                if os.path.exists(path):
                    os.unlink(path)
            elif d:
                live.add(d)
            os.close(fd)
    # Network slots no live keeper holds (their lab folder may be gone with its state.json).
    labnet.remove_stale_slots()
    # Host processes whose lab folder vanished (or whose lab is not live) are leftovers.
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [x.decode(errors="replace") for x in argv]
        if LAB_PY in argv and "_boot" in argv:
            hd = argv[argv.index("_boot") + 1]
            if os.path.dirname(os.path.dirname(hd)) not in live:
                log(f"killing leftover host process {pid} ({hd})")
                kill_pid(int(pid))
        if LAB_PY in argv and "_keeper" in argv:
            d = argv[argv.index("_keeper") + 1]
            if d not in live:
                kill_pid(int(pid))


# ---------------------------------------------------------------------------------------------
# inside a host: PID 1


def libc_mount(src, dst, fstype, flags, data):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(src.encode(), dst.encode(), fstype.encode() if fstype else None, flags,
                  data.encode() if data else None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"mount {src} on {dst}: {os.strerror(e)}")


MS_BIND = 4096
MS_NOSUID = 2
MS_NODEV = 4


# k0s writes its units with Restart=always and RestartSec=10 (pkg/install/systemd_linux.go):
# systemd starts whatever binary is at the ExecStart path 10 s after the process exits, unless
# it was stopped on purpose (`k0s stop` writes <unit>.stopped with the PID it stopped).
RESTART_SEC = 10.0


def start_unit(unit):
    """Start an installed, enabled unit as systemd would (its ExecStart and Environment=)."""
    import shlex

    path = f"/etc/systemd/system/{unit}"
    if not os.path.exists(path):
        return
    exec_start, env, cond = None, {}, None
    # The unit, then its drop-ins in name order (`<unit>.d/*.conf`; k0sctl writes a host's
    # environment to env.conf there); an empty Environment= clears the list.
    dropins = path + ".d"
    files = [path] + (sorted(os.path.join(dropins, n) for n in os.listdir(dropins)
                             if n.endswith(".conf")) if os.path.isdir(dropins) else [])
    for f in files:
        for line in open(f):
            line = line.strip()
            if line.startswith("ExecStart="):
                exec_start = shlex.split(line[len("ExecStart="):])
            elif line.startswith("Environment="):
                words = shlex.split(line[len("Environment="):])
                if not words:
                    env = {}
                for kv in words:
                    k, _, v = kv.partition("=")
                    env[k] = v
            elif line.startswith("ConditionFileIsExecutable="):
                cond = line.split("=", 1)[1]
    if not exec_start or (cond and not os.access(cond, os.X_OK)):
        return
    spawn_service(unit, exec_start, env)


def boot_units():
    """systemd emulation: an installed k0s unit is enabled (WantedBy=multi-user.target), so start it."""
    for unit in UNITS:
        start_unit(unit)


def read_pid(path):
    try:
        return int(open(path).read().strip() or 0)
    except (OSError, ValueError):
        return 0


def main_pid_exited(pid):
    """The unit whose main PID just exited without being stopped, if any (Restart=always)."""
    for unit in UNITS:
        if read_pid(f"{SERVICE_RUN_DIR}/{unit}.pid") == pid:
            if read_pid(f"{SERVICE_RUN_DIR}/{unit}.stopped") == pid:
                return None
            return unit
    return None


def restart_if_still_down(unit, pid):
    """RestartSec has passed: start the unit again unless someone started or stopped it since."""
    if read_pid(f"{SERVICE_RUN_DIR}/{unit}.pid") != pid or read_pid(f"{SERVICE_RUN_DIR}/{unit}.stopped") == pid:
        return
    print(f"boot: {unit} exited; restarting it (Restart=always)", file=sys.stderr, flush=True)
    start_unit(unit)


def spawn_service(unit, argv, extra_env):
    os.makedirs(SERVICE_RUN_DIR, exist_ok=True)
    os.makedirs("/var/lib/k0s/logs", exist_ok=True)
    env = {"PATH": CLEAN_PATH, "LANG": "C.UTF-8", "HOME": "/root"}
    env.update(extra_env)
    out = open(f"/var/lib/k0s/logs/{unit.split('.')[0]}.log", "ab")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                         cwd="/", start_new_session=True)
    out.close()
    with open(f"{SERVICE_RUN_DIR}/{unit}.pid", "w") as f:
        f.write(f"{p.pid}\n")


def cmd_boot(a):
    hd = a.hostdir
    name = open(os.path.join(hd, "name")).read().strip()
    disk = os.path.join(hd, "disk")
    libc_mount(hd, HOST_LAB_DIR, None, MS_BIND, None)
    libc_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for inside, sub, kind in DISK_MOUNTS:
        src = os.path.join(disk, sub)
        if kind == "file" and not os.path.exists(src):
            # A disk made before this file was private: an empty one, as on a fresh host.
            open(src, "w").close()
        libc_mount(src, inside, None, MS_BIND, None)
    socket.sethostname(name)
    labnet.hide_ip(HOST_LAB_DIR, lambda src, dst: libc_mount(src, dst, None, MS_BIND, None))
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    os.makedirs(SERVICE_RUN_DIR, exist_ok=True)
    os.chdir("/")

    def start_sshd():
        return subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-f", f"{HOST_LAB_DIR}/sshd_config", "-E", f"{HOST_LAB_DIR}/sshd.log"],
            stdin=subprocess.DEVNULL,
        ).pid

    sshd = start_sshd()
    try:
        boot_units()
    except Exception as e:  # a broken unit must not keep the host from booting
        print(f"boot: starting units failed: {e}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # PID 1 duty: reap every orphan (k0s services detach and get reparented here), and restart
    # a k0s service whose process exited (Restart=always, RestartSec=10).
    restarts = {}  # unit → (when, exited pid)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid == 0:
            now = time.monotonic()
            for unit, (when, dead) in list(restarts.items()):
                if now >= when:
                    del restarts[unit]
                    try:
                        restart_if_still_down(unit, dead)
                    except Exception as e:  # a broken unit must not kill PID 1
                        print(f"boot: restarting {unit} failed: {e}", file=sys.stderr, flush=True)
            time.sleep(0.25)
            continue
        unit = main_pid_exited(pid)
        if unit:
            restarts[unit] = (time.monotonic() + RESTART_SEC, pid)
        if pid == sshd:
            print("boot: sshd exited; restarting", file=sys.stderr, flush=True)
            time.sleep(0.5)
            sshd = start_sshd()


def cmd_keeper(a):
    """Holds the range lock for the lab's life; tears the lab down if its owner process dies."""
    lab = Lab(a.dir)
    cached = None
    while True:
        time.sleep(1)
        try:
            cached = lab.state()
        except (OSError, ValueError):
            pass
        if os.path.exists(os.path.join(lab.dir, "keep")):
            a.owner = None  # kept for debugging (K0SFORM_LAB_KEEP): live until `teardown`
        owner_gone = a.owner and (not pid_alive(a.owner) or pid_start_time(a.owner) != a.owner_start)
        if owner_gone or not os.path.isdir(lab.dir):
            if cached:
                for hs in cached.get("hosts", {}).values():
                    kill_pid(hs.get("init_pid"), hs.get("init_start"))
                    kill_pid(hs.get("unshare_pid"), hs.get("unshare_start"))
                lock = cached.get("lock")
                if lock and os.path.exists(lock):
                    os.unlink(lock)
                for hs in cached.get("hosts", {}).values():
                    wait_dead(hs.get("init_pid"))
                labnet.remove_lab(cached)
            if os.path.isdir(lab.dir):
                cached["hosts"] = {}
                write_json(lab.state_path, cached)
            return


def main(argv=None):
    p = argparse.ArgumentParser(prog="lab.py", description="k0sform test lab (run as root)")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create", help="create a lab and power on its hosts")
    c.add_argument("--dir", required=True)
    c.add_argument("--hosts", required=True, help="NAME:ROLE,… e.g. c1:controller,w1:worker")
    c.add_argument("--sudo-user", nargs="*", default=[], action="extend", metavar="HOST",
                   help=f"hosts where user {SUDO_USER} (passwordless sudo) may log in")
    c.add_argument("--bastion", help="host that others are reached through (ProxyJump)")
    c.add_argument("--owner-pid", type=int, help="tear the lab down when this process dies")
    c.add_argument("--net", nargs="*", default=[], action="extend", metavar="HOST=KIND",
                   help="host in its own network namespace: KIND private, nat or dual (labnet.py)")
    for name in ("power-on", "power-off", "wipe", "destroy"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("name")
    r = sub.add_parser("readdress", help="same machine, new address: readdress DIR NAME [ADDRESS]")
    r.add_argument("dir")
    r.add_argument("name")
    r.add_argument("address", nargs="?")
    for name in ("teardown", "status"):
        sub.add_parser(name).add_argument("dir")
    e = sub.add_parser("exec", help="run CMD as root inside a host: exec DIR NAME -- CMD…")
    e.add_argument("dir")
    e.add_argument("name")
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    h = sub.add_parser("hide", help="hide programs inside a host until it powers off: hide DIR NAME PATH…")
    h.add_argument("dir")
    h.add_argument("name")
    h.add_argument("paths", nargs="+")
    t = sub.add_parser("teardown-all", help="kill leftovers of crashed labs")
    t.add_argument("--all", action="store_true", help="also tear down labs that are still live")
    b = sub.add_parser("_boot")
    b.add_argument("hostdir")
    k = sub.add_parser("_keeper")
    k.add_argument("dir")
    k.add_argument("--lock-fd", type=int, action="append")
    k.add_argument("--owner", type=int)
    k.add_argument("--owner-start", type=int)
    a = p.parse_args(argv)
    handlers = {
        "create": cmd_create, "power-on": cmd_power_on, "power-off": cmd_power_off,
        "wipe": cmd_wipe, "readdress": cmd_readdress, "destroy": cmd_destroy, "teardown": cmd_teardown, "status": cmd_status,
        "exec": cmd_exec, "hide": cmd_hide, "teardown-all": cmd_teardown_all, "_boot": cmd_boot, "_keeper": cmd_keeper,
    }
    try:
        handlers[a.command](a)
    except (LabError, labnet.NetError) as err:
        print(f"lab.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
