//! `k0sform kubeconfig` and `apply -kubeconfig-out`: the admin kubeconfig of a healthy controller,
//! rewritten as k0sctl hands it out (`k0s::kubeconfig`). A secret: it is only ever returned to
//! the caller or written as a 0600 file, never logged, stored in the state or put in an event.

use crate::exit::Exit;
use crate::k0s::{
    self,
    kubeconfig::{AdminKubeconfigError, KubeconfigNames},
};
use crate::ops::{self, Failure};
use crate::spec::Spec;
use crate::state::State;
use crate::transport::Transport;

/// What the command line may override (`-user`, `-cluster`, `-address`).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub user: Option<String>,
    pub cluster: Option<String>,
    /// The API server URL, used as given.
    pub address: Option<String>,
}

impl From<&crate::cli::K0sctlApplyArgs> for Overrides {
    /// k0sctl apply's `--kubeconfig-user`, `--kubeconfig-cluster`, `--kubeconfig-api-address`.
    fn from(k: &crate::cli::K0sctlApplyArgs) -> Self {
        Overrides {
            user: k.kubeconfig_user.clone(),
            cluster: k.kubeconfig_cluster.clone(),
            address: k.kubeconfig_api_address.clone(),
        }
    }
}

/// Fetch the admin kubeconfig from the first healthy controller and rebuild it from its allowed
/// fields: server from `-address`, else k0sctl's rules with that controller's address; names
/// from the overrides, else `metadata.name` and `metadata.user`. An answer holding anything
/// else (an `exec` plugin, a proxy, …) is refused with exit 3, naming the controller. `refuse_first_contact`: `-trust-new-host-keys=false`
/// (`ops::healthy_controller`).
pub async fn fetch<T: Transport + Clone + 'static>(
    spec: &Spec,
    state: &State,
    transport: &T,
    over: &Overrides,
    refuse_first_contact: bool,
) -> Result<String, Failure> {
    let (host, _) = ops::healthy_controller(
        spec,
        state,
        transport,
        "get the kubeconfig from",
        refuse_first_contact,
    )
    .await?;
    let id = host.id();
    let out = transport
        .run(
            &id,
            k0s::kubeconfig_admin(&host.k0s_install_path, &host.data_dir),
        )
        .await
        .map_err(|e| Failure::error(e.to_string()))?;
    if !out.success() {
        return Err(Failure::error(format!(
            "{id}: `k0s kubeconfig admin` failed: {}",
            out.error_line()
        )));
    }
    let names = KubeconfigNames {
        cluster: over.cluster.clone().unwrap_or_else(|| spec.name.clone()),
        user: over.user.clone().unwrap_or_else(|| spec.user.clone()),
        server: over
            .address
            .clone()
            .unwrap_or_else(|| k0s::kubeconfig::api_server_url(spec, &host.ssh.address)),
    };
    k0s::kubeconfig::rewrite_admin_kubeconfig(&out.stdout_str(), &names).map_err(|e| match e {
        AdminKubeconfigError::Forbidden(_) => {
            Failure::new(Exit::Refused, format!("refused: controller {id}: {e}"))
        }
        AdminKubeconfigError::Unreadable(_) => Failure::error(format!("{id}: {e}")),
    })
}

/// Write the kubeconfig to `path` (0600, atomically, a symlink there replaced, not followed).
pub fn write(path: &std::path::Path, kubeconfig: &str) -> Result<(), Failure> {
    crate::private_file::write(path, kubeconfig.as_bytes()).map_err(|e| {
        Failure::error(format!(
            "cannot write the kubeconfig to {}: {e}",
            path.display()
        ))
    })
}

/// `apply -kubeconfig-out`: the admin kubeconfig of the cluster as it is now, from the state
/// in `store` (just written), into `path`. A secret: it goes to the file only, never to the
/// events or the progress lines.
pub async fn fetch_into<T: Transport + Clone + 'static>(
    store: Box<dyn crate::state::StateStore>,
    spec: &Spec,
    transport: &T,
    path: &std::path::Path,
    (over, refuse_first_contact): (&Overrides, bool),
) -> Result<(), Failure> {
    let state = ops::load_state(store)?.state;
    let kc = fetch(spec, &state, transport, over, refuse_first_contact).await?;
    write(path, &kc)
}
