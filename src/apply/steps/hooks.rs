//! `RunHooks`: the spec's `hooks.<action>.<stage>` shell lines, one after another, as the login
//! user (never through sudo, as in k0sctl); the first failing line fails the step.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::transport::{RemoteCommand, Transport};

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn run_hooks(
        &self,
        ctx: &StepContext,
        host: &HostId,
        action: &str,
        stage: &str,
        lines: &[String],
        gate: impl AsyncFnOnce() -> Result<(), StepError>,
    ) -> Result<Vec<StateChange>, StepError> {
        gate().await?;
        for line in lines {
            ctx.progress(format!("hook {action}.{stage}: {line}"));
            let cmd = RemoteCommand::new(["sh", "-c", line.as_str()])
                .as_login_user()
                .timeout(self.opts.wait_timeout);
            let out = self.exec(host, cmd).await.map_err(failed)?;
            if !out.success() {
                let how = match out.status {
                    Some(c) => format!("exit {c}"),
                    None => "killed or timed out".to_string(),
                };
                return Err(failed(format!(
                    "{host}: hook {action}.{stage} `{line}` failed ({how}): {}",
                    out.error_line()
                )));
            }
        }
        Ok(vec![])
    }
}
