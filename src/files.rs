//! `files:` of the spec: what each host should have (remote path, content sha256, mode, owner),
//! expanded from local files, folders, globs, inline data and URLs (which the host downloads).
//! Reads the local files, so it is not pure: the engine runs it once per plan (`Desired`), and
//! apply runs it again to get the bytes and to refuse content that changed since planning.

use crate::hash::{sha256_file, sha256_hex};
use crate::spec::{FileSource, HostSpec};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A file a host should have, as the plan compares and uploads it (no content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DesiredFile {
    /// The spec entry's `name` (or source), for messages.
    pub name: String,
    /// Absolute path on the host.
    pub remote: String,
    /// Where the bytes come from, as the plan shows it: the local file's path (each match of
    /// a glob or file of a folder its own); empty for inline `data`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// A URL source the host downloads: as the spec writes it (k0sctl's `%v` `%p` `%x`
    /// tokens) in the desired files; expanded for the host in a plan's step. `sha256` is then
    /// the spec's (verified) or empty (not verified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub sha256: String,
    /// Permission bits (`perm`, else the local file's, else 0644 for inline data).
    pub mode: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Mode of a parent folder that has to be created (`dirPerm`, default 0755).
    pub dir_mode: u32,
}

/// Where a desired file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Local(PathBuf),
    Inline(Vec<u8>),
    /// Downloaded by the host (the URL as the spec writes it).
    Url(String),
}

/// One expanded file with its content source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expanded {
    pub file: DesiredFile,
    pub content: Content,
}

/// Every file of the host's `files:`, sorted by remote path; an error names the entry.
pub fn expand(h: &HostSpec) -> Result<Vec<Expanded>, String> {
    let mut out: Vec<Expanded> = Vec::new();
    for (j, f) in h.files.iter().enumerate() {
        let what = format!(
            "{}: files[{j}] ({})",
            h.ssh.address,
            if f.name.is_empty() { "?" } else { &f.name }
        );
        let dir_mode = octal(&f.dir_perm).ok_or_else(|| format!("{what}: bad dirPerm"))?;
        let perm = match &f.perm {
            Some(p) => Some(octal(p).ok_or_else(|| format!("{what}: bad perm {p}"))?),
            None => None,
        };
        let url_sha = match &f.source {
            FileSource::Url { sha256, .. } => sha256.clone(),
            _ => None,
        };
        let mut add = |remote: String, content: Content, local_mode: Option<u32>| {
            let bytes_sha = match &content {
                Content::Local(p) => sha256_file(p)
                    .map_err(|e| format!("{what}: cannot read {}: {e}", p.display()))?,
                Content::Inline(d) => sha256_hex(d),
                Content::Url(_) => url_sha.clone().unwrap_or_default(),
            };
            if !remote.starts_with('/') {
                return Err(format!("{what}: the remote path {remote} is not absolute"));
            }
            out.push(Expanded {
                file: DesiredFile {
                    name: f.name.clone(),
                    remote,
                    source: match &content {
                        Content::Local(p) => p.display().to_string(),
                        Content::Inline(_) | Content::Url(_) => String::new(),
                    },
                    url: match &content {
                        Content::Url(u) => Some(u.clone()),
                        _ => None,
                    },
                    sha256: bytes_sha,
                    mode: perm.or(local_mode).unwrap_or(0o644),
                    user: f.user.clone(),
                    group: f.group.clone(),
                    dir_mode,
                },
                content,
            });
            Ok(())
        };
        match &f.source {
            FileSource::File(p) => {
                let remote = match (&f.dst, &f.dst_dir) {
                    (Some(d), _) => d.clone(),
                    (None, Some(dir)) => join(dir, &file_name(p)),
                    (None, None) => return Err(format!("{what}: no dst or dstDir")),
                };
                add(
                    remote,
                    Content::Local(p.clone()),
                    Some(local_mode(p, &what)?),
                )?;
            }
            FileSource::Inline(data) => {
                let remote = match (&f.dst, &f.dst_dir) {
                    (Some(d), _) => d.clone(),
                    (None, Some(dir)) => join(dir, &f.name),
                    (None, None) => return Err(format!("{what}: no dst or dstDir")),
                };
                add(remote, Content::Inline(data.clone().into_bytes()), None)?;
            }
            FileSource::Url { url, .. } => {
                // k0sctl (`cluster/uploadfile.go` `ResolveRelativeTo`): `dst`, else
                // `dstDir/` + the URL's last path element as written (tokens unexpanded).
                let remote = match (&f.dst, &f.dst_dir) {
                    (Some(d), _) => d.clone(),
                    (None, Some(dir)) => join(dir, url.rsplit('/').next().unwrap_or(url)),
                    (None, None) => return Err(format!("{what}: no dst or dstDir")),
                };
                add(remote, Content::Url(url.clone()), None)?;
            }
            FileSource::Glob { base, files } => {
                // k0sctl (`cluster/uploadfile.go` `glob`, `phase/uploadfiles.go`
                // `uploadFile`): `dst` for the one match, else `dstDir/<path below the base>`.
                for rel in files {
                    let local = base.join(rel);
                    let remote = match (&f.dst, &f.dst_dir) {
                        (Some(d), _) => d.clone(),
                        (None, Some(dir)) => join(dir, rel),
                        (None, None) => return Err(format!("{what}: no dst or dstDir")),
                    };
                    let mode = local_mode(&local, &what)?;
                    add(remote, Content::Local(local), Some(mode))?;
                }
            }
            FileSource::Directory(root) => {
                let base = f
                    .dst_dir
                    .clone()
                    .or_else(|| f.dst.clone())
                    .ok_or_else(|| format!("{what}: no dstDir"))?;
                let mut files = Vec::new();
                walk(root, Path::new(""), &mut files)
                    .map_err(|e| format!("{what}: cannot read {}: {e}", root.display()))?;
                for rel in files {
                    let local = root.join(&rel);
                    let mode = local_mode(&local, &what)?;
                    let rel = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join("/");
                    add(join(&base, &rel), Content::Local(local), Some(mode))?;
                }
            }
        }
    }
    out.sort_by(|a, b| a.file.remote.cmp(&b.file.remote));
    if let Some(w) = out
        .windows(2)
        .find(|w| w[0].file.remote == w[1].file.remote)
    {
        return Err(format!(
            "{}: two files: entries put {} ({} and {})",
            h.ssh.address, w[0].file.remote, w[0].file.name, w[1].file.name
        ));
    }
    Ok(out)
}

/// The desired files without their content (what the planner and the probe need).
pub fn desired(h: &HostSpec) -> Result<Vec<DesiredFile>, String> {
    Ok(expand(h)?.into_iter().map(|e| e.file).collect())
}

/// Regular files under `root/rel`, relative to `root`, sorted; folders are followed except
/// through symlinks (no loops).
fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let r = rel.join(e.file_name());
        let t = e.file_type()?;
        if t.is_dir() {
            walk(root, &r, out)?;
        } else if t.is_file() || (t.is_symlink() && root.join(&r).is_file()) {
            out.push(r);
        }
    }
    Ok(())
}

fn local_mode(p: &Path, what: &str) -> Result<u32, String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o7777)
        .map_err(|e| format!("{what}: cannot read {}: {e}", p.display()))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// `"0644"` → 0o644.
pub fn octal(s: &str) -> Option<u32> {
    u32::from_str_radix(s, 8).ok()
}

/// Mode as the plan shows it, e.g. `0644`.
pub fn mode_text(m: u32) -> String {
    format!("{m:04o}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Role, SshTarget, UploadFile};

    fn entry(source: FileSource, dst: Option<&str>, dst_dir: Option<&str>) -> UploadFile {
        UploadFile {
            name: "e".into(),
            source,
            dst: dst.map(String::from),
            dst_dir: dst_dir.map(String::from),
            perm: None,
            dir_perm: "0750".into(),
            user: None,
            group: None,
        }
    }

    #[test]
    fn files_folders_and_inline_data_expand_to_remote_paths() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.conf"), "a").unwrap();
        std::fs::set_permissions(
            d.path().join("a.conf"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        std::fs::create_dir_all(d.path().join("tree/sub")).unwrap();
        std::fs::write(d.path().join("tree/x"), "x").unwrap();
        std::fs::write(d.path().join("tree/sub/y"), "y").unwrap();
        let mut h = HostSpec::new(Role::Worker, SshTarget::new("127.0.0.1", 22), 1);
        h.files = vec![
            entry(
                FileSource::File(d.path().join("a.conf")),
                None,
                Some("/etc/app/"),
            ),
            entry(
                FileSource::Directory(d.path().join("tree")),
                None,
                Some("/opt/t"),
            ),
            UploadFile {
                perm: Some("0640".into()),
                ..entry(FileSource::Inline("hi\n".into()), Some("/etc/hi"), None)
            },
        ];
        let got: Vec<(String, u32, u32)> = desired(&h)
            .unwrap()
            .into_iter()
            .map(|f| (f.remote, f.mode, f.dir_mode))
            .collect();
        let local = |p: &str| {
            std::fs::metadata(d.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(
            got,
            [
                ("/etc/app/a.conf".to_string(), 0o600, 0o750),
                ("/etc/hi".to_string(), 0o640, 0o750),
                ("/opt/t/sub/y".to_string(), local("tree/sub/y"), 0o750),
                ("/opt/t/x".to_string(), local("tree/x"), 0o750),
            ]
        );
        assert_eq!(desired(&h).unwrap()[1].sha256, sha256_hex("hi\n"));

        // Two entries for one remote path are an error naming it.
        h.files
            .push(entry(FileSource::Inline("z".into()), Some("/etc/hi"), None));
        assert!(desired(&h).unwrap_err().contains("/etc/hi"));
    }
}
