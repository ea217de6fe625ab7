//! `MoveHost`: the recorded host answers at a new address (plan::moves). Its state record goes
//! to that address once a fresh probe there shows the recorded machine-id and host key again;
//! nothing runs on the host.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepError};
use crate::hash::{short, short_key};
use crate::hostid::HostId;
use crate::state::HostAccess;
use crate::transport::Transport;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn move_host(
        &self,
        host: &HostId,
        from: &HostId,
    ) -> Result<Vec<StateChange>, StepError> {
        let rec = self
            .known_host(from)
            .ok_or_else(|| failed(format!("{from} is not in the state any more: plan again")))?;
        let facts = self.probe(host).await?;
        if facts.machine_id.trim() != rec.machine_id
            || crate::transport::host_keys_differ(&rec.host_key, &facts.host_key)
        {
            return Err(failed(format!(
                "{host} is no longer the machine recorded at {from}: machine-id {} and host key {} \
                 recorded, {} and {} seen: plan again",
                short(&rec.machine_id),
                short_key(&rec.host_key),
                short(facts.machine_id.trim()),
                short_key(&facts.host_key)
            )));
        }
        if let Ok(mut m) = self.moves.lock() {
            m.insert(host.clone(), from.clone());
        }
        Ok(vec![StateChange::MoveHost {
            from: from.clone(),
            to: host.clone(),
            access: self.spec_host(host).map(HostAccess::of),
            host_key: facts.host_key.clone(),
            host_public_key: facts.host_public_key.clone(),
        }])
    }

    /// The state's record of `host` as the run began: at its address, or at the address it
    /// moved from in this run.
    pub(super) fn recorded(&self, host: &HostId) -> Option<&crate::state::HostState> {
        self.known_host(host).or_else(|| {
            let from = self.moves.lock().ok()?.get(host).cloned()?;
            self.known_host(&from)
        })
    }
}
