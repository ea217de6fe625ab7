//! What the hosts show now: probed (or read from a `-probe-in` file), optionally saved.

use super::Failure;
use crate::hostid::HostId;
use crate::plan::{Desired, PlanOptions};
use crate::probe::{self, ProbeOptions};
use crate::reality::Reality;
use crate::spec::Spec;
use crate::state::State;
use crate::transport::Transport;
use std::collections::BTreeMap;
use std::path::Path;

/// Where uploads stage files on each host of the spec: its k0s binary path, k0s.yaml, the join
/// token file and each `files:` destination, each of which may have staging files an earlier
/// run left beside it (`DEST.k0sform-…`). The probe looks beside exactly these and
/// `settle_leftovers` cleans up beside exactly these: one list, so the two never drift. A
/// destroy reads no local file for its plan (`desired` is empty); its hosts' `files:` are
/// expanded here where they still can be, as the cleanup always did.
pub fn staging_destinations(spec: &Spec, desired: &Desired) -> BTreeMap<HostId, Vec<String>> {
    spec.hosts
        .iter()
        .map(|h| {
            let id = h.id();
            let mut d = vec![
                h.k0s_install_path.clone(),
                crate::k0s::desired::config_file(h),
                crate::k0s::desired::token_file(h),
            ];
            match desired.host(&id) {
                Some(dh) => d.extend(dh.files.iter().map(|f| f.remote.clone())),
                None => {
                    if let Ok(files) = crate::files::desired(h) {
                        d.extend(files.into_iter().map(|f| f.remote));
                    }
                }
            }
            (id, d)
        })
        .collect()
}

/// Probe every host (or read `probe_in`), optionally saving what was seen to `probe_out`.
/// `staging`: where to look for upload staging files an earlier run left
/// (`staging_destinations`).
pub async fn reality<T: Transport + Clone + 'static>(
    (spec, state): (&Spec, &State),
    (desired, staging): (&Desired, &BTreeMap<HostId, Vec<String>>),
    transport: &T,
    (plan_opts, parallelism): (&PlanOptions, usize),
    probe_in: Option<&Path>,
    probe_out: Option<&Path>,
) -> Result<Reality, Failure> {
    let reality = match probe_in {
        Some(p) => probe::load(p).map_err(|e| Failure::error(e.to_string()))?,
        None => {
            let opts = ProbeOptions {
                replace: plan_opts.replace.clone(),
                exclude: plan_opts.exclude.clone(),
                parallelism: parallelism.max(1),
                files: desired
                    .hosts
                    .iter()
                    .filter(|h| !h.files.is_empty())
                    .map(|h| {
                        let paths = h.files.iter().map(|f| f.remote.clone()).collect();
                        (h.host.clone(), paths)
                    })
                    .collect(),
                staging: staging.clone(),
            };
            let plans = probe::plan_probes(spec, state, &opts);
            // -trust-new-host-keys=false: refused right after the key exchange, before the
            // probe (or anything) runs on any host.
            let connected = if plan_opts.refuse_first_contact {
                let connected = probe::connect_all(transport, &plans, opts.parallelism).await;
                let keys: Vec<_> = connected
                    .iter()
                    .filter_map(|(id, c)| Some((id, c.as_ref().ok()?)))
                    .collect();
                crate::plan::refuse_first_contact_keys(spec, state, plan_opts, &keys)?;
                connected
            } else {
                BTreeMap::new()
            };
            probe::probe_planned(transport, &plans, connected, opts.parallelism).await
        }
    };
    if let Some(p) = probe_out {
        let redacted = probe::save(&reality, p).map_err(|e| Failure::error(e.to_string()))?;
        if !redacted.is_empty() {
            let hosts: Vec<String> = redacted.iter().map(|h| h.to_string()).collect();
            eprintln!(
                "{}",
                crate::escape::escape_lines(&format!(
                    "Note: {}: the k0s.yaml of {} is saved with its secrets redacted (its \"redacted\" field says so)",
                    p.display(),
                    hosts.join(", ")
                ))
            );
        }
    }
    Ok(reality)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::desired;
    use crate::spec::{FileSource, HostSpec, Role, SshTarget, UploadFile};

    fn spec(hosts: Vec<HostSpec>) -> Spec {
        Spec {
            name: "t".into(),
            user: "admin".into(),
            hosts,
            ..Default::default()
        }
    }

    /// The probe and the cleanup share this list: the binary path, k0s.yaml, the token file
    /// and each `files:` destination, taken from the plan's desired files (not read again), or
    /// expanded from the spec for a destroy, whose plan reads no local file.
    #[test]
    fn staging_destinations_are_where_uploads_go() {
        let mut w = HostSpec::new(Role::Worker, SshTarget::new("127.0.0.2", 22), 1);
        w.k0s_install_path = "/opt/bin/k0s".into();
        w.files.push(UploadFile {
            name: "i".into(),
            source: FileSource::Inline("x\n".into()),
            dst: Some("/srv/app/i.txt".into()),
            dst_dir: None,
            perm: None,
            dir_perm: "0755".into(),
            user: None,
            group: None,
        });
        let c = HostSpec::new(Role::Controller, SshTarget::new("127.0.0.1", 22), 2);
        let s = spec(vec![w.clone(), c.clone()]);
        let base = |bin: &str| {
            vec![
                bin.to_string(),
                crate::k0s::desired::CONFIG_FILE.to_string(),
                crate::k0s::desired::TOKEN_FILE.to_string(),
            ]
        };
        let mut want_w = base("/opt/bin/k0s");
        want_w.push("/srv/app/i.txt".into());
        let want = BTreeMap::from([
            (w.id(), want_w.clone()),
            (c.id(), base(crate::spec::DEFAULT_K0S_INSTALL_PATH)),
        ]);
        let planned = desired(&s).unwrap();
        assert_eq!(staging_destinations(&s, &planned), want);
        // A destroy: no desired files, the spec's are expanded.
        assert_eq!(staging_destinations(&s, &Desired::default()), want);
        // The plan's desired files are what counts (they are not expanded again).
        let mut moved = planned.clone();
        for h in &mut moved.hosts {
            for f in &mut h.files {
                f.remote = "/srv/other.txt".into();
            }
        }
        assert_eq!(
            staging_destinations(&s, &moved)[&w.id()][3],
            "/srv/other.txt"
        );
    }
}
