//! Whether a k0s path (`k0sInstallPath`, `dataDir`, `kubeletRootDir`, in the spec or recorded
//! for a host in the state's `hosts[].access`) is plausible. Recorded ones are used once the
//! host has left the spec: the probe runs the binary (`k0s status`), a removal runs `k0s reset
//! --data-dir D --kubelet-root-dir K` (which deletes both trees) and a destroy deletes the
//! binary. A state is data others can write, so a path that cannot be k0s's (`/`,
//! `/etc/shadow`, `/var/lib/..`, `/usr/bin/python3`) is refused before any of that, naming the
//! host and field.

/// Directories that are the system's own, never a k0s binary, data dir or kubelet root dir
/// (k0s's defaults are `/usr/local/bin/k0s`, `/var/lib/k0s` and `/var/lib/k0s/kubelet`).
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/include",
    "/usr/lib",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/local/sbin",
    "/usr/local/share",
    "/usr/sbin",
    "/usr/share",
    "/usr/src",
    "/var",
    "/var/backups",
    "/var/cache",
    "/var/lib",
    "/var/local",
    "/var/log",
    "/var/mail",
    "/var/opt",
    "/var/run",
    "/var/spool",
    "/var/tmp",
];

/// Trees that hold no k0s path at all: the system's configuration (and its secrets), its boot
/// files and the kernel's interfaces.
const SYSTEM_TREES: &[&str] = &["/boot", "/dev", "/etc", "/proc", "/sys"];

/// What makes `value`, recorded as `field` (`k0sInstallPath`, `dataDir`, `kubeletRootDir`), no
/// plausible k0s path, if anything: the spec's rules (absolute, no control characters), then a
/// clean path (no `.`, `..`, empty component or trailing `/`), not `/` nor a system directory
/// nor anything under `/etc`, `/proc`, `/sys`, `/dev` or `/boot`; a binary whose file name
/// names k0s.
pub fn k0s_path_problem(field: &str, value: &str) -> Option<String> {
    if let Some(e) = super::remote_path_problem(value) {
        return Some(e);
    }
    let shown = value.escape_debug();
    if value == "/" {
        return Some(format!("`/` is the root directory, not a k0s {field}"));
    }
    let parts: Vec<&str> = value[1..].split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
    {
        return Some(format!(
            "`{shown}` is not a clean absolute path (no `.`, `..`, `//` or trailing `/`)"
        ));
    }
    if SYSTEM_DIRS.contains(&value) || SYSTEM_TREES.contains(&value) {
        return Some(format!(
            "`{shown}` is a system directory, not a k0s {field}"
        ));
    }
    if let Some(t) = SYSTEM_TREES
        .iter()
        .find(|t| value.strip_prefix(**t).is_some_and(|r| r.starts_with('/')))
    {
        return Some(format!(
            "`{shown}` is under {t}, which holds no k0s {field}"
        ));
    }
    if field == "k0sInstallPath"
        && !parts
            .last()
            .is_some_and(|n| n.to_ascii_lowercase().contains("k0s"))
    {
        return Some(format!(
            "`{shown}` does not name a k0s binary (its file name has no `k0s`): it would be run and, on destroy, deleted"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k0s_defaults_and_custom_paths_are_plausible() {
        for (field, v) in [
            ("k0sInstallPath", "/usr/local/bin/k0s"),
            ("k0sInstallPath", "/opt/k0s/bin/k0s"),
            ("k0sInstallPath", "/usr/bin/k0s-v1.33"),
            ("dataDir", "/var/lib/k0s"),
            ("dataDir", "/srv/k0s"),
            ("dataDir", "/data"),
            ("kubeletRootDir", "/var/lib/kubelet"),
            ("kubeletRootDir", "/var/lib/k0s/kubelet"),
        ] {
            assert_eq!(k0s_path_problem(field, v), None, "{field} {v}");
        }
    }

    #[test]
    fn paths_that_cannot_be_k0s_are_refused() {
        for (field, v, want) in [
            ("dataDir", "/", "root directory"),
            ("dataDir", "/etc/shadow", "under /etc"),
            ("k0sInstallPath", "/etc/shadow", "under /etc"),
            ("dataDir", "/etc", "system directory"),
            ("dataDir", "/var/lib", "system directory"),
            ("kubeletRootDir", "/home", "system directory"),
            ("dataDir", "/proc/1", "under /proc"),
            ("dataDir", "var/lib/k0s", "absolute"),
            ("dataDir", "/var/lib/k0s/../../..", "clean absolute path"),
            ("dataDir", "/var/lib/./k0s", "clean absolute path"),
            ("dataDir", "/var//lib", "clean absolute path"),
            ("dataDir", "/var/lib/k0s/", "clean absolute path"),
            ("dataDir", "/var/lib/k0s\n", "control characters"),
            (
                "k0sInstallPath",
                "/usr/bin/python3",
                "does not name a k0s binary",
            ),
            ("k0sInstallPath", "/bin/rm", "does not name a k0s binary"),
        ] {
            let e = k0s_path_problem(field, v).unwrap_or_else(|| panic!("{field} {v} accepted"));
            assert!(e.contains(want), "{field} {v}: {e}");
        }
    }
}
