//! What the benchmarks need below safe Rust: `fstat(2)`, as seed 003's
//! kernel measurement did (std's `File::metadata` uses `statx`), loop
//! alignment, for `bench lock`: pages of anonymous memory, glibc's
//! pthread mutexes in them, `fork(2)`, and cpu affinity, for `bench
//! semop`: the kernel's `semtimedop(2)` and `setns(2)`, and for `bench
//! shm`: the kernel's `shmat(2)` and `shmdt(2)` and a byte written in each
//! page of an attachment.
//!
//! # Safety
//! `fstat` writes one `struct stat` through a pointer to a local of that
//! type, on a descriptor borrowed for the duration of the call. The
//! alignment is padding in the instruction stream only. `semtimedop` hands
//! the kernel a borrowed slice of `sembuf`s (laid out as the kernel's
//! `struct sembuf`, pinned below), its length, and a NULL timeout; the
//! kernel only reads them. `setns` gets a descriptor borrowed for the call
//! and a flag.
//!
//! A [`Page`] is a fresh anonymous mapping of [`PAGE`] zeroed bytes, owned
//! by the value and unmapped by its drop; nothing hands out a borrow that
//! outlives it. [`SharedPage`] is only ever seen as `AtomicU64`s (any bits
//! are a valid one, so another process writing the page is harmless).
//! A [`PthreadMutex`] lives at the start of its own page (page-aligned, so
//! aligned for `pthread_mutex_t`), never moves, is initialised before any
//! other call, is locked and unlocked only in pairs by one thread inside
//! [`PthreadMutex::section`] (whose guard unlocks on unwinding too), and is
//! destroyed by the drop, when nothing can hold it. [`fork`] runs only in a
//! process with one thread (it checks), so the child may do anything the
//! parent could; the child never returns into the caller's frames: it ends
//! with `_exit` after running the closure. The affinity calls read and
//! write a local `cpu_set_t` of the size they are given.
//!
//! A [`Segment`] is made by its own `shmget(IPC_PRIVATE, size, 0600)`, so
//! its size is the one it was given (fixed for the segment's life), and it
//! is removed only by its drop. The kernel's `shmat` is asked for no
//! address, so it maps where nothing is and replaces nothing; its `shmdt`
//! unmaps System V attachments only (ipc/shm.c `ksys_shmdt` looks for
//! `shm_vm_ops` mappings), and in this program the only ones are a
//! `Segment`'s, which nobody borrows: addresses are handed out as numbers.
//! [`Segment::attach_detach`] writes through an attachment that it made a
//! moment before (read-write, the whole segment, rounded up to pages) and
//! that it alone knows of until it detaches it; the writes are atomic
//! stores, so another process writing the same bytes is no data race.
//! [`KernelMsgBuf`] hands the kernel's msgsnd and msgrcv a `struct msgbuf`
//! it owns, with room for as many text bytes as the size it passes.
#![allow(unsafe_code)]

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use ipcns::abi::{IPC_CREAT, IPC_RMID, IPC_STAT, shmid64_ds};
use ipcns::shm::ShmArg;
use ipcns::{Cred, Namespace, SysResult};
use ipcns_oracle::kernel::Host;
use ipcns_oracle::sysv::SysV;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `fstat(fd)`; returns `st_uid` (so the call cannot be optimised away).
#[inline(never)]
pub fn fstat_uid(fd: BorrowedFd<'_>) -> std::io::Result<u32> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid, writable `struct stat`; `fd` is open.
    let r = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstat returned 0, so it filled `st`.
    Ok(unsafe { st.assume_init() }.st_uid)
}

// `struct sembuf` on x86-64: unsigned short, short, short.
const _: () = {
    use core::mem::{offset_of, size_of};
    use ipcns::abi::sembuf;
    assert!(size_of::<sembuf>() == 6);
    assert!(offset_of!(sembuf, sem_op) == 2);
    assert!(offset_of!(sembuf, sem_flg) == 4);
};

/// `semtimedop(semid, sops, nsops, NULL)`: the host kernel's semop(2)
/// (ipc/sem.c `do_semtimedop`), as a raw system call. The errno on failure.
#[inline]
pub fn semtimedop(semid: i32, sops: &[ipcns::abi::sembuf]) -> Result<(), i32> {
    // SAFETY: `sops` is borrowed for the call and laid out as the kernel's
    // `struct sembuf` (asserted above); the kernel reads `sops.len()` of
    // them and writes nothing; the timeout is NULL.
    let r = unsafe {
        ipcns_sys::raw::syscall4(
            libc::SYS_semtimedop,
            semid as usize,
            sops.as_ptr() as usize,
            sops.len(),
            0,
        )
    };
    r.map(drop).map_err(|e| e.0)
}

/// `setns(fd, CLONE_NEWIPC)`: enters the IPC namespace that `fd` (an open
/// /proc/PID/ns/ipc) names. setns(2).
pub fn setns_ipc(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    ipcns_sys::sysv::setns(fd, libc::CLONE_NEWIPC).map_err(std::io::Error::from)?;
    Ok(())
}

/// Pads the code up to the next 64-byte boundary, so that the loop that
/// follows starts on one. On the Zen 4 these benchmarks were tuned on, a
/// small loop inside one 64-byte block ran at one iteration per cycle and at
/// one per two cycles across two, so without this a ratio between two rows
/// depended on where the linker happened to put each loop. Every row of a
/// table gets the same treatment.
#[inline(always)]
pub fn align_next_loop() {
    // SAFETY: emits only padding (multi-byte nops) in the instruction stream;
    // reads and writes no memory, no register, no flag.
    unsafe { core::arch::asm!(".p2align 6", options(nomem, nostack, preserves_flags)) };
}

/// Bytes in a [`Page`].
pub const PAGE: usize = 4096;

/// A page of anonymous memory, zeroed, mapped while the value lives.
struct Page {
    ptr: NonNull<u8>,
}

impl Page {
    /// `mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_SHARED
    /// or MAP_PRIVATE, -1, 0)`: shared pages stay shared with the children
    /// forked while they are mapped.
    fn new(shared: bool) -> std::io::Result<Page> {
        let kind = if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE
        };
        // SAFETY: a fresh mapping at an address the kernel chooses; it
        // overlaps nothing.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                kind | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast()).ok_or_else(|| std::io::Error::other("mmap gave NULL"))?;
        Ok(Page { ptr })
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmaps the page mapped in `new`; its owner no longer
        // lends it out (a borrow of it would be a borrow of `self`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), PAGE) };
    }
}

/// A page of zeroed `MAP_SHARED` memory seen as 512 `AtomicU64`: shared
/// between threads, and with the processes forked while it lives.
pub struct SharedPage {
    page: Page,
}

// SAFETY: the page is used only through atomics.
unsafe impl Send for SharedPage {}
// SAFETY: as above.
unsafe impl Sync for SharedPage {}

impl SharedPage {
    pub fn new() -> std::io::Result<SharedPage> {
        Ok(SharedPage {
            page: Page::new(true)?,
        })
    }

    /// The page's words.
    pub fn words(&self) -> &[AtomicU64; PAGE / 8] {
        // SAFETY: page-aligned, PAGE bytes, mapped while `self` lives;
        // zeroed at first, and every bit pattern is a valid AtomicU64.
        unsafe { &*self.page.ptr.as_ptr().cast::<[AtomicU64; PAGE / 8]>() }
    }
}

/// A glibc `pthread_mutex_t` at the start of a page of its own.
pub struct PthreadMutex {
    page: Page,
}

// SAFETY: a pthread mutex is made to be locked from any thread; the value
// only holds the address of its page.
unsafe impl Send for PthreadMutex {}
// SAFETY: as above: every operation through `&self` is a pthread call.
unsafe impl Sync for PthreadMutex {}

impl PthreadMutex {
    /// What the arena's locks used to be: `pthread_mutexattr_setpshared(
    /// PTHREAD_PROCESS_SHARED)` and `pthread_mutexattr_setrobust(
    /// PTHREAD_MUTEX_ROBUST)`, then `pthread_mutex_init` in an anonymous
    /// `MAP_SHARED` page (so forked children share it).
    pub fn robust_shared() -> std::io::Result<PthreadMutex> {
        PthreadMutex::init(Page::new(true)?, true)
    }

    /// A plain mutex: `pthread_mutex_init(m, NULL)` (default type,
    /// process-private, not robust), in a private page.
    pub fn plain() -> std::io::Result<PthreadMutex> {
        PthreadMutex::init(Page::new(false)?, false)
    }

    fn init(page: Page, robust: bool) -> std::io::Result<PthreadMutex> {
        let m = page.ptr.as_ptr().cast::<libc::pthread_mutex_t>();
        let check = |r: i32| match r {
            0 => Ok(()),
            e => Err(std::io::Error::from_raw_os_error(e)),
        };
        if !robust {
            // SAFETY: `m` is page-aligned, writable, not yet initialised.
            check(unsafe { libc::pthread_mutex_init(m, core::ptr::null()) })?;
            return Ok(PthreadMutex { page });
        }
        let mut attr = core::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: initialises the local attribute object.
        check(unsafe { libc::pthread_mutexattr_init(attr.as_mut_ptr()) })?;
        let a = attr.as_mut_ptr();
        // SAFETY: `a` was initialised just above and is destroyed below;
        // `m` is page-aligned, writable and not yet initialised.
        let r = unsafe {
            let mut r = libc::pthread_mutexattr_setpshared(a, libc::PTHREAD_PROCESS_SHARED);
            if r == 0 {
                r = libc::pthread_mutexattr_setrobust(a, libc::PTHREAD_MUTEX_ROBUST);
            }
            if r == 0 {
                r = libc::pthread_mutex_init(m, a);
            }
            libc::pthread_mutexattr_destroy(a);
            r
        };
        check(r)?;
        Ok(PthreadMutex { page })
    }

    fn raw(&self) -> *mut libc::pthread_mutex_t {
        self.page.ptr.as_ptr().cast()
    }

    /// `pthread_mutex_lock(m)`, `f()`, `pthread_mutex_unlock(m)`. A robust
    /// mutex whose holder died (`EOWNERDEAD`) is made consistent and held;
    /// any other error panics (nothing here can cause one: a recursive
    /// call on a plain mutex deadlocks, as C's would).
    #[inline]
    pub fn section<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: an initialised mutex, alive while `self` is borrowed.
        let r = unsafe { libc::pthread_mutex_lock(self.raw()) };
        if r != 0 {
            self.lock_failed(r);
        }
        let _held = Held(self);
        f()
    }

    #[cold]
    #[inline(never)]
    fn lock_failed(&self, r: i32) {
        assert_eq!(r, libc::EOWNERDEAD, "pthread_mutex_lock: errno {r}");
        // SAFETY: the caller holds the mutex (EOWNERDEAD means it does).
        let r = unsafe { libc::pthread_mutex_consistent(self.raw()) };
        assert_eq!(r, 0, "pthread_mutex_consistent: errno {r}");
    }
}

/// The lock `section` took; unlocks it on drop (unwinding included).
struct Held<'a>(&'a PthreadMutex);

impl Drop for Held<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this thread locked the mutex in `section` and still holds it.
        unsafe { libc::pthread_mutex_unlock(self.0.raw()) };
    }
}

impl Drop for PthreadMutex {
    fn drop(&mut self) {
        // SAFETY: initialised; unlocked (every `section` has returned: none
        // borrows `self` now), so destroying it is allowed. The page
        // itself is unmapped by `Page`'s drop, after this.
        unsafe { libc::pthread_mutex_destroy(self.raw()) };
    }
}

/// A child forked by [`fork`]; waited for on drop if not before.
pub struct Child {
    pid: libc::pid_t,
    waited: bool,
}

impl Child {
    /// `waitpid(pid, &status, 0)`: whether the child exited with status 0.
    pub fn wait(mut self) -> std::io::Result<bool> {
        self.waited = true;
        wait_for(self.pid)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.waited {
            let _ = wait_for(self.pid);
        }
    }
}

fn wait_for(pid: libc::pid_t) -> std::io::Result<bool> {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The threads of this process, from /proc/self/task.
fn threads() -> std::io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// `fork()`; the child runs `child` and `_exit`s: 0 if it returned true,
/// 1 if false or if it panicked. Refused (`Ok(None)`) unless this process
/// has one thread: after `fork` in a process with others, the child may
/// only make async-signal-safe calls. A thread just joined may be listed
/// for a moment after the join, so the count is asked a few times.
pub fn fork(child: impl FnOnce() -> bool) -> std::io::Result<Option<Child>> {
    let mut n = threads()?;
    for _ in 0..50 {
        if n == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        n = threads()?;
    }
    if n != 1 {
        return Ok(None);
    }
    // SAFETY: this process has one thread (it cannot have gained one since
    // the count: only this thread could have made it), so the child is a
    // complete copy and may run any code; it never returns from here.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
            // SAFETY: ends the child at once, without running the parent's
            // exit handlers or flushing its copies of the parent's buffers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        pid => Ok(Some(Child { pid, waited: false })),
    }
}

/// The cpus the calling thread may run on: `sched_getaffinity(0, ...)`.
pub fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: writes at most `size_of(set)` bytes into the local `set`.
    let r = unsafe { libc::sched_getaffinity(0, core::mem::size_of_val(&set), &mut set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = 8 * core::mem::size_of_val(&set);
    Ok((0..max)
        // SAFETY: CPU_ISSET reads one bit of the local set; every index is
        // below its size.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Binds the calling thread to `cpus`: `sched_setaffinity(0, ...)`.
pub fn set_cpus(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET writes one bit of the local set (an index beyond
        // it panics: the bits are a bounds-checked array).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: reads `size_of(set)` bytes from the local `set`.
    let r = unsafe { libc::sched_setaffinity(0, core::mem::size_of_val(&set), &set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whose System V shared memory a [`Segment`] is: an ipcns namespace's,
/// used with a caller's credentials, or the host kernel's (system calls).
#[derive(Clone, Copy)]
pub enum Shm<'a> {
    Ipcns(&'a Namespace, &'a Cred),
    Kernel,
}

/// A segment made by `shmget(IPC_PRIVATE, size, IPC_CREAT | 0600)`,
/// removed (`shmctl(id, IPC_RMID, NULL)`) on drop.
pub struct Segment<'a> {
    via: Shm<'a>,
    id: i32,
    size: usize,
}

impl<'a> Segment<'a> {
    pub fn new(via: Shm<'a>, size: usize) -> SysResult<Segment<'a>> {
        let flg = IPC_CREAT | 0o600;
        let id = match via {
            Shm::Ipcns(ns, cred) => ns.shmget(cred, 0, size as u64, flg)?,
            Shm::Kernel => Host.shmget(0, size as u64, flg)?,
        };
        Ok(Segment { via, id, size })
    }

    /// `shmat(id, NULL, 0)`: the attachment's address, as a number.
    /// shmop(2); ipc/shm.c `do_shmat`.
    #[inline]
    pub fn attach(&self) -> SysResult<usize> {
        match self.via {
            Shm::Ipcns(ns, cred) => ns.shmat(cred, self.id, 0, 0),
            Shm::Kernel => {
                // SAFETY: no address asked for: the kernel maps the segment
                // where nothing is mapped (see the module doc).
                unsafe { ipcns_sys::sysv::shmat(self.id, 0, 0) }
            }
        }
    }

    /// `shmdt(addr)`. shmop(2); ipc/shm.c `ksys_shmdt`.
    #[inline]
    pub fn detach(&self, addr: usize) -> SysResult<()> {
        match self.via {
            Shm::Ipcns(ns, cred) => ns.shmdt(cred, addr).map(drop),
            Shm::Kernel => {
                // SAFETY: unmaps a System V attachment at `addr`, if any;
                // nothing borrows one (see the module doc).
                unsafe { ipcns_sys::sysv::shmdt(addr) }.map(drop)
            }
        }
    }

    /// `shmat(id, NULL, 0)`; when `touch`, one byte written at the start of
    /// every page of the attachment (a page fault each, the first time);
    /// then `shmdt(addr)`.
    #[inline]
    pub fn attach_detach(&self, touch: bool) -> SysResult<()> {
        let addr = self.attach()?;
        if touch {
            for off in (0..self.size).step_by(PAGE) {
                // SAFETY: `addr` is a read-write attachment of this
                // segment, `size` bytes rounded up to pages, that only
                // this call knows of until its shmdt below (module doc);
                // `off` is inside it, and a byte is aligned for AtomicU8.
                let b = unsafe { &*((addr + off) as *const AtomicU8) };
                b.store(1, Ordering::Relaxed);
            }
        }
        self.detach(addr)
    }

    /// `shm_nattch` as `shmctl(id, IPC_STAT, &ds)` reports it.
    pub fn nattch(&self) -> SysResult<u64> {
        let mut ds = shmid64_ds::default();
        match self.via {
            Shm::Ipcns(ns, cred) => ns.shmctl(cred, self.id, IPC_STAT, ShmArg::Ds(&mut ds))?,
            Shm::Kernel => Host.shmctl(self.id, IPC_STAT, ShmArg::Ds(&mut ds))?,
        };
        Ok(ds.shm_nattch)
    }
}

impl Drop for Segment<'_> {
    fn drop(&mut self) {
        let _ = match self.via {
            Shm::Ipcns(ns, cred) => ns.shmctl(cred, self.id, IPC_RMID, ShmArg::None),
            Shm::Kernel => Host.shmctl(self.id, IPC_RMID, ShmArg::None),
        };
    }
}

/// A `struct msgbuf` (`long mtype` then the text) for the kernel's own
/// msgsnd and msgrcv, made once, so that a measured call costs only the
/// system call.
pub struct KernelMsgBuf {
    words: Vec<i64>,
}

impl KernelMsgBuf {
    /// Room for `cap` bytes of text.
    pub fn new(cap: usize) -> KernelMsgBuf {
        KernelMsgBuf {
            words: vec![0x5a5a_5a5a_5a5a_5a5a; 1 + cap.div_ceil(8)],
        }
    }

    fn cap(&self) -> usize {
        (self.words.len() - 1) * 8
    }

    /// `msgsnd(id, &buf, len, flg)` with `mtype`; `len` at most the room.
    pub fn send(&mut self, id: i32, mtype: i64, len: usize, flg: i32) -> std::io::Result<()> {
        let len = len.min(self.cap());
        self.words[0] = mtype;
        // SAFETY: the buffer holds an mtype and at least `len` text bytes,
        // all the kernel reads; it lives across the call.
        let r = unsafe {
            ipcns_sys::raw::syscall4(
                libc::SYS_msgsnd,
                id as usize,
                self.words.as_ptr() as usize,
                len,
                flg as usize,
            )
        };
        r.map(drop).map_err(std::io::Error::from)
    }

    /// `msgrcv(id, &buf, cap, msgtyp, flg)`: the bytes received.
    pub fn receive(
        &mut self,
        id: i32,
        cap: usize,
        msgtyp: i64,
        flg: i32,
    ) -> std::io::Result<usize> {
        let cap = cap.min(self.cap());
        // SAFETY: the buffer holds an mtype and at least `cap` text bytes,
        // all the kernel writes; it lives across the call.
        unsafe {
            ipcns_sys::raw::syscall5(
                libc::SYS_msgrcv,
                id as usize,
                self.words.as_mut_ptr() as usize,
                cap,
                msgtyp as usize,
                flg as usize,
            )
        }
        .map_err(std::io::Error::from)
    }
}
