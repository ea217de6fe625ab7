//! A host's `environment` in its /etc/environment, as k0sctl writes it there on every apply
//! besides the k0s service (phase/prepare_hosts.go `updateEnvironment`, `k0s::host_env`): the
//! plan sets the variables the probe found missing or different, so a second plan has none.

use super::host_plan::{Decision, HostPlan};
use super::{Planner, reason};
use crate::k0s::host_env;
use crate::plan::model::ReasonCode;

impl Planner<'_> {
    /// The spec's `environment` variables that /etc/environment lacks or gives another value
    /// join the host's plan; a host with nothing else to do gets `Decision::Files`. Not for
    /// hosts leaving, unreachable ones, `-refresh-only`, or probe files that did not read the
    /// file. Like k0sctl, a variable taken out of `environment` stays in the file.
    pub(super) fn plan_etc_environment(&self, p: &mut HostPlan) {
        let h = &self.hosts[p.idx];
        if self.opts.refresh_only || matches!(p.decision, Decision::Remove { .. }) {
            return;
        }
        let (Some(sh), Some(f)) = (h.spec, h.facts()) else {
            return;
        };
        let Some(have) = &f.etc_environment else {
            return;
        };
        let names = host_env::etc_environment_changes(&sh.environment, have);
        if names.is_empty() {
            return;
        }
        let shown: Vec<String> = names
            .iter()
            .map(|k| {
                if self.opts.show_secrets {
                    format!("{k}={}", sh.environment[k])
                } else {
                    k.clone()
                }
            })
            .collect();
        let hidden = if self.opts.show_secrets {
            ""
        } else {
            ", values hidden (-show-secrets)"
        };
        p.reasons.push(reason(
            ReasonCode::HostEnvironmentChange,
            format!(
                "{} lacks `environment` (to set: {}{hidden})",
                host_env::ETC_ENVIRONMENT,
                shown.join(" ")
            ),
        ));
        p.etc_environment = names;
        if matches!(p.decision, Decision::Noop) {
            p.decision = Decision::Files;
        }
    }
}
