//! What `ipcns ns info` and `ns list` show of a namespace: where it is, its
//! layout, and who holds its locks.

use crate::arena::layout::Mech;
use crate::lock::{Holder, holder_of};
use crate::namespace::Namespace;
use core::sync::atomic::Ordering::Relaxed;
use std::path::Path;

/// Locks listed by [`Namespace::lock_holders`] at most.
pub const MAX_HOLDERS: usize = 100;

impl Namespace {
    /// The arena file.
    pub fn path(&self) -> &Path {
        self.arena().path()
    }

    /// A descriptor (close-on-exec) on the arena file, opened read-write
    /// again by its path and checked to be the very file this process
    /// mapped (ESTALE if the path now names another). `ipcns run` hands it
    /// down to the programs it runs (`IPCNS_FD`), so that one that cannot
    /// reach the path (another uid, a cleared environment) still finds
    /// this very namespace. Writing through it is what any participant can
    /// do to the mapping anyway.
    #[doc(hidden)]
    pub fn file_dup(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.arena()
            .reopen()
            .map(Into::into)
            .map_err(|e| std::io::Error::from_raw_os_error(e.0))
    }

    /// A descriptor (close-on-exec) on the namespace's segment pool
    /// (`shm/pool.rs`), open read-write, the pool made if it is missing.
    /// `ipcns run` hands it down with the arena's (`IPCNS_POOL_FD`), so
    /// that a descendant that changed uid, which may not open the pool by
    /// its path in a namespace not created shared, still makes, attaches
    /// and removes segments as their permissions allow: the segments are
    /// reachable through the descriptors, as the kernel's are through the
    /// IPC namespace.
    #[doc(hidden)]
    pub fn pool_dup(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        crate::arena::open_pool(self.path(), self.arena().id(), true)
            .map(|(f, _)| f.into())
            .map_err(|e| std::io::Error::from_raw_os_error(e.0))
    }

    /// Takes `fd` (a descriptor [`Namespace::pool_dup`] made, inherited)
    /// as this process's descriptor on the segment pool, if it looks like
    /// this namespace's pool: a regular file of the pool's size, on the
    /// arena's file system, owned by the arena's owner. Whether it was
    /// taken (else it is closed). One the process opened itself already
    /// stays.
    #[doc(hidden)]
    pub fn adopt_pool(&self, fd: std::os::fd::OwnedFd) -> bool {
        use std::os::fd::IntoRawFd;
        #[allow(unsafe_code)]
        // SAFETY: the descriptor is ours alone (owned): it moves into `f`.
        let f = unsafe { crate::sys::Fd::from_raw(fd.into_raw_fd()) };
        let am = self.arena().id();
        let Ok(m) = f.stat() else {
            return false;
        };
        if !m.is_file() || m.size != crate::arena::POOL_SIZE || m.dev != am.dev || m.uid != am.uid {
            return false;
        }
        let writable = f.access_mode() == Ok(libc::O_RDWR);
        crate::shm::pool::adopt(&self.session, f, m.ino, writable)
    }

    /// Whether the namespace was created shared (its creation mode gave
    /// group or other permission): other users may then attach to it when
    /// they ask for [`crate::Access::Shared`]. Fixed at creation.
    pub fn shared(&self) -> bool {
        self.arena().header().flags.load(Relaxed) & crate::arena::header::FLAG_SHARED != 0
    }

    /// Whether ids use the `ipcmni_extend` layout.
    pub fn extend(&self) -> bool {
        self.arena().layout().extend
    }

    /// Indices per mechanism (`IPCMNI`: 32768, or 16,777,216 extended).
    pub fn ipc_mni(&self) -> u32 {
        self.arena().layout().ipc_mni
    }

    /// Bits of the index in an id (15, or 24 extended).
    pub fn index_bits(&self) -> u32 {
        self.arena().layout().shift
    }

    /// Whether the arena was created in an earlier boot of this machine
    /// (its locks' holders are then all gone).
    pub fn from_earlier_boot(&self) -> bool {
        self.arena().header().boot.load(Relaxed) != crate::lock::boot_id()
    }

    /// The locks that are held (or await a repair), by name: `sem
    /// registry`, `msg registry`, `shm registry`, `heap`, `processes`, and
    /// each object's (`sem 3` for the set at index 3), with the holder's
    /// thread id, its state and whether it lives. Read without taking any
    /// lock; at most 100 (`MAX_HOLDERS`) listed.
    pub fn lock_holders(&self) -> Vec<(String, Holder)> {
        let a = self.arena();
        let h = a.header();
        let mut out = Vec::new();
        for m in Mech::ALL {
            if let Some(x) = holder_of(&h.registries[m as usize].lock) {
                out.push((format!("{} registry", m.name()), x));
            }
        }
        if let Some(x) = holder_of(&h.heap.lock) {
            out.push(("heap".to_string(), x));
        }
        if let Some(x) = holder_of(&h.procs.lock) {
            out.push(("processes".to_string(), x));
        }
        for m in Mech::ALL {
            for idx in crate::ids::Bitmap::of(a, m).iter() {
                if out.len() >= MAX_HOLDERS {
                    return out;
                }
                let Ok(head) = a.view::<crate::object::Head>(a.layout().slot_off(m, idx)) else {
                    continue;
                };
                if let Some(x) = holder_of(&head.lock) {
                    out.push((format!("{} {idx}", m.name()), x));
                }
            }
        }
        out
    }
}

impl Namespace {
    /// Runs `f` holding mechanism `m`'s registry lock (tests: a holder that
    /// stops or dies with the lock held).
    #[cfg(feature = "testing")]
    pub fn hold_registry<R>(
        &self,
        m: Mech,
        f: impl FnOnce() -> R,
    ) -> Result<R, crate::errno::Errno> {
        let _g = self.arena().header().registries[m as usize].lock.lock()?;
        Ok(f())
    }
}

impl Namespace {
    /// What the kernel's exit path does for the calling process's
    /// semaphores: its SEM_UNDO adjustments applied (clamped to
    /// 0..=SEMVMX, sleepers woken, sets removed meanwhile skipped). Runs
    /// when the `Namespace` is dropped; a process that keeps one
    /// `Namespace` per arena (as it should) needs nothing else. Its shm
    /// attachments stay counted as long as they are mapped: until `shmdt`,
    /// or until the process is gone and someone reaps it.
    #[doc(hidden)]
    pub fn exit_process(&self) -> crate::errno::SysResult<()> {
        crate::process::exit(self.arena())
    }

    /// Cleans up after every participating process that is gone without
    /// exiting through ipcns (SIGKILL, `_exit`): applies its undo entries
    /// and frees its record. Returns how many. Sleepers and newcomers do it
    /// too; `ipcns ns check` first.
    pub fn reap_exited(&self) -> crate::errno::SysResult<u32> {
        crate::process::reap(self.arena())
    }

    /// Cleans up after process `pid` if it is gone (what a parent that has
    /// just waited for its child does, as the kernel had done it before
    /// the wait returned). Whether it had a record.
    #[doc(hidden)]
    pub fn reap_pid(&self, pid: i32) -> crate::errno::SysResult<bool> {
        crate::process::reap_pid(self.arena(), pid)
    }
}

impl Namespace {
    /// What a program image does when it attaches to a namespace: if an
    /// exec replaced the image that made this process's record, the
    /// attachments lost with the old address space are dropped (the undo
    /// entries are kept, as execve keeps them).
    #[doc(hidden)]
    pub fn after_exec(&self) -> crate::errno::SysResult<()> {
        crate::process::after_exec(self.arena())
    }

    /// `semopm` now: the most operations one semop may carry (E2BIG
    /// above), read before the caller's operations are copied in.
    #[doc(hidden)]
    pub fn semopm(&self) -> i32 {
        self.arena().header().limits.semopm.load(Relaxed)
    }

    /// `msgmax` now: the largest message msgsnd accepts (EINVAL above),
    /// read before the caller's text is copied in.
    #[doc(hidden)]
    #[inline]
    pub fn msgmax(&self) -> i32 {
        self.arena().header().limits.msgmax.load(Relaxed)
    }
}
