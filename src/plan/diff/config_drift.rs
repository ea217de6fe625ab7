//! With `dynamicConfig`, k0s works from the ClusterConfig object once the cluster exists, and
//! apply changes only the node part of k0s.yaml: the plan warns where the object no longer says
//! what spec.k0s.config says (`crate::cluster_config::drift`), as the first healthy controller
//! that reported it sees it.

use super::Planner;

impl Planner<'_> {
    pub(super) fn config_drift_warnings(&mut self) {
        let Some(config) = self
            .spec
            .k0s
            .config
            .as_ref()
            .filter(|_| self.spec.k0s.dynamic_config)
        else {
            return;
        };
        let Some((id, live)) = self.hosts.iter().find_map(|h| {
            self.cluster.healthy.contains(&h.id).then_some(())?;
            Some((h.id.clone(), h.facts()?.cluster_config.as_ref()?))
        }) else {
            return;
        };
        let lines = crate::cluster_config::drift(config, live);
        if !lines.is_empty() {
            self.warnings.push(format!(
                "dynamic config: the ClusterConfig object (as {id} reads it) differs from \
                 spec.k0s.config, and k0s works from the object; apply does not change it \
                 (`k0sform config edit` does): {}",
                lines.join("; ")
            ));
        }
    }
}
