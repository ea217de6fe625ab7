"""Network namespaces for k0sform lab hosts that look like cloud machines (used by lab.py).

A lab with such hosts claims a network slot K (1..254, a flock under /tmp/k0sform-lab-ranges/
held by the lab's keeper, so parallel labs never share one) and creates, on this machine:

- bridge `k0slab<K>p` with 10.244.K.1/24: the lab's private network;
- bridge `k0slab<K>u` with 100.64.K.1/24: the lab's 'public' network (shared address space,
  routed nowhere);
- per host a network namespace `k0slab<K>-<i>` with `lo` and, by kind:
    private  eth0 = 10.244.K.(11+i)/24; SSH at that address;
    nat      eth0 = 10.244.K.(11+i)/24; SSH at the lab's loopback address 127.A.B.(11+i),
             which this machine DNATs to the private address (a cloud's 1:1 NAT, an elastic IP);
    dual     eth0 = 100.64.K.(11+i)/24 ('public', SSH there), eth1 = 10.244.K.(11+i)/24;
  and one global route `10.245.K.0/24 via 10.244.K.1` on the private interface (another subnet
  of the 'VPC': what k0sctl's `ip route list scope global` looks for). No default route: the
  only way out of a host is the lab's bridges;
- nft table `ip k0slab_<K>`: the DNAT (output hook, so only this machine's own connections),
  masquerade of those connections' loopback source on the private bridge (with route_localnet
  on that bridge only), and filters that drop anything the hosts send to this machine (other
  than replies) and anything forwarded to or from the lab's bridges: nothing leaves the box.

Everything is named after K and recorded in the lab's state.json, so `teardown` (and the keeper
when the lab's owner dies, and `teardown-all` for crashed runs) removes it all.
"""

import fcntl
import os
import subprocess

RANGES_DIR = "/tmp/k0sform-lab-ranges"
KINDS = ("private", "nat", "dual")
# 10 and 172 as a third octet would make the public routes match k0sctl's private-route
# pattern `\b(172|10|192\.168)\.` (configurer/linux.go PrivateInterface).
SLOTS = [k for k in range(1, 255) if k not in (10, 172)]
NETNS_DIR = "/run/netns"


class NetError(Exception):
    pass


def run(*args, check=True):
    p = subprocess.run(list(args), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise NetError(f"{' '.join(args)} failed: {p.stderr.strip()}")
    return p


def parse_nets(items):
    """`--net NAME=KIND` arguments: {name: kind}."""
    nets = {}
    for item in items:
        n, _, kind = item.partition("=")
        if kind not in KINDS:
            raise NetError(f"bad --net {item!r}: expected NAME=KIND, KIND one of {', '.join(KINDS)}")
        nets[n] = kind
    return nets


def bridges(k):
    return f"k0slab{k}p", f"k0slab{k}u"


def table(k):
    return f"k0slab_{k}"


def netns_name(k, idx):
    return f"k0slab{k}-{idx}"


def private_address(k, idx):
    return f"10.244.{k}.{11 + idx}"


def public_address(k, idx):
    return f"100.64.{k}.{11 + idx}"


def slot_in_use(k):
    """Leftovers of a crashed run, or the machine's own networks, in slot K's names or ranges."""
    if any(os.path.exists(f"/sys/class/net/{b}") for b in bridges(k)):
        return True
    if run("nft", "list", "table", "ip", table(k), check=False).returncode == 0:
        return True
    if os.path.isdir(NETNS_DIR) and any(n.startswith(f"k0slab{k}-") for n in os.listdir(NETNS_DIR)):
        return True
    seen = run("ip", "-4", "-o", "addr").stdout + run("ip", "-4", "route", "list", "table", "all").stdout
    return any(p in seen for p in (f"10.244.{k}.", f"10.245.{k}.", f"100.64.{k}."))


def try_lock(path):
    """An fd holding an exclusive flock on path (created if missing), or None if it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim_slot():
    """A free slot K; the flock on its file is kept by the caller (handed to the keeper)."""
    import random

    os.makedirs(RANGES_DIR, exist_ok=True)
    slots = list(SLOTS)
    random.shuffle(slots)
    for k in slots:
        path = os.path.join(RANGES_DIR, f"net-{k}.lock")
        fd = try_lock(path)
        if fd is None:
            continue
        if slot_in_use(k):
            os.close(fd)
            continue
        return k, path, fd
    raise NetError("no free lab network slot (10.244.K.0/24)")


def set_sysctl(path, value):
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        pass


def create_bridges(k):
    for br, addr in zip(bridges(k), (f"10.244.{k}.1/24", f"100.64.{k}.1/24")):
        run("ip", "link", "add", br, "type", "bridge")
        set_sysctl(f"/proc/sys/net/ipv6/conf/{br}/disable_ipv6", "1")
        run("ip", "addr", "add", addr, "dev", br)
        run("ip", "link", "set", br, "up")
    # DNAT'd connections of this machine keep their loopback source until masqueraded in
    # postrouting; the route lookup in between needs route_localnet on the way out.
    set_sysctl(f"/proc/sys/net/ipv4/conf/{bridges(k)[0]}/route_localnet", "1")
    return {"slot": k, "private_range": f"10.244.{k}.0/24", "public_range": f"100.64.{k}.0/24"}


def add_link(k, idx, ns, side, inner, addr):
    outer = f"kl{k}h{idx}{side}"
    run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns)
    set_sysctl(f"/proc/sys/net/ipv6/conf/{outer}/disable_ipv6", "1")
    run("ip", "link", "set", outer, "master", bridges(k)[0 if side == "p" else 1], "up")
    run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", inner)
    run("ip", "-n", ns, "link", "set", inner, "up")


def create_host(k, idx, kind):
    """The host's namespace and interfaces; returns its lab.json fields."""
    if kind not in KINDS:
        raise NetError(f"unknown network kind {kind!r} (one of {', '.join(KINDS)})")
    ns = netns_name(k, idx)
    run("ip", "netns", "add", ns)
    run("ip", "-n", ns, "link", "set", "lo", "up")
    priv = private_address(k, idx)
    if kind == "dual":
        add_link(k, idx, ns, "u", "eth0", public_address(k, idx))
        add_link(k, idx, ns, "p", "eth1", priv)
        dev = "eth1"
    else:
        add_link(k, idx, ns, "p", "eth0", priv)
        dev = "eth0"
    run("ip", "-n", ns, "route", "add", f"10.245.{k}.0/24", "via", f"10.244.{k}.1", "dev", dev)
    fields = {"net": kind, "netns": ns, "private_address": priv}
    if kind == "dual":
        fields["public_address"] = fields["address"] = public_address(k, idx)
    elif kind == "private":
        fields["address"] = priv
    return fields


def delete_host(ns):
    if os.path.exists(os.path.join(NETNS_DIR, ns)):
        run("ip", "netns", "delete", ns, check=False)


def write_rules(k, dnat):
    """(Re)writes the lab's nft table in one transaction; dnat = [(ssh address, private address)]."""
    priv, pub = bridges(k)
    t = table(k)
    lines = [
        f"table ip {t} {{}}",
        f"delete table ip {t}",
        f"table ip {t} {{",
        "  chain output { type nat hook output priority -100; policy accept;",
    ]
    lines += [f"    ip daddr {src} dnat to {dst}" for src, dst in dnat]
    lines += [
        "  }",
        "  chain postrouting { type nat hook postrouting priority 100; policy accept;",
        f'    oifname "{priv}" ip saddr 127.0.0.0/8 masquerade',
        "  }",
        "  chain input { type filter hook input priority 0; policy accept;",
        f'    iifname {{ "{priv}", "{pub}" }} ct state established,related accept',
        f'    iifname {{ "{priv}", "{pub}" }} drop',
        "  }",
        "  chain forward { type filter hook forward priority 0; policy accept;",
        # Between two hosts on one bridge (seen here when br_netfilter is loaded).
        f'    iifname "{priv}" oifname "{priv}" accept',
        f'    iifname "{pub}" oifname "{pub}" accept',
        f'    iifname {{ "{priv}", "{pub}" }} drop',
        f'    oifname {{ "{priv}", "{pub}" }} drop',
        "  }",
        "}",
    ]
    p = subprocess.run(["nft", "-f", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if p.returncode != 0:
        raise NetError(f"nft failed: {p.stderr.strip()}")


def write_lab_rules(info):
    """The lab's nft table from its lab.json: each `nat` host's SSH address DNAT'd."""
    dnat = [(h["address"], h["private_address"]) for h in info["hosts"] if h.get("net") == "nat"]
    write_rules(info["net"]["slot"], dnat)


def remove_lab(state):
    """Everything a lab's state.json says it created (nothing for a lab without a slot)."""
    net = state.get("net")
    if net:
        remove_all(net["slot"], net.get("netns", []))


def hide_ip(host_lab_dir, bind):
    """At boot of a host sharing this machine's network namespace (no `net` file): it has no
    network of its own, and what `ip` would show there (this machine's interfaces and routes)
    is not the host's. So `ip` is hidden (`bind` mounts an empty, non-executable file over it),
    and k0sctl-style private address detection finds nothing there, as on a host without `ip`:
    the SSH address is the host's address, as the double's address file says."""
    if os.path.exists(os.path.join(host_lab_dir, "net")):
        return
    empty = os.path.join(host_lab_dir, "no-ip")
    open(empty, "w").close()
    os.chmod(empty, 0o644)
    for path in sorted({os.path.realpath(p) for p in ("/usr/bin/ip", "/usr/sbin/ip")}):
        if os.path.exists(path):
            bind(empty, path)


def remove_all(k, namespaces=()):
    """Everything of slot K: host namespaces (their veths go with them), bridges, nft table."""
    names = set(namespaces)
    if os.path.isdir(NETNS_DIR):
        names |= {n for n in os.listdir(NETNS_DIR) if n.startswith(f"k0slab{k}-")}
    for ns in sorted(names):
        delete_host(ns)
    for br in bridges(k):
        if os.path.exists(f"/sys/class/net/{br}"):
            run("ip", "link", "delete", br, check=False)
    run("nft", "delete", "table", "ip", table(k), check=False)


def remove_stale_slots():
    """`teardown-all`: the resources of every slot whose lock no live keeper holds."""
    if not os.path.isdir(RANGES_DIR):
        return
    for fn in os.listdir(RANGES_DIR):
        if not (fn.startswith("net-") and fn.endswith(".lock")):
            continue
        try:
            k = int(fn[4:-5])
        except ValueError:
            continue
        fd = try_lock(os.path.join(RANGES_DIR, fn))
        if fd is None:
            continue
        try:
            remove_all(k)
        finally:
            os.close(fd)
