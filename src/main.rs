//! Entry point: all logic lives in the library so it can be tested without a process.

/// mimalloc instead of glibc's malloc: a plan allocates and frees millions of small strings and
/// maps, and glibc's free-list upkeep (`malloc_consolidate`, `unlink_chunk`) grows with the heap.
/// Measured side by side on testdata/lab/bench figure 4's synthetic inputs (2026-12-03, medians
/// of 3): the 50,000-host plan 7.90 s → 4.79 s, the 5,000-host plan 0.62 → 0.50 s, peak RSS
/// 457 → 471 MiB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_transparent_huge_pages();
    k0sform::run(std::env::args_os().collect())
}

/// Ask the kernel for 4 KiB pages only (`PR_SET_THP_DISABLE`, what mimalloc's
/// `MIMALLOC_ALLOW_THP=0` does). On kernels with transparent huge pages set to `always`,
/// mimalloc's arenas otherwise fault in 2 MiB at a time: a short-lived CLI then carries twice
/// the memory it uses, and its run time depends on whether the kernel has huge pages free at
/// that moment (compaction, memory given back to a hypervisor). Measured on testdata/lab/bench
/// figure 4's inputs (2026-12-05, two sets of 6 interleaved runs): peak RSS of the 500-host
/// plan 37-38 -> 17-21 MiB, of the 5,000-host plan 90 -> 66-68 MiB; 5,000 hosts median
/// 0.25 -> 0.28 s (spread 0.24-0.36 -> 0.27-0.28 s), 50,000 hosts median 2.84-3.22 -> 2.87-2.88 s
/// (spread 2.78-3.40 -> 2.83-3.01 s). Inherited by the processes k0sform starts (ssh, curl): harmless there.
fn no_transparent_huge_pages() {
    // SAFETY: prctl(2) with PR_SET_THP_DISABLE only sets a flag on this process; it takes no
    // pointers. A kernel without it returns an error, which changes nothing and is ignored.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
