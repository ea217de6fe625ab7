//! Saved plans (`plan -out FILE`): the plan plus what it was made against (state lineage and
//! serial, spec sha256, each host's identity and the options). A saved plan is a review artefact,
//! never a program: `apply FILE` derives the plan again from the spec, the state, the options and
//! a fresh probe, runs the derived steps, and refuses (exit 5) unless they equal the saved ones.
//! The sha256 seal only catches accidental damage: anyone can recompute it.

use super::model::{Plan, PlanOptions, RestoreArchive};
use crate::hostid::HostId;
use crate::reality::{Probe, Reality};
use crate::state::State;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SavedPlan {
    pub plan: Plan,
    pub state_lineage: String,
    pub state_serial: u64,
    pub spec_sha256: String,
    pub tool_version: String,
    /// The options the plan was made with. `apply FILE` never takes the ones that weaken checks
    /// or choose what runs (`-replace`, `-exclude`, `-no-drain`, `-allow-downgrade`, `-destroy`,
    /// `-restore-from`) from here: see `options_for_apply`.
    #[serde(default)]
    pub options: PlanOptions,
    /// Every probed host's identity when the plan was made, sorted by host.
    pub identities: Vec<HostIdentity>,
    /// sha256 over the canonical JSON of all the fields above.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostIdentity {
    pub host: HostId,
    /// None when the host could not be reached (or offered an unaccepted key).
    pub machine_id: Option<String>,
    pub host_key: Option<String>,
    /// The etcd member ID the host's own view names for it, when it runs a controller.
    pub member_id: Option<String>,
}

/// Why a saved plan cannot be applied. Each entry names one thing that moved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the saved plan is stale: {}", .reasons.join("; "))]
pub struct Stale {
    pub reasons: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SavedPlanError {
    #[error("the saved plan is not valid JSON of a k0sform plan: {0}")]
    Parse(#[from] serde_json::Error),
    /// An address, peer URL, member ID, machine-id or fingerprint in the file breaks its rule
    /// (`spec::recorded_field_problem`).
    #[error("the saved plan is not valid: {field}: {problem}")]
    Address { field: String, problem: String },
    /// A version the file names (the k0s version it chose, a step's binary version) that is not
    /// a k0s version: it would end up in a download URL and a path on the hosts.
    #[error("the saved plan's {field} is not valid: {detail}")]
    Version { field: String, detail: String },
}

/// The fields that are sealed, in a fixed order.
#[derive(Serialize)]
struct Sealed<'a> {
    plan: &'a Plan,
    state_lineage: &'a str,
    state_serial: u64,
    spec_sha256: &'a str,
    tool_version: &'a str,
    options: &'a PlanOptions,
    identities: &'a [HostIdentity],
}

impl SavedPlan {
    /// Record what `plan` was made against and seal it.
    pub fn new(plan: Plan, state: &State, spec_sha256: &str, reality: &Reality) -> Self {
        Self::with_options(plan, state, spec_sha256, reality, PlanOptions::default())
    }

    /// Like `new`, recording the options the plan was made with.
    pub fn with_options(
        plan: Plan,
        state: &State,
        spec_sha256: &str,
        reality: &Reality,
        options: PlanOptions,
    ) -> Self {
        let mut saved = SavedPlan {
            plan,
            state_lineage: state.lineage.clone(),
            state_serial: state.serial,
            spec_sha256: spec_sha256.to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            options,
            identities: identities(reality),
            sha256: String::new(),
        };
        saved.seal();
        saved
    }

    fn digest(&self) -> String {
        let sealed = Sealed {
            plan: &self.plan,
            state_lineage: &self.state_lineage,
            state_serial: self.state_serial,
            spec_sha256: &self.spec_sha256,
            tool_version: &self.tool_version,
            options: &self.options,
            identities: &self.identities,
        };
        // Serializing plain data cannot fail; an empty digest input would only ever mismatch.
        let bytes = serde_json::to_vec(&sealed).unwrap_or_default();
        crate::hash::sha256_hex(bytes)
    }

    /// Compute and store the seal over everything else.
    pub fn seal(&mut self) {
        self.sha256 = self.digest();
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Read a saved plan. Every host address in it (each `address` field: steps, their `via`
    /// hosts, changes, identities, …) is held to the spec's rule, as the state's are, and every
    /// peer URL, member ID, machine-id and host key fingerprint to its own
    /// (`spec::json_field_problem`): anyone may have edited the file, and these reach the plan
    /// text `show` and `apply` print.
    pub fn from_json(text: &str) -> Result<Self, SavedPlanError> {
        let saved: SavedPlan = serde_json::from_str(text)?;
        if let Some((field, problem)) =
            crate::spec::json_field_problem(&serde_json::to_value(&saved)?)
        {
            return Err(SavedPlanError::Address { field, problem });
        }
        saved.check_versions()?;
        Ok(saved)
    }

    /// Every version the file names is a k0s version (`spec::check_k0s_version`, the spec's own
    /// rule): the plan's chosen version and each binary step's.
    fn check_versions(&self) -> Result<(), SavedPlanError> {
        let mut versions: Vec<(String, &crate::version::K0sVersion)> = Vec::new();
        if let Some(v) = &self.plan.k0s_version {
            versions.push(("plan.k0s_version.version".into(), &v.version));
        }
        for (i, step) in self.plan.steps.iter().enumerate() {
            match &step.kind {
                super::StepKind::UploadBinary {
                    version: Some(v), ..
                }
                | super::StepKind::DownloadBinary { version: v, .. } => {
                    versions.push((format!("plan.steps[{i}].kind.version"), v));
                }
                _ => {}
            }
        }
        for (field, v) in versions {
            crate::spec::check_k0s_version(v)
                .map_err(|detail| SavedPlanError::Version { field, detail })?;
        }
        Ok(())
    }

    /// Is this plan still applicable to this state, spec and probed reality?
    pub fn verify(&self, state: &State, spec_sha256: &str, reality: &Reality) -> Result<(), Stale> {
        let mut reasons = Vec::new();
        let actual = self.digest();
        if actual != self.sha256 {
            reasons.push(format!(
                "the file was altered (sha256 {} recorded, {} computed)",
                self.sha256, actual
            ));
        }
        if state.lineage != self.state_lineage {
            reasons.push(format!(
                "the state has lineage {}, the plan was made for {}",
                state.lineage, self.state_lineage
            ));
        }
        if state.serial != self.state_serial {
            reasons.push(format!(
                "the state moved from serial {} to {}",
                self.state_serial, state.serial
            ));
        }
        if spec_sha256 != self.spec_sha256 {
            reasons.push(format!(
                "the spec changed (sha256 {} when planned, {} now)",
                crate::hash::short(&self.spec_sha256),
                crate::hash::short(spec_sha256)
            ));
        }
        let now = identities(reality);
        for old in &self.identities {
            match now.iter().find(|n| n.host == old.host) {
                None => reasons.push(format!("{} was not probed now", old.host)),
                Some(n) => {
                    for (what, a, b) in [
                        ("machine-id", &old.machine_id, &n.machine_id),
                        ("host key", &old.host_key, &n.host_key),
                        ("etcd member", &old.member_id, &n.member_id),
                    ] {
                        if a != b {
                            reasons.push(format!(
                                "{}: {what} changed ({} → {})",
                                old.host,
                                a.as_deref().unwrap_or("none"),
                                b.as_deref().unwrap_or("none")
                            ));
                        }
                    }
                }
            }
        }
        for n in &now {
            if !self.identities.iter().any(|o| o.host == n.host) {
                reasons.push(format!("{} was not part of the plan's probe", n.host));
            }
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(Stale { reasons })
        }
    }
}

impl SavedPlan {
    /// The options `apply FILE` plans with. A saved plan is a file anyone with write access to
    /// it can edit, so it must not be able to switch off a check:
    /// - `-replace` (accepts a changed host key, treats the host as rebuilt) and `-exclude`
    ///   (hosts not contacted, so not checked) come only from the apply command line, which must
    ///   repeat exactly the saved plan's;
    /// - `-target` and `-refresh-only` only narrow what the spec asks for: taken from the file
    ///   when the command line does not give them, else they must be equal;
    /// - `-trust-new-host-keys=false` only adds a check: either side asking for it wins;
    /// - `-no-drain` switches off drains, `-allow-downgrade` a version check, `-destroy` resets
    ///   every host and `-restore-from` chooses the cluster's data: like `-replace`, each must be
    ///   repeated exactly; the archive is read from the disk again and its sha256 and peer
    ///   address are taken from there, never from the file.
    ///
    /// The plan is then derived again with these options, so whatever the file says, only what
    /// spec, state, options and hosts give runs.
    pub fn options_for_apply(&self, cli: &PlanOptions) -> Result<PlanOptions, Stale> {
        let mut reasons = Vec::new();
        for (flag, saved, given) in [
            ("-replace", &self.options.replace, &cli.replace),
            ("-exclude", &self.options.exclude, &cli.exclude),
        ] {
            if !same_set(saved, given) {
                reasons.push(format!(
                    "the plan was made with {} but apply was given {}: a plan file cannot switch off checks, repeat the flags on the command line",
                    flags(flag, saved),
                    flags(flag, given)
                ));
            }
        }
        if !cli.target.is_empty() && !same_set(&self.options.target, &cli.target) {
            reasons.push(format!(
                "the plan was made with {} but apply was given {}",
                flags("-target", &self.options.target),
                flags("-target", &cli.target)
            ));
        }
        if cli.refresh_only && !self.options.refresh_only {
            reasons
                .push("apply was given -refresh-only but the plan was made without it".to_string());
        }
        if let Some(r) = restore_mismatch(self.options.restore.as_ref(), cli.restore.as_ref()) {
            reasons.push(r);
        }
        for (flag, saved, given, why) in [
            (
                "-no-drain",
                self.options.no_drain,
                cli.no_drain,
                "a plan file cannot switch off drains",
            ),
            (
                "-allow-downgrade",
                self.options.allow_downgrade,
                cli.allow_downgrade,
                "a plan file cannot allow a downgrade",
            ),
            (
                "-destroy",
                self.options.destroy,
                cli.destroy,
                "a plan file cannot turn into a destroy",
            ),
        ] {
            if saved != given {
                let with = |yes: bool| if yes { "with" } else { "without" };
                reasons.push(format!(
                    "the plan was made {} {flag} but apply was run {} it: {why}, repeat the flag on the command line",
                    with(saved),
                    with(given)
                ));
            }
        }
        if !reasons.is_empty() {
            return Err(Stale { reasons });
        }
        Ok(PlanOptions {
            replace: cli.replace.clone(),
            exclude: cli.exclude.clone(),
            target: self.options.target.clone(),
            refresh_only: self.options.refresh_only,
            refuse_first_contact: self.options.refuse_first_contact || cli.refuse_first_contact,
            no_drain: cli.no_drain,
            // The archive as read from the disk now (path, sha256, peer address), equal to the
            // file's; its sha256 is checked again before it is used.
            restore: cli.restore.clone(),
            allow_downgrade: cli.allow_downgrade,
            // A destroy plan is derived again as a destroy (and `apply` asks for the cluster's
            // name before running one, unless -auto-approve).
            destroy: cli.destroy,
            // The saved plan was made without secrets, so it is derived again without them.
            show_secrets: false,
        })
    }

    /// Is `derived` (the plan the current spec, state, options and probe give) the saved one?
    pub fn matches(&self, derived: &Plan) -> Result<(), Stale> {
        if &self.plan == derived {
            return Ok(());
        }
        let mut reasons = vec![
            "the file's plan is not the plan the spec, the state and the hosts give now (the file was edited, or something moved)".to_string(),
        ];
        // The version chosen when the spec names none is chosen again (what runs, what the state
        // records, the version index): a file cannot pick it.
        if self.plan.k0s_version != derived.k0s_version {
            let show = |v: &Option<super::ResolvedVersion>| match v {
                Some(v) => format!("k0s {} ({})", v.version, v.source),
                None => "no chosen k0s version".to_string(),
            };
            reasons.push(format!(
                "the file installs {}, {} is chosen now; set spec.k0s.version to pin a version",
                show(&self.plan.k0s_version),
                show(&derived.k0s_version)
            ));
        }
        let describe = |s: &super::Step| format!("{} on {}", s.kind.name(), s.host);
        let saved = &self.plan.steps;
        let now = &derived.steps;
        match saved.iter().zip(now).position(|(a, b)| a != b) {
            Some(i) => reasons.push(format!(
                "step {i} is {} in the file, {} now",
                describe(&saved[i]),
                describe(&now[i])
            )),
            None if saved.len() != now.len() => reasons.push(format!(
                "the file has {} steps, {} now",
                saved.len(),
                now.len()
            )),
            None => reasons.push("the steps are equal; the description differs".to_string()),
        }
        Err(Stale { reasons })
    }
}

/// `-restore-from`: the archive is given on the apply command line, read from the disk there,
/// and must be the file's: same path, same sha256, same peer address.
fn restore_mismatch(
    saved: Option<&RestoreArchive>,
    given: Option<&RestoreArchive>,
) -> Option<String> {
    let repeat = "a plan file cannot choose what is restored, repeat the flag on the command line";
    match (saved, given) {
        (None, None) => None,
        (Some(s), None) => Some(format!(
            "the plan was made with -restore-from {} but apply was given no -restore-from: {repeat}",
            s.path
        )),
        (None, Some(g)) => Some(format!(
            "apply was given -restore-from {} but the plan was made without -restore-from",
            g.path
        )),
        (Some(s), Some(g)) if s.path != g.path => Some(format!(
            "the plan was made with -restore-from {} but apply was given -restore-from {}",
            s.path, g.path
        )),
        (Some(s), Some(g)) if s.sha256 != g.sha256 => Some(format!(
            "{} changed since the plan was made (sha256 {} now, {} in the plan)",
            g.path,
            crate::hash::short(&g.sha256),
            crate::hash::short(&s.sha256)
        )),
        (Some(s), Some(g)) if s.peer_address != g.peer_address => Some(format!(
            "{}: the plan records the etcd peer address {}, the archive has {}",
            g.path,
            s.peer_address.as_deref().unwrap_or("none"),
            g.peer_address.as_deref().unwrap_or("none")
        )),
        _ => None,
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    let set = |v: &[String]| v.iter().cloned().collect::<std::collections::BTreeSet<_>>();
    set(a) == set(b)
}

fn flags(flag: &str, values: &[String]) -> String {
    if values.is_empty() {
        return format!("no {flag}");
    }
    values
        .iter()
        .map(|v| format!("{flag} {v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Each probed host's identity, sorted by host.
pub fn identities(reality: &Reality) -> Vec<HostIdentity> {
    let mut v: Vec<HostIdentity> = reality
        .hosts
        .iter()
        .map(|h| match &h.probe {
            Probe::Reached(f) => {
                let me = f.hostname.to_lowercase();
                let member_id = f.view.as_ref().and_then(|v| {
                    v.members
                        .iter()
                        .find(|m| m.name == me)
                        .and_then(|m| m.member_id.clone())
                });
                HostIdentity {
                    host: h.id.clone(),
                    machine_id: Some(f.machine_id.clone()),
                    host_key: Some(f.host_key.clone()),
                    member_id,
                }
            }
            Probe::HostKeyChanged { offered, .. } => HostIdentity {
                host: h.id.clone(),
                machine_id: None,
                host_key: Some(offered.clone()),
                member_id: None,
            },
            Probe::Unreachable { .. } | Probe::K0sNotAnswering { .. } => HostIdentity {
                host: h.id.clone(),
                machine_id: None,
                host_key: None,
                member_id: None,
            },
        })
        .collect();
    v.sort_by(|a, b| a.host.cmp(&b.host));
    v
}
