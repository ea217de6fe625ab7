//! `WriteHostEnvironment`: the planned variables of a host's `environment` set in its
//! /etc/environment (`k0s::host_env`), with the spec's values as they are now.

use super::remote::failed;
use super::runner::K0sRunner;
use crate::apply::{StateChange, StepError};
use crate::hostid::HostId;
use crate::k0s::host_env;
use crate::transport::Transport;
use std::collections::BTreeMap;

impl<T: Transport + 'static> K0sRunner<T> {
    pub(super) async fn write_host_environment(
        &self,
        host: &HostId,
        names: &[String],
    ) -> Result<Vec<StateChange>, StepError> {
        let hs = self.host_spec(host)?;
        let mut env = BTreeMap::new();
        for k in names {
            let Some(v) = hs.environment.get(k) else {
                return Err(failed(format!(
                    "{host}: `{k}` is no longer in the host's environment; plan again"
                )));
            };
            env.insert(k.clone(), v.clone());
        }
        self.exec_ok(
            host,
            host_env::write_etc_environment(&env),
            &format!("updating {}", host_env::ETC_ENVIRONMENT),
        )
        .await?;
        Ok(vec![])
    }
}
