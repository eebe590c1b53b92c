//! Death words: the kernel says in the arena, the instant a process dies,
//! that it died.
//!
//! Linux applies a dying process's SEM_UNDO in `do_exit` before it closes
//! the process's descriptors and before the parent can reap it, so a
//! process that sees it gone (EOF on a pipe it held, a pidfd, waitpid)
//! sees the undo done. A process killed with SIGKILL runs no code of ours;
//! but the kernel, at the same point of `do_exit` (`exit_mm`, before
//! `exit_sem` and `exit_files`), walks each dying thread's robust futex
//! list and marks every futex word there that holds the thread's id
//! (`FUTEX_OWNER_DIED`). So each process record gets a word the kernel
//! marks: its **death word**, in a page of the heap of its own (the
//! record's `spare[1]`, tagged), holding the id of the thread that linked
//! an entry for it into its robust list (`sys::robust`). An observer that
//! reads a set's values first looks at the death words of the set's
//! SEM_UNDO holders (`sem`'s `reap_marked_holders`): a marked one whose
//! process is gone (checked in /proc) is finished there and then, as the
//! kernel would have finished it.
//!
//! # The entry stays out of the arena
//! The entry's `next` word is read by the kernel when it walks the list,
//! and glibc writes it when it links its own mutexes around it: in the
//! arena, a participant could make the kernel walk (and mark) whatever it
//! liked in a dying victim's memory. So the entry is in a private page,
//! and the word in the arena page before it: the page is mapped a second
//! time (`mremap` of length 0 duplicates a shared mapping) right below a
//! private page of ours, with the word in its last bytes ([`WORD_AT`]) and
//! the entry in the private page at the word's address less the list's
//! `futex_offset` (glibc's -32 on x86-64: the word is 32 bytes below).
//!
//! # Life
//! - Armed by the record's process (`arm`): when it makes its record,
//!   claims the one its parent made before a fork, or takes the record of
//!   the image an exec replaced (the kernel walks the list at an execve
//!   too, which marks the word: the new image arms it again).
//! - A marked word with its process alive (the thread that linked it
//!   ended, or an exec not yet taken over) costs an observer a /proc read,
//!   nothing more; such a process's death is then found as before.
//! - The page is freed only when no list of a live thread can hold the
//!   entry any more: by a finisher that found the process gone, or by the
//!   process itself after it took the entry out of its list (on the thread
//!   that linked it). A process that ends its record on another thread
//!   leaves the record (empty) to the reapers.
//! - Without a robust list of glibc's shape (none registered, another
//!   offset, any musl thread: `sys::robust::head`) nothing is armed: the
//!   record's death is found as before (a reaper, a sleeper's tick,
//!   shmctl, the parent's wait).
//! - A participant that writes a death word can hide a death (then it is
//!   found as before) or feign one (an observer then reads /proc and finds
//!   the process alive); the process itself relinks its entry only once the
//!   thread that linked it is gone (`tgkill` with signal 0), so a feigned
//!   mark never has it link one entry twice.
//!
//! # Safety
//! The two pages of a session are mapped here and never unmapped while its
//! entry may be linked: only a fork child unmaps its parent's (no list of
//! the child's holds the parent's entry). The entry is linked and unlinked
//! only by the thread whose list it is in (`sys::robust`), and linked only
//! when it is in no list (never linked in this process, or the thread that
//! linked it is gone).
#![allow(unsafe_code)]

use crate::arena::death::Armed;
use crate::errno::Errno;
use crate::lock;
use crate::proc::{self, Proc};
use crate::session::Session;
use crate::sys::robust;
use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::Relaxed;

const WORD_AT: u64 = proc::DEATH_WORD_AT;
const PAGE: u64 = 4096;

/// What a record's death word says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Word {
    /// Not armed: nothing is known.
    Unknown,
    /// The thread that linked it lives (so does its process).
    Armed,
    /// That thread ended: the process may be gone.
    Marked,
}

/// Reads record `r`'s death word.
pub(crate) fn read(a: &Session, r: &Proc) -> Word {
    match proc::death_word(a, r).map(|w| w.load(Relaxed)) {
        Some(w) if w & robust::OWNER_DIED != 0 => Word::Marked,
        Some(w) if w & robust::TID_MASK != 0 => Word::Armed,
        _ => Word::Unknown,
    }
}

/// Arms record `idx`, the calling process's own (see the module doc):
/// nothing to do if its entry is linked on a live thread of this process.
/// Takes the procs lock.
pub(crate) fn arm(a: &Session, idx: u32) -> Result<(), Errno> {
    let me = &a.death;
    let generation = lock::fork_generation();
    if me.entry.load(Relaxed) != 0 && me.generation.load(Relaxed) == generation {
        let w = {
            let _g = proc::lock(a)?;
            proc::death_word(a, proc::record(a, idx)?)
        };
        let linked_by = me.tid.load(Relaxed);
        match w.map(|w| w.load(Relaxed)) {
            // Armed (a sleeper may have added FUTEX_WAITERS).
            Some(v) if v & !robust::WAITERS == linked_by & robust::TID_MASK => return Ok(()),
            Some(_) if crate::sys::process::thread_alive(linked_by as i32) => {
                // The word was written by someone else (the thread that
                // linked the entry lives): the entry is still linked.
                if let Some(w) = w {
                    w.store(linked_by & robust::TID_MASK, Relaxed);
                }
                return Ok(());
            }
            // That thread is gone, and its list with it.
            _ => me.entry.store(0, Relaxed),
        }
    }
    let Some((head, off)) = robust::head() else {
        return Ok(());
    };
    // The entry in the private page, [entry - 8, entry + 8) in it.
    if !(-(PAGE as isize)..=-16).contains(&off) || off % 8 != 0 {
        return Ok(());
    }
    let (page, word) = {
        let _g = proc::lock(a)?;
        let r = proc::record(a, idx)?;
        if proc::death_page(r).is_none() {
            let p = a.alloc(PAGE)?;
            if !p.is_multiple_of(PAGE) {
                let _ = a.free(p, PAGE);
                return Ok(());
            }
            proc::set_death_page(r, p);
        }
        match (proc::death_page(r), proc::death_word(a, r)) {
            (Some(p), Some(w)) => (p, w),
            _ => return Ok(()),
        }
    };
    // The arena page, as this process maps it.
    let shared = word as *const AtomicU32 as usize - WORD_AT as usize;
    let map = mapping(me, generation, page, shared)?;
    let tid = crate::sys::process::gettid() as u32;
    word.store(tid & robust::TID_MASK, Relaxed);
    let entry = (map as isize + WORD_AT as isize - off) as usize;
    // SAFETY: `[map + 4096, map + 8192)` is this process's private page
    // (`mapping`), which stays mapped while the entry may be linked, and
    // holds `[entry - 8, entry + 8)` (the offset's range, above); the
    // entry is in no list (checked above); `head` is this thread's; the
    // word at `entry + off` is the record's death word, through the
    // page's second mapping.
    unsafe { robust::link(head, entry) };
    me.tid.store(tid, Relaxed);
    me.entry.store(entry, Relaxed);
    Ok(())
}

/// This process's two pages for `page` (the arena page at `shared` in its
/// mapping): the page mapped again, then a private page. Made once per
/// process (a fork child makes its own: its parent's entry is in no list
/// of the child's, and its page is the parent's record's). Called only
/// while the entry is in no list.
fn mapping(me: &Armed, generation: u64, page: u64, shared: usize) -> Result<usize, Errno> {
    let map = me.map.load(Relaxed);
    if map != 0 && me.generation.load(Relaxed) == generation && me.page.load(Relaxed) == page {
        return Ok(map);
    }
    if map != 0 && me.generation.load(Relaxed) != generation {
        // The parent's pages, inherited by fork: no list of ours holds
        // the parent's entry.
        // SAFETY: this session's own two pages, mapped by `mapping` in the
        // parent; nothing of the child's refers to them.
        let _ = unsafe { crate::sys::mem::munmap(map, 2 * PAGE as usize) };
        me.map.store(0, Relaxed);
    }
    let map = if me.map.load(Relaxed) != 0 {
        // Another page for this process (a record made again after its
        // first was freed): only the shared page is replaced.
        me.map.load(Relaxed)
    } else {
        // SAFETY: a new private mapping where the kernel chooses.
        unsafe {
            crate::sys::mem::mmap_at(
                0,
                2 * PAGE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        }?
    };
    // SAFETY: `[map, map + 4096)` is ours (just made, or our earlier second
    // mapping of a death page); `shared` is a page of the arena's shared
    // mapping.
    if let Err(e) = unsafe { crate::sys::mem::mremap_duplicate(shared, PAGE as usize, map) } {
        if me.map.load(Relaxed) == 0 {
            // SAFETY: the two pages just made, referred to by nothing.
            let _ = unsafe { crate::sys::mem::munmap(map, 2 * PAGE as usize) };
        }
        return Err(e);
    }
    me.map.store(map, Relaxed);
    me.page.store(page, Relaxed);
    me.generation.store(generation, Relaxed);
    Ok(map)
}

/// Before record `r` of the calling process is freed with its page while
/// the process lives (its exit, or its namespace dropped): takes the entry
/// out of the list if this thread linked it. Whether the page may be
/// freed: unlinked, or never armed, or marked (the thread that linked it
/// ended, and its list with it).
pub(crate) fn disarm(a: &Session, r: &Proc) -> bool {
    let me = &a.death;
    match read(a, r) {
        Word::Unknown | Word::Marked => return true,
        Word::Armed => {}
    }
    let mine = me.map.load(Relaxed) != 0
        && me.generation.load(Relaxed) == lock::fork_generation()
        && proc::death_page(r) == Some(me.page.load(Relaxed));
    if !mine || me.tid.load(Relaxed) != crate::sys::process::gettid() as u32 {
        return false;
    }
    let entry = me.entry.swap(0, Relaxed);
    if entry == 0 {
        return false;
    }
    // SAFETY: linked by `arm` on this very thread, in this process (same
    // fork generation), and not taken out since (`entry` is swapped out
    // once).
    unsafe { robust::unlink(entry) };
    if let Some(w) = proc::death_word(a, r) {
        w.store(0, Relaxed);
    }
    true
}

/// Frees record `r`'s death page, if it has one. Procs lock held; only
/// when no live thread's list can hold its entry (see the module doc).
pub(crate) fn free_page(a: &Session, r: &Proc) {
    if let Some(p) = proc::death_page(r) {
        proc::clear_death_page(r);
        if a.in_heap(p, PAGE) {
            let _ = a.free(p, PAGE);
        }
    }
}
