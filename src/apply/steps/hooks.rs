//! `RunHooks`: the spec's `hooks.<action>.<stage>` shell lines, one after another, as the login
//! user (never through sudo, as in k0sctl); the first failing line fails the step.
//!
//! The step carries the lines as shown (values from the environment written back as
//! `${NAME}`, unless `-show-secrets`); the host runs the spec's expanded lines, which must be
//! the ones the step shows. Progress and errors show only the step's form.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepContext, StepError};
use crate::hostid::HostId;
use crate::k0s::cmdline;
use crate::transport::Transport;

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
        let spec = &self.spec;
        let run_lines: Vec<String> = self
            .spec_host(host)
            .and_then(|h| h.hooks.get(action))
            .and_then(|a| a.get(stage))
            .cloned()
            .unwrap_or_default();
        let matches = run_lines.len() == lines.len()
            && run_lines
                .iter()
                .zip(lines)
                .all(|(run, shown)| run == shown || &spec.shown(run) == shown);
        if !matches {
            return Err(failed(format!(
                "{host}: hook {action}.{stage}: the plan's lines are not the spec's; plan again"
            )));
        }
        gate().await?;
        for (line, shown) in run_lines.iter().zip(lines) {
            // What the host prints may echo the line's values: shown as the line is.
            let hide = |text: String| {
                if line == shown {
                    text
                } else {
                    spec.shown(&text)
                }
            };
            ctx.progress(format!("hook {action}.{stage}: {shown}"));
            // With the host's `environment`, as k0sctl's session has it.
            let env = self.spec_host(host).map(|h| &h.environment);
            let cmd = cmdline::hook(line, shown, self.opts.wait_timeout);
            let cmd = match env {
                Some(env) => crate::k0s::host_env::with_env(cmd, env),
                None => cmd,
            };
            let out = self
                .exec(host, cmd)
                .await
                .map_err(|e| failed(hide(e.to_string())))?;
            if !out.success() {
                let why = cmdline::hook_failure(&format!("{action}.{stage}"), shown, &out);
                return Err(failed(hide(format!("{host}: {why}"))));
            }
        }
        Ok(vec![])
    }
}
