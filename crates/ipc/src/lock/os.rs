//! The real operating system under the lock: thread ids and identity
//! tags, shared futexes, and liveness from /proc, all through raw system
//! calls (no interposable libc symbol: ipcns shares processes with other
//! preloads).
//!
//! # Safety
//! The fork handler only bumps an atomic (async-signal-safe, as a fork
//! handler must be); the system calls are `crate::sys`'s safe wrappers.
#![allow(unsafe_code)]

use super::{Liveness, Lock, Os, TID_MASK, WaitEnd};
use crate::errno::Errno;
use crate::sync::AtomicU64;
use crate::sys;
/// The clock of deadlines and heartbeats (the system-call layer's; the
/// gate reaches it here).
use crate::sys::time::monotonic_ns;
use core::cell::Cell;
use std::sync::OnceLock;

/// One sleep of a waiter before it re-checks the holder: 10 ms.
const SLICE_NS: i64 = 10_000_000;

/// Locks this process took over from holders that died holding them.
pub static RECOVERIES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// The real system.
pub struct RealOs;

/// Bumped in the child at every fork: cached thread identities are stale.
static FORKS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
static AT_FORK: OnceLock<()> = OnceLock::new();

extern "C" fn in_child() {
    FORKS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    // The C ABI's flag, cleared here rather than by a handler of its own
    // (whose code, on another page, a child would fault in).
    if let Some(flag) = CLEAR_IN_CHILD.get()
        && flag.load(core::sync::atomic::Ordering::Relaxed) != 0
    {
        flag.store(0, core::sync::atomic::Ordering::Release);
    }
}

/// A flag a fork child starts with at 0 ([`clear_in_fork_child`]).
static CLEAR_IN_CHILD: OnceLock<&'static core::sync::atomic::AtomicU32> = OnceLock::new();

/// Makes every fork child start with `flag` at 0 (one flag, the first
/// given), through the fork handler that counts forks (registered now):
/// a store only when it is not 0, since a store copies the page the child
/// shares with its parent.
pub fn clear_in_fork_child(flag: &'static core::sync::atomic::AtomicU32) {
    let _ = CLEAR_IN_CHILD.set(flag);
    let _ = fork_generation();
}

thread_local! {
    /// (fork generation + 1, identity) of this thread; 0 = not yet known.
    static ME: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// This thread's identity as a lock word names it (tag << 32 | tid), found
/// once per thread (and again in a forked child, whose tid differs).
///
/// Looked up in a table by thread pointer (`ids`), not in a thread-local:
/// in a shared object (libipcns.so) a thread-local costs a
/// `__tls_get_addr` call, and every lock and unlock asks for the identity.
#[inline]
fn me() -> u64 {
    let generation = FORKS.load(core::sync::atomic::Ordering::Relaxed) + 1;
    let tp = sys::process::thread_pointer();
    match ids::find(tp, generation) {
        Some(who) => who,
        None => me_slow(tp, generation),
    }
}

/// [`me`] with the thread's entry in the identity table, if it has one
/// (where the gate counts its locks).
#[inline]
pub(super) fn me_entry() -> (u64, Option<&'static ids::Entry>) {
    let generation = FORKS.load(core::sync::atomic::Ordering::Relaxed) + 1;
    let tp = sys::process::thread_pointer();
    match ids::find_entry(tp, generation) {
        Some((who, e)) => (who, Some(e)),
        None => {
            let who = me_slow(tp, generation);
            (who, ids::find_entry(tp, generation).map(|(_, e)| e))
        }
    }
}

/// The fork generation as the identity table keys it.
pub(super) fn generation() -> u64 {
    FORKS.load(core::sync::atomic::Ordering::Relaxed) + 1
}

/// Whether another thread (of this generation) holds an arena lock.
pub(super) fn others_inside(generation: u64, me: usize) -> bool {
    ids::others_inside(generation, me)
}

#[cold]
#[inline(never)]
fn me_slow(tp: usize, generation: u64) -> u64 {
    let (g, who) = ME.with(Cell::get);
    // The thread-local too is checked against the thread's `tid` word: a
    // child made by `_Fork` (no fork handler) has its parent's.
    let who = if g == generation && ids::tid_matches(tp, who) {
        who
    } else {
        identify(generation)
    };
    ids::enter(tp, generation, who);
    who
}

/// Thread identities by thread pointer: a table of entries each owned by
/// one live thread, cleared by that thread's exit (a thread-local
/// destructor). An entry is believed only if the thread's own `tid` word
/// (the C library's, at a fixed offset from the thread pointer: glibc's
/// kept by the kernel through CLONE_CHILD_SETTID/CLEARTID, musl's through
/// CLONE_PARENT_SETTID, both set again in a fork child)
/// still holds the tid the entry names: so a thread given the control
/// block of one that exited without running its destructors (a raw
/// `exit`, or a first call from a pthread-key destructor, after the
/// thread-locals' destructors ran) never takes that thread's identity.
/// The offset is learnt from `PR_GET_TID_ADDRESS` (musl's is known:
/// `learn_tid_offset`); without it the table is not used. Entries of the fork generation before the current one are
/// stale and may be taken. A thread whose entry is taken by another live
/// thread uses the thread-local alone.
pub(super) mod ids {
    use super::TID_MASK;
    use crate::sys;
    use core::cell::Cell;
    use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
    use core::sync::atomic::{AtomicIsize, AtomicU32, AtomicU64, AtomicUsize, fence};

    /// The offset of a thread's `tid` word from its thread pointer, or one
    /// of [`UNKNOWN`], [`UNUSABLE`].
    static TID_OFF: AtomicIsize = AtomicIsize::new(UNKNOWN);
    const UNKNOWN: isize = isize::MIN;
    const UNUSABLE: isize = isize::MIN + 1;

    /// Learns (or checks again, on each new thread) where the thread's
    /// `tid` word is; any disagreement, or no `PR_GET_TID_ADDRESS`, turns
    /// the table off for good.
    pub(super) fn learn_tid_offset() {
        let tp = sys::process::thread_pointer();
        let off = if cfg!(all(target_env = "musl", target_arch = "x86_64")) {
            // musl points the kernel's clear-at-exit address at a lock of
            // its own, not at the thread: its descriptor's `tid` (after
            // self, dtv, prev, next, sysinfo and canary) is written by the
            // kernel at the clone (CLONE_PARENT_SETTID) and by its fork in
            // the child. Checked below like glibc's.
            48
        } else {
            match sys::process::tid_address() {
                Ok(a) if a != 0 => (a as isize).wrapping_sub(tp as isize),
                _ => UNUSABLE,
            }
        };
        // glibc keeps it inside the thread's descriptor, next to the
        // thread pointer (after it on x86-64, before it on aarch64).
        let off = if (-4096..4096).contains(&off) && off % 4 == 0 {
            off
        } else {
            UNUSABLE
        };
        let off = if off != UNUSABLE && tid_word(tp, off) != sys::process::gettid() as u32 {
            UNUSABLE
        } else {
            off
        };
        let was = TID_OFF.load(Relaxed);
        if was == UNKNOWN {
            let _ = TID_OFF.compare_exchange(UNKNOWN, off, Relaxed, Relaxed);
        } else if was != off {
            TID_OFF.store(UNUSABLE, Relaxed);
        }
    }

    /// The calling thread's `tid` word.
    #[inline(always)]
    fn tid_word(tp: usize, off: isize) -> u32 {
        // SAFETY: `off` was found by `learn_tid_offset` as the distance from
        // a thread pointer to the C library's `tid` word in its descriptor
        // of the thread (glibc's: the address the kernel clears at that
        // thread's exit), and checked to hold its tid; the calling thread's own descriptor is mapped for as
        // long as it runs (its thread pointer names it). A volatile read:
        // the kernel writes the word.
        unsafe { core::ptr::read_volatile(tp.wrapping_add_signed(off) as *const u32) }
    }

    /// The calling thread's `tid` word, if its place is known.
    pub(super) fn own_tid_word() -> Option<u32> {
        match TID_OFF.load(Relaxed) {
            UNKNOWN | UNUSABLE => None,
            off => Some(tid_word(sys::process::thread_pointer(), off)),
        }
    }

    /// Whether `who` names the thread the calling thread's `tid` word
    /// names (true when that cannot be told).
    #[inline(always)]
    pub(super) fn tid_matches(tp: usize, who: u64) -> bool {
        match TID_OFF.load(Relaxed) {
            UNKNOWN | UNUSABLE => true,
            off => u64::from(tid_word(tp, off)) == who & TID_MASK,
        }
    }

    /// One thread's identity: a small seqlock (`key` the thread pointer;
    /// 0 free, [`BUSY`] being written); and how many arena locks the
    /// thread holds (`depth`, written by the thread only: see `gate.rs`).
    ///
    /// # Layout
    /// 64 bytes (a cache line: threads never share one): `key` @0,
    /// `generation` @8, `who` @16, `depth` @24.
    #[repr(C, align(64))]
    pub struct Entry {
        key: AtomicUsize,
        generation: AtomicU64,
        who: AtomicU64,
        pub depth: AtomicU32,
        /// The deadline (CLOCK_MONOTONIC ns) of the call the thread is
        /// making, for the outermost lock it waits on; 0 = none
        /// (`gate.rs`).
        pub deadline: AtomicU64,
        /// A limit for every lock the thread waits on (`with_lock_limit`);
        /// 0 = none.
        pub limit: AtomicU64,
    }

    const BUSY: usize = 1;
    const N: usize = 256;
    static IDS: [Entry; N] = [const {
        Entry {
            key: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            who: AtomicU64::new(0),
            depth: AtomicU32::new(0),
            deadline: AtomicU64::new(0),
            limit: AtomicU64::new(0),
        }
    }; N];

    const _: () = assert!(core::mem::size_of::<Entry>() == 64);

    #[inline(always)]
    fn entry(tp: usize) -> &'static Entry {
        &IDS[(tp.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) % N]
    }

    /// The identity recorded for `tp` in `generation`.
    #[inline(always)]
    pub(super) fn find(tp: usize, generation: u64) -> Option<u64> {
        find_entry(tp, generation).map(|(who, _)| who)
    }

    /// The identity recorded for `tp` in `generation`, with its entry.
    #[inline(always)]
    pub(super) fn find_entry(tp: usize, generation: u64) -> Option<(u64, &'static Entry)> {
        let off = TID_OFF.load(Relaxed);
        if off == UNKNOWN || off == UNUSABLE {
            return None;
        }
        let e = entry(tp);
        // Acquire, then the fence before the second look: pairs with the
        // writer's Release (a torn read shows as a changed key).
        if e.key.load(Acquire) != tp {
            return None;
        }
        let (g, who) = (e.generation.load(Relaxed), e.who.load(Relaxed));
        fence(Acquire);
        (e.key.load(Relaxed) == tp
            && g == generation
            && u64::from(tid_word(tp, off)) == who & TID_MASK)
            .then_some((who, e))
    }

    /// Whether a thread other than the one of `me` (a thread pointer) has
    /// an entry of `generation` with locks held. The entries' depths are
    /// read with Acquire: a depth seen back at 0 shows what its thread
    /// wrote under the locks (pairs with the Release in `gate::leave`).
    pub(super) fn others_inside(generation: u64, me: usize) -> bool {
        IDS.iter().any(|e| {
            let k = e.key.load(Acquire);
            k > BUSY
                && k != me
                && e.generation.load(Relaxed) == generation
                && e.depth.load(Acquire) != 0
        })
    }

    /// Records `who` for `tp` if its entry is free, this thread's own, or
    /// stale; arranges for it to be cleared when the thread exits.
    pub(super) fn enter(tp: usize, generation: u64, who: u64) {
        let off = TID_OFF.load(Relaxed);
        if tp <= BUSY || off == UNKNOWN || off == UNUSABLE || !tid_matches(tp, who) {
            return;
        }
        // The exit hook first: a thread whose thread-locals are gone (it
        // is exiting) records nothing.
        if EXIT.try_with(|x| x.0.set(tp)).is_err() {
            return;
        }
        let e = entry(tp);
        let k = e.key.load(Acquire);
        let takeable = k == 0 || k == tp || (k != BUSY && e.generation.load(Relaxed) != generation);
        if !takeable || e.key.compare_exchange(k, BUSY, Acquire, Relaxed).is_err() {
            return;
        }
        e.generation.store(generation, Relaxed);
        e.who.store(who, Relaxed);
        // A new thread, or this one in a fork child: no lock held.
        e.depth.store(0, Relaxed);
        e.deadline.store(0, Relaxed);
        e.limit.store(0, Relaxed);
        e.key.store(tp, Release);
    }

    /// Clears the exiting thread's entry (if it is still its own).
    struct Exit(Cell<usize>);

    impl Drop for Exit {
        fn drop(&mut self) {
            let tp = self.0.get();
            if tp > BUSY {
                let _ = entry(tp).key.compare_exchange(tp, 0, Release, Relaxed);
            }
        }
    }

    thread_local! {
        static EXIT: Exit = const { Exit(Cell::new(0)) };
    }
}

#[cold]
fn identify(generation: u64) -> u64 {
    ids::learn_tid_offset();
    AT_FORK.get_or_init(|| {
        // SAFETY: registers a child handler that only bumps an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    let tid = sys::process::gettid() as u64 & TID_MASK;
    let start = thread_stat(tid as u32).map_or(0, |(_, s)| s);
    if tid as i32 == sys::process::getpid() {
        // The leader's start is the process's: one read of /proc for both.
        remember_own_start(start);
    }
    let who = (u64::from(tag_of(boot_tag(), start)) << 32) | tid;
    ME.with(|c| c.set((generation, who)));
    who
}

/// 24 bits naming this boot (from /proc/sys/kernel/random/boot_id), never 0.
pub fn boot_tag() -> u64 {
    static TAG: OnceLock<u64> = OnceLock::new();
    *TAG.get_or_init(|| {
        let mut buf = [0u8; 64];
        let n = sys::fs::read_into(c"/proc/sys/kernel/random/boot_id", &mut buf).unwrap_or(0);
        // FNV-1a over the text.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in &buf[..n] {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        ((h ^ (h >> 24) ^ (h >> 48)) & 0xff_ffff) | 1
    })
}

/// This boot's tag, as the arena header records it.
pub fn boot_id() -> u64 {
    boot_tag()
}

/// A thread's 32-bit tag: its boot and its start time (ticks after boot),
/// mixed; never 0.
fn tag_of(boot: u64, start: u64) -> u32 {
    let mut x = (boot << 40) ^ start;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x as u32).max(1)
}

/// What /proc says of thread `tid`: its state letter and start time.
fn thread_stat(tid: u32) -> Option<(u8, u64)> {
    stat_of(tid).map(|(state, start, _)| (state, start))
}

/// State, start time and virtual memory size (bytes; 0 once the task has
/// let go of its memory, in `exit_mm`) of task `tid`, from
/// `/proc/TID/stat`.
fn stat_of(tid: u32) -> Option<(u8, u64, u64)> {
    let mut path = [0u8; 32];
    let mut w = Writer(&mut path, 0);
    let _ = core::fmt::write(&mut w, format_args!("/proc/{tid}/stat\0"));
    let path = core::ffi::CStr::from_bytes_until_nul(&path).ok()?;
    let mut buf = [0u8; 512];
    let n = sys::fs::read_into(path, &mut buf).ok()?;
    let text = &buf[..n];
    // The command (field 2) may hold anything: fields restart after its
    // last ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    // starttime is field 22: the 20th after the state (field 3); vsize
    // the next.
    let start = fields.nth(18)?;
    let start = core::str::from_utf8(start).ok()?.trim().parse().ok()?;
    let vsize = fields
        .next()
        .and_then(|v| core::str::from_utf8(v).ok()?.trim().parse().ok())
        .unwrap_or(1);
    Some((state, start, vsize))
}

/// Whether process `pid` started at `start` is gone or on its way out: as
/// [`process_alive`] says, or its memory already let go (`exit_mm`, which
/// the kernel's `do_exit` runs before `exit_sem` and before it closes the
/// process's descriptors: a process that saw it close a pipe sees it so).
pub fn process_ending(pid: i32, start: u64) -> bool {
    if !process_alive(pid, start) {
        return true;
    }
    pid != sys::process::getpid()
        && stat_of(pid as u32).is_some_and(|(_, s, vsize)| s == start && vsize == 0)
}

/// The arena files this process has mapped, as `(device << 32 | minor,
/// inode, how many times)` (up to [`MAX_ARENAS`]): what a participant maps.
/// A process that maps more (or could not note one) tells no stranger.
static ARENAS: [(AtomicU64, AtomicU64, AtomicU64); MAX_ARENAS] =
    [const { (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)) }; MAX_ARENAS];
const MAX_ARENAS: usize = 16;
/// Arenas mapped but not in [`ARENAS`] (it was full).
static UNNOTED: AtomicU64 = AtomicU64::new(0);
/// Serialises changes of [`ARENAS`]: a spin word naming its holder
/// (`pid << 32 | tid`; opens and drops of namespaces are rare). A word
/// naming another process is a fork's copy of a parent thread's (the
/// parent forked while another thread of it was noting): taken over, or
/// the child would spin forever at its first open. Each change of the
/// table is single-word stores with the count last, so what a holder
/// gone with the fork left is at worst an entry not counted.
static NOTING: AtomicU64 = AtomicU64::new(0);

fn noting<R>(f: impl FnOnce() -> R) -> R {
    // None: a signal handler of the holder's own thread, which goes on
    // without waiting for itself (each store is whole on its own).
    let _held = super::local::take(&NOTING);
    f()
}

/// The noting word as a fork's copy would leave it: held by a thread of
/// another process (for a test of the take-over).
#[cfg(test)]
pub(crate) fn noting_held_by_another_process() {
    let pid = sys::process::getpid() as u32;
    NOTING.store(
        (u64::from(pid.wrapping_add(1)) << 32) | 1,
        core::sync::atomic::Ordering::Relaxed,
    );
}

/// Records that this process maps the arena file `(dev, ino)` once more.
pub fn note_arena(dev: (u32, u32), ino: u64) {
    use core::sync::atomic::Ordering::Relaxed;
    let d = (u64::from(dev.0) << 32) | u64::from(dev.1);
    noting(|| {
        if let Some((_, _, n)) = ARENAS.iter().find(|(sd, si, n)| {
            n.load(Relaxed) > 0 && sd.load(Relaxed) == d && si.load(Relaxed) == ino
        }) {
            n.fetch_add(1, Relaxed);
        } else if let Some((sd, si, n)) = ARENAS.iter().find(|(_, _, n)| n.load(Relaxed) == 0) {
            sd.store(d, Relaxed);
            si.store(ino, Relaxed);
            n.store(1, Relaxed);
        } else {
            UNNOTED.fetch_add(1, Relaxed);
        }
    });
}

/// Records that this process dropped one mapping of the arena `(dev, ino)`.
pub fn forget_arena(dev: (u32, u32), ino: u64) {
    use core::sync::atomic::Ordering::Relaxed;
    let d = (u64::from(dev.0) << 32) | u64::from(dev.1);
    noting(|| {
        match ARENAS.iter().find(|(sd, si, n)| {
            n.load(Relaxed) > 0 && sd.load(Relaxed) == d && si.load(Relaxed) == ino
        }) {
            Some((_, _, n)) => {
                n.fetch_sub(1, Relaxed);
            }
            None => {
                let u = UNNOTED.load(Relaxed);
                UNNOTED.store(u.saturating_sub(1), Relaxed);
            }
        }
    });
}

/// Whether thread `tid` maps none of the arenas this process maps: a lock
/// word naming it names no participant (a hostile write of a live
/// stranger's identity, init's say). `false` when it cannot be told (its
/// maps are not readable to us: another user's process), or when it maps
/// one. Reads `/proc/TID/maps` a page at a time.
pub fn stranger(tid: u32) -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    if UNNOTED.load(Relaxed) != 0 {
        return false;
    }
    let ours: Vec<(u64, u64)> = ARENAS
        .iter()
        .filter(|(_, _, n)| n.load(Relaxed) > 0)
        .map(|(d, i, _)| (d.load(Relaxed), i.load(Relaxed)))
        .collect();
    if ours.is_empty() {
        return false;
    }
    let mut path = [0u8; 32];
    let mut w = Writer(&mut path, 0);
    if core::fmt::write(&mut w, format_args!("/proc/{tid}/maps\0")).is_err() {
        return false;
    }
    let Ok(path) = core::ffi::CStr::from_bytes_until_nul(&path) else {
        return false;
    };
    let Ok(f) = sys::fs::open_c(path, libc::O_RDONLY, 0) else {
        return false;
    };
    let mut buf = [0u8; 4096];
    let mut carry = 0usize;
    let mut read_any = false;
    loop {
        let Ok(n) = f.read(&mut buf[carry..]) else {
            return false;
        };
        if n == 0 {
            // The last line (maps ends every line with '\n').
            return read_any;
        }
        read_any = true;
        let end = carry + n;
        let mut start = 0;
        while let Some(nl) = buf[start..end].iter().position(|&b| b == b'\n') {
            if maps_line_is_ours(&buf[start..start + nl], &ours) {
                return false;
            }
            start += nl + 1;
        }
        // The part of a line read so far moves to the front; a line
        // longer than the buffer is no arena's (their paths are short).
        carry = end - start;
        if carry == buf.len() {
            carry = 0;
        }
        buf.copy_within(start..start + carry, 0);
    }
}

/// Whether a `/proc/PID/maps` line maps one of `ours`: its fourth field
/// is `MAJOR:MINOR` in hex, its fifth the inode in decimal. Or any arena
/// file at all (a last path component `ipcns.NAME`): an overlay file
/// system shows its upper file's device and inode there, not those stat
/// gives, and a participant wrongly taken for a stranger would lose its
/// lock; a false participant only makes the caller wait.
fn maps_line_is_ours(line: &[u8], ours: &[(u64, u64)]) -> bool {
    let mut f = line.split(|&b| b == b' ').filter(|f| !f.is_empty()).skip(3);
    let (Some(dev), Some(ino)) = (f.next(), f.next()) else {
        return false;
    };
    if let Some(path) = f.next()
        && path
            .rsplit(|&b| b == b'/')
            .next()
            .is_some_and(|name| name.starts_with(b"ipcns."))
    {
        return true;
    }
    let parse = |t: &[u8], radix| u64::from_str_radix(core::str::from_utf8(t).ok()?, radix).ok();
    let mut mm = dev.split(|&b| b == b':');
    let (Some(Some(ma)), Some(Some(mi)), Some(Some(ino))) = (
        mm.next().map(|t| parse(t, 16)),
        mm.next().map(|t| parse(t, 16)),
        Some(parse(ino, 10)),
    ) else {
        return false;
    };
    ours.contains(&(((ma << 32) | mi), ino))
}

/// How many threads this process has (`/proc/self/stat`'s num_threads).
pub fn thread_count() -> Option<u64> {
    let mut buf = [0u8; 512];
    let n = sys::fs::read_into(c"/proc/self/stat", &mut buf).ok()?;
    let text = &buf[..n];
    let close = text.iter().rposition(|&b| b == b')')?;
    // num_threads is field 20: the 17th after the state (field 3).
    let f = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .nth(17)?;
    core::str::from_utf8(f).ok()?.trim().parse().ok()
}

/// Whether the calling thread runs in memory of its own, rather than in
/// its parent's as a `vfork` child does (glibc's vfork child keeps its
/// parent's thread descriptor, whose `tid` word names the parent's
/// thread). True when that cannot be told.
pub fn owns_memory() -> bool {
    ids::own_tid_word().is_none_or(|t| t == sys::process::gettid() as u32)
}

struct Writer<'a>(&'a mut [u8], usize);

impl core::fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.1 + s.len();
        self.0
            .get_mut(self.1..end)
            .ok_or(core::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.1 = end;
        Ok(())
    }
}

impl Os for RealOs {
    #[inline]
    fn me(&self) -> u64 {
        me()
    }

    fn wait(&self, word: &AtomicU64, expected: u32) -> bool {
        // A shared (not private: the word is in a MAP_SHARED file)
        // FUTEX_WAIT on the low half of the word.
        match sys::futex::wait(word, expected, SLICE_NS as u64) {
            Ok(()) => false,
            Err(e) => {
                debug_assert!(
                    matches!(e.0, libc::ETIMEDOUT | libc::EAGAIN | libc::EINTR),
                    "futex wait: {e:?}"
                );
                e.0 == libc::ETIMEDOUT
            }
        }
    }

    fn wait_until(&self, word: &AtomicU64, expected: u32, deadline: Option<u64>) -> WaitEnd {
        let slice = match deadline {
            None => SLICE_NS as u64,
            Some(d) => d.saturating_sub(monotonic_ns()).clamp(1, SLICE_NS as u64),
        };
        match sys::futex::wait(word, expected, slice) {
            Ok(()) => WaitEnd::Woken,
            Err(e) if e.0 == libc::ETIMEDOUT => WaitEnd::TimedOut,
            Err(_) => WaitEnd::Other,
        }
    }

    fn wake(&self, word: &AtomicU64) {
        // FUTEX_WAKE of one waiter on the low half of the word.
        sys::futex::wake(word, 1);
    }

    fn liveness(&self, who: u64) -> Liveness {
        match thread_stat((who & TID_MASK) as u32) {
            // No such thread; or a zombie, which holds nothing any more.
            None | Some((b'Z' | b'X' | b'x', _)) => Liveness::Gone,
            Some((_, start)) if tag_of(boot_tag(), start) == (who >> 32) as u32 => Liveness::Alive,
            // Another thread with that tid (or garbage, or another boot).
            Some(_) => Liveness::Gone,
        }
    }

    fn took_over(&self) {
        RECOVERIES.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }

    fn stranger(&self, who: u64) -> bool {
        stranger((who & TID_MASK) as u32)
    }

    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }

    fn slice_ns(&self) -> u64 {
        SLICE_NS as u64
    }
}

/// Who holds a lock, as `ns info` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub tid: u32,
    /// The thread's state letter in /proc (R, S, D, T, Z...), if it exists.
    pub state: Option<char>,
    pub verdict: Liveness,
    /// The lock's protected state awaits a repair.
    pub dirty: bool,
}

/// The holder of `lock`, if it is held (or marked dirty).
pub fn holder_of(lock: &Lock) -> Option<Holder> {
    let (word, dirty) = lock.snapshot();
    let tid = (word & TID_MASK) as u32;
    if tid == 0 && !dirty {
        return None;
    }
    Some(Holder {
        tid,
        state: (tid != 0)
            .then(|| thread_stat(tid).map(|(s, _)| s as char))
            .flatten(),
        verdict: if tid == 0 {
            Liveness::Gone
        } else {
            RealOs.liveness(word & !(super::WAITERS | 1 << 30))
        },
        dirty,
    })
}

/// The identity (as lock words name threads) of live thread `tid`, from
/// /proc: for tests that write one where a hostile participant would.
#[cfg(feature = "testing")]
pub fn identity_of(tid: u32) -> Option<u64> {
    let (_, start) = thread_stat(tid)?;
    Some((u64::from(tag_of(boot_tag(), start)) << 32) | u64::from(tid))
}

/// This thread's identity as lock words and waiter records name it.
pub fn my_identity() -> u64 {
    me()
}

/// How a [`futex_wait`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// A wake-up, or the word no longer held the expected value.
    Woken,
    /// The time ran out.
    TimedOut,
    /// A signal handler ran (EINTR: the caller's operation fails with it,
    /// even under SA_RESTART, as semop's does).
    Interrupted,
}

/// Sleeps while the shared futex `word` holds `expected`, at most
/// `timeout_ns` (always finite, so that a signal handler surfaces as
/// EINTR instead of a transparent restart).
pub fn futex_wait(word: &core::sync::atomic::AtomicU32, expected: u32, timeout_ns: u64) -> Woke {
    // A shared FUTEX_WAIT on a word in the mapped arena.
    match sys::futex::wait(word, expected, timeout_ns) {
        Ok(()) => Woke::Woken,
        Err(e) if e.0 == libc::ETIMEDOUT => Woke::TimedOut,
        Err(Errno::EINTR) => Woke::Interrupted,
        Err(_) => Woke::Woken,
    }
}

/// Wakes every sleeper on the shared futex `word`.
pub fn futex_wake_all(word: &core::sync::atomic::AtomicU32) {
    sys::futex::wake(word, i32::MAX);
}

/// [`fork_generation`] without registering the fork handler: for a hot
/// path whose cache was made after a call to [`fork_generation`].
#[inline(always)]
pub fn forks_now() -> u64 {
    FORKS.load(core::sync::atomic::Ordering::Relaxed)
}

/// Changes in a forked child (and only there): caches keyed by it are
/// stale after fork. Registers the fork handler on first use.
pub fn fork_generation() -> u64 {
    AT_FORK.get_or_init(|| {
        // SAFETY: registers a child handler that only bumps an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    FORKS.load(core::sync::atomic::Ordering::Relaxed)
}

/// Whether process `pid` started at `start` (ticks after boot) is alive:
/// it exists, is not a zombie, and has that start time.
pub fn process_alive(pid: i32, start: u64) -> bool {
    if pid <= 0 {
        return false;
    }
    // This very process (asked at every shmctl and shmdt of its own
    // segments): alive if the start time is its own, without /proc.
    if pid == sys::process::getpid() {
        let own = own_start();
        if own != 0 {
            return start == own;
        }
    }
    // Signal 0 only checks existence.
    if sys::process::kill(pid, 0) == Err(Errno::ESRCH) {
        return false;
    }
    match thread_stat(pid as u32) {
        None | Some((b'Z' | b'X' | b'x', _)) => false,
        Some((_, s)) => s == start,
    }
}

/// The start time of this process (ticks after boot).
pub fn own_start() -> u64 {
    use core::sync::atomic::Ordering::{Acquire, Relaxed};
    let generation = fork_generation() + 1;
    // Acquire: pairs with the Release in `remember_own_start`.
    if OWN_START_OF.load(Acquire) == generation {
        return OWN_START.load(Relaxed);
    }
    let pid = sys::process::getpid();
    let start = thread_stat(pid as u32).map_or(0, |(_, s)| s);
    remember_own_start(start);
    start
}

/// This process's start time, for the fork generation in
/// [`OWN_START_OF`] (a fork child reads its own again).
static OWN_START: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
static OWN_START_OF: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

fn remember_own_start(start: u64) {
    use core::sync::atomic::Ordering::{Relaxed, Release};
    if start == 0 {
        return;
    }
    OWN_START.store(start, Relaxed);
    OWN_START_OF.store(fork_generation() + 1, Release);
}

/// Eight random bytes from the kernel (`getrandom`), if it has them.
pub fn random_u64() -> Option<u64> {
    let mut b = [0u8; 8];
    let n = sys::process::getrandom(&mut b, libc::GRND_NONBLOCK);
    let r = u64::from_le_bytes(b);
    (n == Ok(8) && r != 0).then_some(r)
}

/// `getppid()`.
pub fn parent_pid() -> i32 {
    sys::process::getppid()
}

/// Whether thread `tid` of process `tgid` exists: `tgkill(tgid, tid, 0)`
/// only (no /proc read). A zombie still answers yes.
pub fn thread_answers(tgid: i32, tid: u32) -> bool {
    // Signal 0 only checks existence and permission.
    sys::process::tgkill(tgid, tid as i32, 0) != Err(Errno::ESRCH)
}

/// Whether the thread a lock word or sleeper record names (tag << 32 |
/// tid) lives: it exists, is not a zombie, and has that tag (so a reused
/// tid is not taken for it). Reads /proc.
pub fn identity_alive(who: u64) -> bool {
    RealOs.liveness(who) == Liveness::Alive
}

/// Identities this process found alive in /proc lately, with when (ns):
/// a small ring, overwritten in turn.
static VERIFIED: [(AtomicU64, AtomicU64); VERIFIED_SLOTS] =
    [const { (AtomicU64::new(0), AtomicU64::new(0)) }; VERIFIED_SLOTS];
const VERIFIED_SLOTS: usize = 16;
static VERIFIED_NEXT: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
/// How long an identity read from /proc stays proven: its tag is its
/// thread's start time, so the same identity names that very thread until
/// the tid is handed out again, which takes `pid_max` (at least 32768)
/// new tasks: far more than this long allows.
const VERIFIED_NS: u64 = 20_000_000;

/// Whether the thread `who` (tag << 32 | tid) of process `pid`, which
/// answers `tgkill`, lives: as [`identity_alive`], but for an identity
/// read from /proc within [`VERIFIED_NS`], only whether its process has
/// exited (a pidfd that is readable: a zombie, which /proc shows as
/// such), two system calls instead of a /proc read (a waker's check of a
/// sleeper, under the set's lock, on every hand-over: through
/// [`sleeper_identity_alive_as_of`], after its own look at the table).
#[cfg(test)]
pub fn sleeper_identity_alive(pid: i32, who: u64) -> bool {
    let now = monotonic_ns();
    sleeper_identity_alive_as_of(pid, who, now, identity_verified_lately(who, now))
}

/// `sleeper_identity_alive` (the whole check) for a caller that has just asked
/// [`identity_verified_lately`]`(who, now)`: `verified` is its answer.
pub fn sleeper_identity_alive_as_of(pid: i32, who: u64, now: u64, verified: bool) -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    if verified {
        match sys::process::pidfd_open(pid, 0) {
            Err(Errno::ESRCH) => return false,
            Ok(fd) => {
                if let Ok(exited) = fd.readable_now() {
                    return !exited;
                }
            }
            // No descriptor to spare, or no pidfds: /proc decides.
            Err(_) => {}
        }
    }
    let alive = identity_alive(who);
    if alive {
        let i = VERIFIED_NEXT.fetch_add(1, Relaxed) % VERIFIED_SLOTS;
        // The time first: a reader that sees the new identity with the old
        // time only asks /proc again.
        VERIFIED[i].1.store(now, Relaxed);
        VERIFIED[i].0.store(who, Relaxed);
    }
    alive
}

/// Whether /proc showed the identity `who` alive in the last
/// `VERIFIED_NS` (so that [`sleeper_identity_alive_as_of`] asks only a pidfd).
pub fn identity_verified_lately(who: u64, now: u64) -> bool {
    use core::sync::atomic::Ordering::Relaxed;
    VERIFIED
        .iter()
        .any(|(w, t)| w.load(Relaxed) == who && now.saturating_sub(t.load(Relaxed)) < VERIFIED_NS)
}

/// The children this thread has forked and not yet reaped, from
/// `/proc/self/task/TID/children` (needs CONFIG_PROC_CHILDREN); None when
/// the file is missing or the list does not fit 64 KiB.
pub fn thread_children() -> Option<Vec<i32>> {
    let tid = sys::process::gettid();
    let mut path = [0u8; 48];
    let mut w = Writer(&mut path, 0);
    core::fmt::write(&mut w, format_args!("/proc/self/task/{tid}/children\0")).ok()?;
    let path = core::ffi::CStr::from_bytes_until_nul(&path).ok()?;
    let parse = |b: &[u8]| -> Option<Vec<i32>> {
        b.split(|&b| b == b' ' || b == b'\n')
            .filter(|f| !f.is_empty())
            .map(|f| core::str::from_utf8(f).ok()?.parse().ok())
            .collect()
    };
    // A few children fit on the stack: right after a fork, while the
    // child still shares the heap's pages, a zeroed 64 KiB buffer cost 16
    // copy-on-write faults.
    let mut small = [0u8; 4096];
    let n = sys::fs::read_into(path, &mut small).ok()?;
    if n < small.len() {
        return parse(&small[..n]);
    }
    let mut buf = vec![0u8; 1 << 16];
    let n = sys::fs::read_into(path, &mut buf).ok()?;
    if n == buf.len() {
        return None;
    }
    parse(&buf[..n])
}

/// The start time (ticks after boot) of process `pid`, if it exists.
pub fn process_start(pid: i32) -> Option<u64> {
    u32::try_from(pid)
        .ok()
        .and_then(thread_stat)
        .map(|(_, s)| s)
}
