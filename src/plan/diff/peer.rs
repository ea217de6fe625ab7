//! A running controller whose etcd peer address the spec would change in place (a new or
//! changed `privateAddress`, another `privateInterface`, or another address found on the host):
//! etcd knows the member by its peer URL and k0s has no command to change it (`k0s etcd` has
//! only `leave` and `member-list`: cmd/etcd in k0s), so a rewrite of `peerAddress` plus a
//! restart would leave etcd listening where its peers do not dial. Refused (exit 3) with the
//! steps to take by hand, as for a move that changes it (`decide::check_peer_move`).

use super::Planner;
use super::hosts::HostCtx;
use crate::plan::model::{Refusal, RefusalKind};
use crate::reality::HostFacts;
use crate::spec::{HostSpec, Role};

impl Planner<'_> {
    pub(super) fn refuse_peer_change(
        &self,
        h: &HostCtx,
        f: &HostFacts,
        spec_host: &HostSpec,
    ) -> Result<(), Refusal> {
        if !h.role().is_controller() || h.role() == Role::Single {
            return Ok(());
        }
        let Some(status) = f.status.as_ref() else {
            return Ok(());
        };
        if status.storage_type.as_deref() == Some("kine") {
            return Ok(());
        }
        let old = status.peer_address.clone().or_else(|| {
            h.state
                .and_then(|st| st.etcd.as_ref())
                .map(|e| crate::k0s::peer_url_host(&e.peer_url).to_string())
        });
        let new = spec_host.peer_address();
        let Some(old) = old.filter(|o| o.trim_matches(['[', ']']) != new) else {
            return Ok(());
        };
        let name = h.name();
        let how = match &spec_host.private_address_detected_on {
            Some(on) => format!("the private address found on the host ({on}, as k0sctl finds it)"),
            None if spec_host.private_address.is_some() => "the spec's privateAddress".to_string(),
            None => "its SSH address (no private address given or found)".to_string(),
        };
        let member = h
            .state
            .and_then(|st| st.etcd.as_ref())
            .map(|e| e.member_id.clone())
            .unwrap_or_else(|| "<member ID from `k0s etcd member-list`>".into());
        let update = etcdctl_member_update(&spec_host.data_dir, &member, new);
        Err(Refusal {
            kind: RefusalKind::PeerAddressChange,
            message: format!(
                "controller {name} ({}) runs etcd with peer address {old}; the spec would make it \
                 {new}, {how}; k0s has no command to change a member's peer URL, so k0sform does \
                 not rewrite it: refusing to plan",
                h.id
            ),
            details: vec![
                format!(
                    "{name}: to keep {old}, set `privateAddress: {old}` on this host in the spec"
                ),
                format!(
                    "{name}: to move it: 1. on a healthy controller, change the member's peer URL \
                     with etcdctl (k0s's etcd client certificate): {update}; 2. set \
                     `privateAddress: {new}`; 3. k0sform apply \
                     (writes storage.etcd.peerAddress {new} into its k0s.yaml and restarts it, \
                     with the health gates)"
                ),
            ],
        })
    }
}

/// The etcdctl line that changes member `member`'s peer URL to `new` (k0s's etcd client
/// certificate under `data_dir`): the manual step of every peer-address refusal.
pub(super) fn etcdctl_member_update(data_dir: &str, member: &str, new: &str) -> String {
    let url = if new.contains(':') {
        format!("https://[{new}]:2380")
    } else {
        format!("https://{new}:2380")
    };
    format!(
        "etcdctl --endpoints=https://127.0.0.1:2379 --cacert={data_dir}/pki/etcd/ca.crt \
         --cert={data_dir}/pki/apiserver-etcd-client.crt \
         --key={data_dir}/pki/apiserver-etcd-client.key member update {member} --peer-urls={url}"
    )
}
