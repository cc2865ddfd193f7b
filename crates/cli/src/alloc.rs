//! glibc malloc settings for a process that moves packets.
//!
//! Faces read into 128 KiB buffers that the packets cut from them share; a
//! buffer is freed when its last packet has been written out, on whichever
//! thread that was. With glibc's defaults, freeing such a chunk at the top of
//! a thread's arena gives the memory back to the kernel (`madvise`), and the
//! next buffer faults it in again, page by page: measured on a forwarder, 0.6
//! page faults per 8 KiB exchange and a third of its CPU (bench/RESULTS.md,
//! "Forwarder"). Keeping up to 64 MiB of freed memory per arena, and serving
//! blocks up to 4 MiB from the arenas instead of fresh `mmap`s, ends that;
//! memory is still returned above those sizes.

/// Applies the settings; call once, first thing in `main`.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only changes glibc's own malloc parameters (under
        // its arena lock); it takes two integers, reads or writes no memory of
        // ours and is called here before any other thread exists. The
        // parameter codes are glibc's (libc's constants for this target).
        unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
            libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        }
    }
}
