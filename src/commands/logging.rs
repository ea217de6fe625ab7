//! Logging for one run: stderr, and the debug log of runs that connect (`runlog`).

/// Logs go to stderr: warnings by default, `-v` info, `-vv` debug, `-vvv` trace
/// (`K0SFORM_LOG` overrides with a tracing filter). With a run log (`runlog`), k0sform's own
/// debug events also go to that file, whatever the stderr level.
pub(super) fn init(verbose: u8, log: Option<crate::runlog::Writer>) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{EnvFilter, fmt};
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("K0SFORM_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let stderr = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(crate::ui::stderr_color())
        .without_time()
        .with_filter(filter);
    // Only k0sform's own events: a library's debug output (TLS, HTTP/2 frames of the state etcd)
    // is noise, and k0sform vets what its own events carry.
    let file = log.map(|f| {
        fmt::layer()
            .with_writer(f)
            .with_ansi(false)
            .with_filter(Targets::new().with_target("k0sform", LevelFilter::DEBUG))
    });
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .try_init();
}
