//! A host that runs in the cluster as recorded: upgraded when its k0s version or binary differs
//! from the spec's, reconfigured when its k0s.yaml or install flags differ, else left alone.

use super::host_plan::{Decision, HostPlan};
use super::hosts::HostCtx;
use super::{Planner, reason};
use crate::hash::short;
use crate::k0s::desired;
use crate::plan::model::{LocalBinary, Reason, ReasonCode, Refusal, RefusalKind};
use crate::reality::HostFacts;
use crate::spec::HostSpec;
use crate::version::K0sVersion;

impl Planner<'_> {
    pub(super) fn decide_running(
        &mut self,
        idx: usize,
        f: &HostFacts,
        spec_host: &HostSpec,
    ) -> Result<HostPlan, Refusal> {
        let h = &self.hosts[idx];
        self.refuse_datastore_switch(h, f, spec_host)?;
        self.refuse_peer_change(h, f, spec_host)?;
        // In the cluster: version, then config and flags.
        let running_version = f
            .status
            .as_ref()
            .map(|s| s.version.clone())
            .or_else(|| f.k0s_version.clone());
        let want_version = self.desired_version(&h.id);
        let bin = self.desired.local_binary(&h.id);
        // Compared as versions: `1.33.4+k0s.0` in the spec is the `v1.33.4+k0s.0` that runs.
        let version_differs = match (&want_version, &running_version) {
            (Some(w), Some(r)) => w != r,
            (Some(_), None) => true,
            _ => false,
        } || match (bin, &f.k0s_binary_sha256) {
            (Some(b), Some(have)) => &b.sha256 != have,
            _ => false,
        };
        let mut reasons = Vec::new();
        let config_diff = if h.role().is_controller() {
            self.config_diff(h, f, spec_host)
        } else {
            None
        };
        let write_config = config_diff.is_some();
        if write_config {
            reasons.push(reason(
                ReasonCode::ConfigChange,
                "k0s.yaml differs from the spec (diff below)",
            ));
        }
        if let Some(r) = self.install_flags_change(f, spec_host) {
            reasons.push(r);
        }
        if let Some(r) = self.environment_change(f, spec_host) {
            reasons.push(r);
        }
        if version_differs {
            let to = want_version
                .as_ref()
                .map(ToString::to_string)
                .or_else(|| bin.map(|b| format!("binary sha256 {}", short(&b.sha256))))
                .unwrap_or_default();
            // k0sctl's order (k0sproject/version `Compare`): `-rc.1` is below its release.
            if let (Some(have), Some(want)) = (&running_version, &want_version)
                && want < have
            {
                let what = format!(
                    "{} ({}) would be downgraded from {have} to {to}",
                    h.name(),
                    h.id,
                );
                // k0sctl refuses too (phase/validate_facts.go), unless --disable-downgrade-check.
                if !self.opts.allow_downgrade {
                    return Err(Refusal {
                        kind: RefusalKind::Downgrade,
                        message: format!("{what}: k0s does not support downgrades"),
                        details: vec![
                            "set spec.k0s.version to the running version or newer, or plan with -allow-downgrade".into(),
                        ],
                    });
                }
                self.warnings.push(format!(
                    "{what} (-allow-downgrade); k0s does not support downgrades"
                ));
            }
            reasons.insert(
                0,
                version_reason(f, running_version.as_ref(), want_version.as_ref(), bin, &to),
            );
            return Ok(HostPlan {
                config_diff,
                ..HostPlan::new(
                    idx,
                    Decision::Upgrade {
                        from: running_version.as_ref().map(ToString::to_string),
                        to,
                        write_config,
                    },
                    reasons,
                )
            });
        }
        if !reasons.is_empty() {
            return Ok(HostPlan {
                config_diff,
                ..HostPlan::new(idx, Decision::Reconfigure { write_config }, reasons)
            });
        }
        Ok(HostPlan::new(idx, Decision::Noop, vec![]))
    }

    /// A running controller keeps its datastore: k0s moves no data between etcd and kine, so a
    /// switch brings the API up on an empty datastore. Refused (exit 3), with the spec change
    /// that keeps what runs.
    pub(super) fn refuse_datastore_switch(
        &self,
        h: &HostCtx,
        f: &HostFacts,
        spec_host: &HostSpec,
    ) -> Result<(), Refusal> {
        let Some(have) = f.status.as_ref().and_then(|s| s.storage_type.as_deref()) else {
            return Ok(());
        };
        if !h.role().is_controller() {
            return Ok(());
        }
        let want = desired::host_storage_type(self.spec, spec_host);
        if have == want {
            return Ok(());
        }
        Err(Refusal {
            kind: RefusalKind::DatastoreSwitch,
            message: format!(
                "{} ({}) keeps its cluster's data in {have}; the spec would switch it to {want}",
                h.name(),
                h.id
            ),
            details: vec![
                format!(
                    "k0s does not move data between etcd and kine: after the switch the API would come up on an empty {want} datastore"
                ),
                format!(
                    "to keep {have}, set spec.k0s.config.spec.storage.type: {have}{}",
                    if have == "etcd" && spec_host.role == crate::spec::Role::Single {
                        " (a k0sctl-built `single` host runs etcd: its k0s.yaml came from `k0s config create`)"
                    } else {
                        ""
                    }
                ),
            ],
        })
    }

    /// The controller's k0s.yaml against the spec's, compared and shown in k0s's normal form
    /// (src/k0s/desired.rs), when they differ.
    fn config_diff(&self, h: &HostCtx, f: &HostFacts, spec_host: &HostSpec) -> Option<String> {
        let diff = desired::controller_config_difference(
            self.spec,
            spec_host,
            f,
            &h.name(),
            self.opts.show_secrets,
        )?;
        // Values from the environment are shown as the `${NAME}` they came from, whatever
        // field they are in (known secret fields are redacted already).
        Some(if self.opts.show_secrets {
            diff
        } else {
            self.spec.shown(&diff)
        })
    }

    /// The installed service's environment (`k0s install -e`) against the spec's `environment`,
    /// as a reason naming the variables. Values may be secrets: only `-show-secrets` shows the
    /// wanted ones (the host's are known by sha256 only).
    fn environment_change(&self, f: &HostFacts, spec_host: &HostSpec) -> Option<Reason> {
        let have = f.service_env.as_ref()?;
        let want = &spec_host.environment;
        let shown = |k: &str| {
            if self.opts.show_secrets {
                format!("{k}={}", want[k])
            } else {
                k.to_string()
            }
        };
        let added: Vec<String> = want
            .keys()
            .filter(|k| !have.contains_key(*k))
            .map(|k| shown(k))
            .collect();
        let changed: Vec<String> = want
            .iter()
            .filter(|(k, v)| {
                have.get(*k)
                    .is_some_and(|h| h != &crate::hash::sha256_hex(v.as_str()))
            })
            .map(|(k, _)| shown(k))
            .collect();
        let removed: Vec<String> = have
            .keys()
            .filter(|k| !want.contains_key(*k))
            .cloned()
            .collect();
        let mut parts = Vec::new();
        for (what, list) in [("added", added), ("changed", changed), ("removed", removed)] {
            if !list.is_empty() {
                parts.push(format!("{what}: {}", list.join(" ")));
            }
        }
        if parts.is_empty() {
            return None;
        }
        let values = if self.opts.show_secrets {
            ""
        } else {
            ", values hidden (-show-secrets)"
        };
        Some(reason(
            ReasonCode::EnvironmentChange,
            format!(
                "the service environment differs ({}{values})",
                parts.join("; ")
            ),
        ))
    }

    /// The flags the service runs with against the spec's, as a reason naming both sides.
    fn install_flags_change(&self, f: &HostFacts, spec_host: &HostSpec) -> Option<Reason> {
        let running_args: Vec<String> = f
            .status
            .as_ref()
            .map(|s| s.args.iter().skip(2).cloned().collect())
            .unwrap_or_default();
        let want_args = desired::install_args(self.spec, spec_host);
        if desired::comparable_args(&running_args) == desired::comparable_args(&want_args) {
            return None;
        }
        let have = desired::comparable_args(&running_args);
        let want = desired::comparable_args(&want_args);
        let gone: Vec<&String> = have.iter().filter(|a| !want.contains(a)).collect();
        let new: Vec<&String> = want.iter().filter(|a| !have.contains(a)).collect();
        let mut parts = Vec::new();
        if !gone.is_empty() {
            parts.push(format!(
                "not wanted: {}",
                gone.iter()
                    .map(|a| a.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        if !new.is_empty() {
            parts.push(format!(
                "missing: {}",
                new.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(" ")
            ));
        }
        let text = format!("install flags differ ({})", parts.join("; "));
        Some(reason(
            ReasonCode::InstallFlagsChange,
            // A flag's value from the environment (`--token=${X}`) is shown as written.
            if self.opts.show_secrets {
                text
            } else {
                self.spec.shown(&text)
            },
        ))
    }
}

fn version_reason(
    f: &HostFacts,
    running_version: Option<&K0sVersion>,
    want_version: Option<&K0sVersion>,
    bin: Option<&LocalBinary>,
    to: &str,
) -> Reason {
    reason(
        ReasonCode::VersionChange,
        match (running_version, want_version, bin) {
            // Same version string, other bytes: a rebuilt or patched binary.
            (Some(have), Some(want), Some(b)) if have == want => format!(
                "the k0s binary changed (sha256 {} → {}), version {want}",
                f.k0s_binary_sha256
                    .as_deref()
                    .map(short)
                    .unwrap_or_else(|| "none".into()),
                short(&b.sha256)
            ),
            _ => format!(
                "k0s version {} → {}",
                running_version.map_or("none".into(), ToString::to_string),
                to
            ),
        },
    )
}
