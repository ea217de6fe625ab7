//! The async runtime and the SSH transport one command runs with.

use super::Failure;
use crate::exit::Exit;
use crate::ssh::{SshOptions, SshTransport};

pub fn ssh_transport() -> Result<SshTransport, Failure> {
    SshTransport::new(SshOptions::default()).map_err(|e| {
        Failure::error(format!(
            "cannot create a private SSH control directory: {e}"
        ))
    })
}

/// Run `work` with an SSH transport inside a tokio runtime, close every connection afterwards
/// (whatever `work` returned), and turn the result into an exit code.
pub fn with_ssh<F, Fut>(work: F) -> Exit
where
    F: FnOnce(SshTransport) -> Fut,
    Fut: std::future::Future<Output = Result<Exit, Failure>>,
{
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(f) => return f.exit(),
    };
    rt.block_on(async {
        let transport = match ssh_transport() {
            Ok(t) => t,
            Err(f) => return f.exit(),
        };
        let result = work(transport.clone()).await;
        transport.close_all().await;
        match result {
            Ok(exit) => exit,
            Err(f) => f.exit(),
        }
    })
}

/// A tokio runtime for one command. Two worker threads are plenty: the work is waiting on SSH.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::error(format!("cannot start the async runtime: {e}")))
}
