//! Local files that hold secrets (an admin kubeconfig, a backup archive with the cluster's CA
//! keys): mode 0600 from the first byte, written to a temp file beside the target and renamed over
//! it, so a reader never sees half a file and an existing symlink at the target is replaced,
//! never followed.

use std::io::Write;
use std::path::Path;

/// Write `data` to `path` as described above. Fails when `path` is a directory.
pub fn write(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut file = Pending::new(path)?;
    file.file().write_all(data)?;
    file.commit()
}

/// A private file being written: a 0600 temp file beside its target, renamed over the target
/// by `commit`. Dropped without a commit, the temp file is removed.
pub struct Pending {
    tmp: tempfile::NamedTempFile,
    path: std::path::PathBuf,
}

impl Pending {
    /// Start a file that will be `path`. Fails when `path` is a directory.
    pub fn new(path: &Path) -> std::io::Result<Self> {
        if path.is_dir() && !path.is_symlink() {
            return Err(std::io::Error::other("is a directory"));
        }
        // tempfile creates with O_EXCL and mode 0600.
        let tmp = tempfile::Builder::new()
            .prefix(".k0sform-")
            .tempfile_in(dir_of(path))?;
        Ok(Pending {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// The temp file, to write (or read back) before the commit.
    pub fn file(&mut self) -> &mut std::fs::File {
        self.tmp.as_file_mut()
    }

    /// Where the temp file is, until the commit.
    pub fn temp_path(&self) -> &Path {
        self.tmp.path()
    }

    /// Sync the file and rename it over the target.
    pub fn commit(self) -> std::io::Result<()> {
        self.tmp.as_file().sync_all()?;
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        if let Ok(d) = std::fs::File::open(dir_of(&self.path)) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_atomic_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let target = dir.path().join("kubeconfig");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write(&target, b"secret").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!target.is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // An existing file with wider permissions ends up 0600 as well.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&target, b"again").unwrap();
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(write(dir.path(), b"x").is_err());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".k0sform-"))
            .collect();
        assert!(leftovers.is_empty());
    }

    /// A file abandoned before its commit leaves nothing behind, and the target is untouched.
    #[test]
    fn an_uncommitted_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("backup.tar.gz");
        std::fs::write(&target, "old").unwrap();
        let mut p = Pending::new(&target).unwrap();
        p.file().write_all(b"half").unwrap();
        let mode = std::fs::metadata(p.temp_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(p);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["backup.tar.gz"]);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
    }
}
