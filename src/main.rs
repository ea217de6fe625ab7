//! Entry point: all logic lives in the library so it can be tested without a process.

fn main() -> std::process::ExitCode {
    k0sform::run(std::env::args_os().collect())
}
