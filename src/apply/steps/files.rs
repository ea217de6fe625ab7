//! `UploadFiles`: the spec's `files:` put on a host, each checked against the content the plan
//! saw, its folders created with their `dirPerm`, its owner and mode set before it is renamed into
//! place.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::files::DesiredFile;
use crate::hostid::HostId;
use crate::transport::{FileAttrs, RemoteCommand, Transport};

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn upload_files(
        &self,
        ctx: &StepContext,
        host: &HostId,
        files: &[DesiredFile],
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        // The bytes now, checked against what the plan saw.
        let now = crate::files::expand(hs).map_err(failed)?;
        let mut sources = Vec::with_capacity(files.len());
        for want in files {
            // `expand` sorts by remote path.
            let found = now.binary_search_by(|e| e.file.remote.cmp(&want.remote));
            let Some(have) = found.ok().map(|i| &now[i]) else {
                return Err(failed(format!(
                    "{host}: {} is no longer in the spec's files",
                    want.remote
                )));
            };
            if have.file.sha256 != want.sha256 {
                return Err(failed(format!(
                    "{host}: the content for {} changed since planning (sha256 {} now, {} planned)",
                    want.remote, have.file.sha256, want.sha256
                )));
            }
            sources.push(&have.content);
        }
        gate().await?;
        // Missing folders in one command, in path order (a parent before its child), each
        // with its file's dirPerm.
        let mut mk = vec![
            "sh".to_string(),
            "-c".into(),
            r#"while [ $# -gt 1 ]; do d=$(dirname -- "$1"); [ -d "$d" ] || install -d -m "$2" -- "$d" || exit; shift 2; done"#.into(),
            "k0sform-folders".into(),
        ];
        for want in files {
            mk.push(want.remote.clone());
            mk.push(crate::files::mode_text(want.dir_mode));
        }
        self.exec_ok(host, RemoteCommand::new(mk), "creating the files' folders")
            .await?;
        let mut changes = Vec::new();
        for (want, content) in files.iter().zip(sources) {
            ctx.progress(format!(
                "{} {}",
                if want.url.is_some() {
                    "downloading"
                } else {
                    "uploading"
                },
                want.remote
            ));
            // Owner and mode are set on the fresh temp file before it is renamed into place:
            // a chown by the final name would follow a link planted there.
            // The host checks the planned sha256 before the file is moved into place.
            let attrs = FileAttrs::mode(want.mode)
                .owned_by(want.user.clone(), want.group.clone())
                .expecting(want.sha256.clone());
            let got = match content {
                crate::files::Content::Local(path) => {
                    self.upload_local(host, path, &want.remote, &attrs, false)
                        .await?
                }
                crate::files::Content::Inline(data) => {
                    self.write(host, &want.remote, data.clone(), &attrs).await?;
                    want.sha256.clone()
                }
                crate::files::Content::Url(_) => {
                    let (got, change) = self.download_file(host, want).await?;
                    changes.extend(change);
                    if want.sha256.is_empty() {
                        continue;
                    }
                    got
                }
            };
            if got != want.sha256 {
                return Err(failed(format!(
                    "{host}: {} has sha256 {got} after the upload, not {}",
                    want.remote, want.sha256
                )));
            }
        }
        Ok(changes)
    }

    /// A URL source: the host downloads it beside its destination through the same curl/wget
    /// line as k0s (`release::download_on_host`: the spec's sha256 checked before anything is
    /// moved; none given, nothing checked), then sets owner and mode on the downloaded file and
    /// renames it into place. Returns the sha256 the host computed and, for a download with
    /// no sha256 to check, its record for the state.
    async fn download_file(
        &self,
        host: &HostId,
        want: &DesiredFile,
    ) -> Result<(String, Option<StateChange>), StepError> {
        let url = want
            .url
            .as_deref()
            .ok_or_else(|| failed(format!("{host}: {} has no URL in the plan", want.remote)))?;
        // Beside the destination, named as a staged k0s binary is (`DEST.k0sform-new`, its
        // download `….part`), so a killed run's leftover is found and cleaned up like those
        // (`k0s::cmdline` leftovers).
        let staged = crate::k0s::staged_binary_path(&want.remote);
        let cmd = crate::k0s::release::download_on_host(
            url,
            &staged,
            &want.sha256,
            self.opts.download_timeout,
        );
        let out = self.exec(host, cmd).await.map_err(failed)?;
        if !out.success() {
            return Err(failed(format!(
                "{host}: downloading {} failed, {} was not changed: {}",
                want.remote,
                want.remote,
                super::install::download_failure(&out)
            )));
        }
        let got = crate::k0s::release::staged_sha256(&out.stdout_str()).ok_or_else(|| {
            failed(format!(
                "{host}: downloading {} printed no sha256",
                want.remote
            ))
        })?;
        let owner = match (&want.user, &want.group) {
            (Some(u), Some(g)) => format!("{u}:{g}"),
            (Some(u), None) => u.clone(),
            (None, Some(g)) => format!(":{g}"),
            (None, None) => String::new(),
        };
        let place = RemoteCommand::new([
            "sh".to_string(),
            "-c".into(),
            r#"f=$1 m=$2 o=$3 d=$4
if [ -n "$o" ]; then chown -h -- "$o" "$f" || { rm -f -- "$f"; exit 1; }; fi
chmod "$m" -- "$f" && mv -f -- "$f" "$d" || { rm -f -- "$f"; exit 1; }"#
                .into(),
            "k0sform-place".into(),
            staged,
            crate::files::mode_text(want.mode),
            owner,
            want.remote.clone(),
        ]);
        self.exec_ok(host, place, &format!("moving {} into place", want.remote))
            .await?;
        let record = want.sha256.is_empty().then(|| {
            StateChange::RecordDownload(crate::state::DownloadRecord {
                address: host.address.clone(),
                port: host.port,
                path: want.remote.clone(),
                url_sha256: crate::hash::sha256_hex(url),
                sha256: got.clone(),
            })
        });
        Ok((got, record))
    }
}
