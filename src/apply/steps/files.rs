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
        for (want, content) in files.iter().zip(sources) {
            ctx.progress(format!("uploading {}", want.remote));
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
            };
            if got != want.sha256 {
                return Err(failed(format!(
                    "{host}: {} has sha256 {got} after the upload, not {}",
                    want.remote, want.sha256
                )));
            }
        }
        Ok(vec![])
    }
}
