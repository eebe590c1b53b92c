//! Locks that survive the death of their holder: process-shared robust
//! pthread mutexes living in the arena.
//!
//! When a thread dies holding one (SIGKILL at any instruction included),
//! the kernel marks the lock word through the thread's robust list, and the
//! next `lock` returns `EOWNERDEAD`: that caller owns the lock and must
//! repair the state it protects before releasing it. [`Guard::recovered`]
//! says so. The lock is marked consistent at once; should the repairer die
//! too, the one after it is told again.
//!
//! # Safety
//! The mutex word is only touched through the pthread functions, on memory
//! that stays mapped for the lifetime of the reference (`&RobustMutex`
//! borrows the mapping). `init` runs before the lock is reachable by any
//! other process (under the lock that guards its publication).
#![allow(unsafe_code)]

use crate::arena::map::Shared;
use crate::errno::Errno;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, Ordering};

/// # Layout
/// 48 bytes: glibc's 40-byte `pthread_mutex_t` then an init marker.
#[repr(C, align(8))]
pub struct RobustMutex {
    m: UnsafeCell<libc::pthread_mutex_t>,
    /// `INIT_MAGIC` once `init` has run. Protected by whatever publishes
    /// the lock (the registry lock for object locks).
    init: AtomicU32,
    _pad: u32,
}

const INIT_MAGIC: u32 = 0x6c6f_636b;

const _: () = {
    assert!(core::mem::size_of::<libc::pthread_mutex_t>() == 40);
    assert!(core::mem::size_of::<RobustMutex>() == 48);
};

// SAFETY: a byte array (the pthread mutex) behind UnsafeCell and atomics;
// pthread functions synchronise access to the former.
unsafe impl Sync for RobustMutex {}
// SAFETY: repr(C), plain data behind UnsafeCell and atomics, no Drop.
unsafe impl Shared for RobustMutex {}

impl RobustMutex {
    /// Whether `init` has run on this lock.
    pub fn is_initialized(&self) -> bool {
        self.init.load(Ordering::Acquire) == INIT_MAGIC
    }

    /// Makes this a process-shared, robust mutex. Must not race with any
    /// other use of the lock.
    pub fn init(&self) -> Result<(), Errno> {
        let mut attr = core::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: attr is initialised by pthread_mutexattr_init before use
        // and destroyed after; `self.m` is valid memory for a mutex and not
        // in use (contract above).
        unsafe {
            check(libc::pthread_mutexattr_init(attr.as_mut_ptr()))?;
            let a = attr.as_mut_ptr();
            let r = (|| {
                check(libc::pthread_mutexattr_setpshared(
                    a,
                    libc::PTHREAD_PROCESS_SHARED,
                ))?;
                check(libc::pthread_mutexattr_setrobust(
                    a,
                    libc::PTHREAD_MUTEX_ROBUST,
                ))?;
                check(libc::pthread_mutex_init(self.m.get(), a))
            })();
            libc::pthread_mutexattr_destroy(a);
            r?;
        }
        // Release: pairs with the Acquire in `is_initialized`.
        self.init.store(INIT_MAGIC, Ordering::Release);
        Ok(())
    }

    /// Locks, waiting as long as it takes. `Guard::recovered` is true when
    /// the previous holder died with the lock held.
    pub fn lock(&self) -> Result<Guard<'_>, Errno> {
        // SAFETY: an initialised process-shared mutex (callers check
        // `is_initialized` where it may not be).
        let r = unsafe { libc::pthread_mutex_lock(self.m.get()) };
        let recovered = match r {
            0 => false,
            libc::EOWNERDEAD => {
                RECOVERIES.fetch_add(1, Ordering::Relaxed);
                // SAFETY: we own the lock (EOWNERDEAD hands it over).
                check(unsafe { libc::pthread_mutex_consistent(self.m.get()) })?;
                true
            }
            e => return Err(Errno(e)),
        };
        Ok(Guard {
            lock: self,
            recovered,
        })
    }
}

/// Locks this process took over from dead holders (statistics).
pub static RECOVERIES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

fn check(r: libc::c_int) -> Result<(), Errno> {
    if r == 0 { Ok(()) } else { Err(Errno(r)) }
}

/// A held [`RobustMutex`]; unlocks on drop.
pub struct Guard<'a> {
    lock: &'a RobustMutex,
    recovered: bool,
}

impl Guard<'_> {
    /// The previous holder died holding the lock: repair what it protects.
    pub fn recovered(&self) -> bool {
        self.recovered
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // SAFETY: we hold the lock (a Guard exists only after a successful lock).
        unsafe { libc::pthread_mutex_unlock(self.lock.m.get()) };
    }
}
