//! What the C allocator (glibc's malloc, which Rust's `System` allocator
//! calls) holds in this process: the bytes the program has allocated and
//! not freed, and the bytes freed but kept in its arenas. RSS is roughly
//! their sum plus the binary's pages; a creeping RSS whose bytes in use
//! stay flat is the allocator keeping memory (fragmentation), not the
//! program holding more (a leak). Read with `mallinfo2` (glibc 2.33+),
//! which walks every arena under its lock: cheap once a minute, not per
//! message.
#![allow(unsafe_code)]

/// glibc's totals over every arena, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MallocStats {
    /// Allocated and not freed: chunks in the arenas (`uordblks`) and
    /// chunks mapped on their own (`hblkhd`).
    pub(crate) in_use: u64,
    /// Freed and kept in the arenas (`fordblks`).
    pub(crate) free_kept: u64,
}

/// This process's totals; `None` where the C library is not glibc.
pub(crate) fn now() -> Option<MallocStats> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallinfo2` takes no argument and returns a struct by
        // value; glibc locks each arena while it sums it.
        let info = unsafe { libc::mallinfo2() };
        Some(MallocStats {
            in_use: (info.uordblks + info.hblkhd) as u64,
            free_kept: info.fordblks as u64,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn a_block_held_counts_as_in_use_until_it_is_freed() {
        // Other tests of this binary allocate meanwhile on their threads;
        // 64 MiB stands out of their noise.
        let before = now().expect("glibc").in_use;
        let held = vec![7u8; 64 << 20];
        let during = now().expect("glibc").in_use;
        assert!(
            during >= before + (60 << 20),
            "64 MiB held: in use {before} -> {during}"
        );
        drop(held);
        let after = now().expect("glibc").in_use;
        assert!(
            after + (60 << 20) <= during,
            "64 MiB freed: in use {during} -> {after}"
        );
    }
}
