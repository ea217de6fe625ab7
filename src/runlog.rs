//! The debug log of every run that connects to hosts, as k0sctl keeps one (cmd/flags.go
//! `LogFile`, `fileLoggerHook`: `$XDG_CACHE_HOME/k0sctl/k0sctl.log`, debug level, appended to,
//! 0600, named in the error when a run fails): `$XDG_CACHE_HOME/k0sform/k0sform.log`, or
//! `K0SFORM_LOG_PATH`.
//!
//! It gets k0sform's own debug events whatever `-v` says: the ssh connections, every command run
//! on a host as logs show it (`RemoteCommand::shown_as`, never the argv of a command that
//! carries a secret; stdin, where join tokens and configs travel, is never logged) and its exit
//! code, and one line when the run starts and ends. Not the events of the libraries k0sform
//! uses. The folder is made 0700, the file 0600, a link in its place is refused. When the file
//! has grown past `ROTATE_AT` it is moved to `<path>.1` (replacing the one before), and one run
//! writes at most `RUN_LIMIT` bytes of records, so the two stay bounded.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The variable naming the log file instead of the default.
pub const PATH_ENV: &str = "K0SFORM_LOG_PATH";

/// A log larger than this when a run starts is moved to `<path>.1`.
pub const ROTATE_AT: u64 = 8 << 20;

/// Most bytes of records one run writes (a run over tens of thousands of hosts would write
/// hundreds of MiB); past it one line says so, and the run's first and last lines still come.
pub const RUN_LIMIT: u64 = 64 << 20;

/// The log of this process, once `open` succeeded.
static LOG: OnceLock<(PathBuf, Arc<File>)> = OnceLock::new();

/// Where the log goes: `K0SFORM_LOG_PATH`, else `$XDG_CACHE_HOME/k0sform/k0sform.log` (else
/// `$HOME/.cache/k0sform/k0sform.log`).
pub fn default_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(PATH_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(crate::download::k0sform_cache_dir()?.join("k0sform.log"))
}

/// Open (create: folder 0700, file 0600) the log at `path` for appending, rotating it first
/// when it is over `ROTATE_AT`. A symbolic link at `path` is refused (`O_NOFOLLOW`).
pub fn open_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let open = || {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    let mut file = open()?;
    if file.metadata()?.len() > ROTATE_AT {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        std::fs::rename(path, &old)?;
        file = open()?;
    }
    // A file made by an older run or by hand with wider permissions is narrowed.
    if file.metadata()?.permissions().mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Open the log for this run and write its first line (`command`: the subcommand's name, never
/// its arguments). `None` (with a warning on stderr) when it cannot be opened: the run goes on.
pub fn start(command: &str) -> Option<Writer> {
    let opened = default_path().and_then(|p| match open_file(&p) {
        Ok(f) => Ok((p, f)),
        Err(e) => Err(format!("{}: {e}", p.display())),
    });
    let (path, file) = match opened {
        Ok(x) => x,
        Err(e) => {
            eprintln!("Warning: no debug log for this run: {e} (set {PATH_ENV} to choose a file)");
            return None;
        }
    };
    let file = Arc::new(file);
    let _ = LOG.set((path, file.clone()));
    line(&format!(
        "k0sform {} {command}: run started (pid {})",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    ));
    Some(Writer::new(file, RUN_LIMIT))
}

/// The log of this run, when there is one: failures name it.
pub fn path() -> Option<&'static Path> {
    LOG.get().map(|(p, _)| p.as_path())
}

/// Write one line of k0sform's own (run start and end) to the log, with a timestamp.
pub fn line(text: &str) {
    if let Some((_, f)) = LOG.get() {
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now());
        let _ = (&**f).write_all(format!("{now}  INFO k0sform: {text}\n").as_bytes());
    }
}

/// The last line of a run: its exit code.
pub fn finish(code: u8) {
    line(&format!("run ended with exit code {code}"));
}

/// A `tracing` writer appending to the log file, up to `limit` bytes.
#[derive(Clone)]
pub struct Writer {
    file: Arc<File>,
    written: Arc<std::sync::atomic::AtomicU64>,
    limit: u64,
}

impl Writer {
    pub fn new(file: Arc<File>, limit: u64) -> Self {
        Writer {
            file,
            written: Default::default(),
            limit,
        }
    }
}

/// One record's write (`tracing-subscriber` formats a record, then writes it whole).
pub struct Record<'a>(&'a Writer);

impl Write for Record<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering;
        let w = self.0;
        let before = w.written.fetch_add(buf.len() as u64, Ordering::Relaxed);
        if before + buf.len() as u64 <= w.limit {
            (&*w.file).write_all(buf)?;
        } else if before <= w.limit {
            let note = format!(
                "(the log of this run stops here: it reached {} MiB)\n",
                w.limit >> 20
            );
            (&*w.file).write_all(note.as_bytes())?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Writer {
    type Writer = Record<'a>;
    fn make_writer(&'a self) -> Self::Writer {
        Record(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_private_and_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/k0sform.log");
        let mut f = open_file(&path).unwrap();
        f.write_all(b"one\n").unwrap();
        drop(f);
        let mut f = open_file(&path).unwrap();
        f.write_all(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn wide_permissions_are_narrowed_and_links_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k0sform.log");
        std::fs::write(&path, "x\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        open_file(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(open_file(&link).is_err());
    }

    #[test]
    fn one_run_writes_at_most_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k0sform.log");
        let w = Writer::new(Arc::new(open_file(&path).unwrap()), 11);
        use tracing_subscriber::fmt::MakeWriter;
        for record in ["12345\n", "6789\n", "abc\n", "def\n"] {
            w.make_writer().write_all(record.as_bytes()).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("12345\n6789\n(the log of this run stops here"),
            "{text}"
        );
        assert!(!text.contains("abc") && !text.contains("def"), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn a_large_log_is_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k0sform.log");
        std::fs::write(&path, vec![b'x'; ROTATE_AT as usize + 1]).unwrap();
        let mut f = open_file(&path).unwrap();
        f.write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
        let old = dir.path().join("k0sform.log.1");
        assert_eq!(std::fs::metadata(old).unwrap().len(), ROTATE_AT + 1);
    }
}
