//! TODO(k0s): move to k0s module. Two readers of k0s/kubectl output the `k0s` module does not
//! offer yet; they belong in `k0s::parse` (nothing else in apply reads k0s output).

use crate::transport::CommandOutput;

// TODO(k0s): move to k0s module
/// `kubectl get --raw=/readyz` answered `ok`.
pub fn is_ready(out: &CommandOutput) -> bool {
    out.success() && out.stdout_str().trim() == "ok"
}

// TODO(k0s): move to k0s module
/// kubectl failed because the object does not exist (`Error from server (NotFound): …`), which
/// for drain/delete means there is nothing left to do.
pub fn is_not_found(out: &CommandOutput) -> bool {
    let e = out.stderr_str();
    e.contains("(NotFound)") || e.contains(" not found")
}
