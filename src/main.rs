//! Entry point: all logic lives in the library so it can be tested without a process.

/// mimalloc instead of glibc's malloc: a plan allocates and frees millions of small strings and
/// maps, and glibc's free-list upkeep (`malloc_consolidate`, `unlink_chunk`) grows with the heap.
/// Measured by testdata/lab/bench figure 4 side by side (2026-12-03, same synthetic inputs,
/// medians of 3): 50,000 hosts 7.90 s → 4.79 s, 5,000 ÷ 50,000 ratio 12.7 → 9.6, peak RSS
/// 457 → 471 MiB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    k0sform::run(std::env::args_os().collect())
}
