//! The calling thread's robust futex list (`set_robust_list(2)`), as the
//! C library registered it: an entry of our own linked into it, so that
//! the kernel marks a word of ours when the thread ends (its exit, its
//! process's death by any signal, an execve), before the process closes
//! its descriptors and before its parent can reap it.
//!
//! The list is the C library's: glibc registers one per thread
//! (`robust_head` in its thread control block) and links its robust
//! mutexes into it, doubly linked: an entry is the address of a `next`
//! word, with the `prev` word right below it, and the futex word at
//! `entry + futex_offset` (the offset is the head's). Linking follows
//! glibc's own `ENQUEUE_MUTEX_BOTH` (the new entry first; the old first
//! entry's `prev`, or the head's, names it), so glibc can take its own
//! mutexes out of the list around ours: it writes our `next` and `prev`
//! words then, and reads neither. The kernel reads our `next` word when
//! it walks the list at the thread's end, and marks the futex word
//! (`FUTEX_OWNER_DIED`) if it holds the thread's id.
//!
//! # Safety
//! The head is read from the kernel (`get_robust_list` of the calling
//! thread: the C library's, valid for the thread's life) and written only
//! by the thread itself, as glibc writes it; a signal handler that locks
//! a robust mutex during [`link`] would be undefined already
//! (`pthread_mutex_lock` is not async-signal-safe). The entry's words are
//! the caller's (see [`link`]).
#![allow(unsafe_code)]

use crate::raw::syscall3;

/// `FUTEX_OWNER_DIED`: the bit the kernel sets in a dead owner's word.
pub const OWNER_DIED: u32 = 0x4000_0000;
/// `FUTEX_WAITERS`: someone sleeps on the word (the kernel wakes one when
/// it marks it).
pub const WAITERS: u32 = 0x8000_0000;
/// `FUTEX_TID_MASK`: the owner's thread id in the word.
pub const TID_MASK: u32 = 0x3fff_ffff;

/// `struct robust_list_head`: the first entry, the futex words' offset
/// from their entries, and the entry being locked or unlocked.
#[repr(C)]
struct Head {
    list: usize,
    futex_offset: isize,
    pending: usize,
}

/// The calling thread's registered list head and its futex offset, if it
/// has one of the kernel's size (`get_robust_list(0, ...)`) and of
/// glibc's shape.
///
/// Never with musl: it registers a thread's list only when the thread
/// first locks a robust mutex, and its head has no `prev` word below it
/// (the thread's `tsd` pointer is there, which [`link`] would overwrite);
/// its futex offset, -28, is not one an entry here can take either. Its
/// threads have no death word (`ipcns`'s `process/death.rs`: a death is
/// found as before).
pub fn head() -> Option<(usize, isize)> {
    if cfg!(target_env = "musl") {
        return None;
    }
    let mut head: usize = 0;
    let mut len: usize = 0;
    // SAFETY: the kernel writes one pointer and one length into our two
    // locals.
    unsafe {
        syscall3(
            libc::SYS_get_robust_list,
            0,
            &raw mut head as usize,
            &raw mut len as usize,
        )
    }
    .ok()?;
    if head == 0 || len != core::mem::size_of::<Head>() || !head.is_multiple_of(8) {
        return None;
    }
    // SAFETY: the registered head of the calling thread, the C library's
    // (see the module doc): mapped and readable for the thread's life.
    let off = unsafe { (*(head as *const Head)).futex_offset };
    Some((head, off))
}

/// Links `entry` first into the calling thread's list with head `head`
/// (from [`head`], on this very thread): the kernel will mark the word at
/// `entry + futex_offset` when the thread ends, if it holds the thread's
/// id.
///
/// # Safety
/// `[entry - 8, entry + 8)` is memory of this process that stays mapped
/// and private to it (no other process can write it) for as long as the
/// entry is linked, 8-byte aligned; `head` is this thread's head; the word
/// at `entry + futex_offset` is the caller's.
pub unsafe fn link(head: usize, entry: usize) {
    let h = head as *mut Head;
    // SAFETY: the thread's own head and the caller's entry (see above);
    // the first entry (or the head itself) has its `prev` word right
    // below its `next` word, as glibc lays them out (`robust_prev` below
    // the head).
    unsafe {
        let first = (*h).list & !1;
        *(entry as *mut usize) = (*h).list;
        *((entry - 8) as *mut usize) = head;
        *((first - 8) as *mut usize) = entry;
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        (*h).list = entry;
    }
}

/// Takes `entry` out of the calling thread's list, where [`link`] put it
/// on this thread.
///
/// # Safety
/// `entry` is linked in the calling thread's list (as [`link`] requires
/// it); its neighbours are glibc's entries or the head.
pub unsafe fn unlink(entry: usize) {
    // SAFETY: our entry's words, and its neighbours' `next` and `prev`
    // words, which glibc keeps naming ours (see the module doc).
    unsafe {
        let next = *(entry as *const usize);
        let prev = *((entry - 8) as *const usize);
        *(prev as *mut usize) = next;
        *(((next & !1) - 8) as *mut usize) = prev;
    }
}
