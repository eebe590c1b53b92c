//! System V IPC as a C program calls it, for `bench preload` and `bench
//! supervisor`: through the symbols of `libipcns.so` (opened with
//! `dlopen`, called through function pointers, as a program linked
//! against them would call them), through the C library's wrappers (the
//! kernel; `libipcns.so`'s own in a process it is preloaded in), or
//! through the system call instruction itself ([`Raw`]), which no library
//! sees (not even through the C library's `syscall`, which `libipcns.so`
//! interposes too): under `ipcns run` the supervisor serves it.
//!
//! # Safety
//! `dlopen` is given a NUL-terminated path; the library it loads is
//! ipcns's own, whose constructor only looks up symbols and registers a
//! fork handler. Each function pointer is the address `dlsym` returned for
//! that name, transmuted to the C prototype of that function (the same as
//! the C library's, which the `libc` calls below use); the library is
//! never closed, so the pointers stay valid for the process's life. Every
//! call passes pointers to live buffers of ours with the lengths it
//! states: a `sembuf` slice and its length, a [`MsgBuf`] and at most its
//! text's size. [`CShm::attach_detach`] asks `shmat` for no address, so the
//! segment is mapped where nothing is and replaces nothing, and detaches
//! at once the address it was given, which nothing else has seen. The
//! environment is set before the library reads it, while
//! this program has one thread (`bench preload` starts none), so no other
//! thread reads the environment meanwhile.
#![allow(unsafe_code)]

use core::ffi::{c_int, c_long, c_void};
use ipcns::abi::sembuf;
use std::ffi::CString;
use std::path::Path;

/// A `struct msgbuf` with room for 64 bytes of text.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MsgBuf {
    pub mtype: c_long,
    pub text: [u8; 64],
}

impl MsgBuf {
    pub fn new(mtype: c_long) -> MsgBuf {
        MsgBuf {
            mtype,
            text: [0x5a; 64],
        }
    }
}

/// The System V calls a bench needs, as C declares them; errors are errno
/// values.
pub trait CApi {
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> Result<i32, i32>;
    fn semop(&self, id: i32, sops: &[sembuf]) -> Result<(), i32>;
    fn semctl_rmid(&self, id: i32);
    fn msgget(&self, key: i32, flg: i32) -> Result<i32, i32>;
    fn msgsnd(&self, id: i32, buf: &MsgBuf, len: usize, flg: i32) -> Result<(), i32>;
    fn msgrcv(
        &self,
        id: i32,
        buf: &mut MsgBuf,
        len: usize,
        typ: i64,
        flg: i32,
    ) -> Result<usize, i32>;
    fn msgctl_rmid(&self, id: i32);
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn check(r: c_long) -> Result<c_long, i32> {
    if r == -1 { Err(errno()) } else { Ok(r) }
}

type Semget = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
type Semop = unsafe extern "C" fn(c_int, *mut sembuf, usize) -> c_int;
type Semctl = unsafe extern "C" fn(c_int, c_int, c_int, ...) -> c_int;
type Msgget = unsafe extern "C" fn(c_int, c_int) -> c_int;
type Msgsnd = unsafe extern "C" fn(c_int, *const c_void, usize, c_int) -> c_int;
type Msgrcv = unsafe extern "C" fn(c_int, *mut c_void, usize, c_long, c_int) -> isize;
type Msgctl = unsafe extern "C" fn(c_int, c_int, *mut c_void) -> c_int;

/// `libipcns.so`, loaded once and never closed.
pub struct Lib {
    semget: Semget,
    semop: Semop,
    semctl: Semctl,
    msgget: Msgget,
    msgsnd: Msgsnd,
    msgrcv: Msgrcv,
    msgctl: Msgctl,
}

impl Lib {
    /// Sets `IPCNS_DIR=dir` and `IPCNS=name` (the namespace the library
    /// will choose at its first call), then `dlopen(path, RTLD_NOW |
    /// RTLD_LOCAL)` and the symbols.
    pub fn open(path: &Path, dir: &Path, name: &str) -> anyhow::Result<Lib> {
        // SAFETY: one thread in this process (module doc).
        unsafe {
            std::env::set_var("IPCNS_DIR", dir);
            std::env::set_var("IPCNS", name);
        }
        let c = CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a NUL-terminated path (module doc).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror returns a NUL-terminated message or NULL.
            let why = unsafe {
                let e = libc::dlerror();
                if e.is_null() {
                    "unknown error".to_string()
                } else {
                    std::ffi::CStr::from_ptr(e).to_string_lossy().into_owned()
                }
            };
            anyhow::bail!("dlopen {}: {why}", path.display());
        }
        let sym = |name: &std::ffi::CStr| -> anyhow::Result<usize> {
            // SAFETY: a handle from dlopen and a NUL-terminated name.
            let p = unsafe { libc::dlsym(h, name.as_ptr()) };
            anyhow::ensure!(!p.is_null(), "{}: no symbol {name:?}", path.display());
            Ok(p as usize)
        };
        // SAFETY: each address is the named function's (module doc).
        unsafe {
            Ok(Lib {
                semget: core::mem::transmute::<usize, Semget>(sym(c"semget")?),
                semop: core::mem::transmute::<usize, Semop>(sym(c"semop")?),
                semctl: core::mem::transmute::<usize, Semctl>(sym(c"semctl")?),
                msgget: core::mem::transmute::<usize, Msgget>(sym(c"msgget")?),
                msgsnd: core::mem::transmute::<usize, Msgsnd>(sym(c"msgsnd")?),
                msgrcv: core::mem::transmute::<usize, Msgrcv>(sym(c"msgrcv")?),
                msgctl: core::mem::transmute::<usize, Msgctl>(sym(c"msgctl")?),
            })
        }
    }
}

impl CApi for Lib {
    #[inline]
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> Result<i32, i32> {
        // SAFETY: integers only.
        check(c_long::from(unsafe { (self.semget)(key, nsems, flg) })).map(|v| v as i32)
    }
    #[inline]
    fn semop(&self, id: i32, sops: &[sembuf]) -> Result<(), i32> {
        // SAFETY: a live slice and its length; the callee only reads it.
        let r = unsafe { (self.semop)(id, sops.as_ptr().cast_mut(), sops.len()) };
        check(c_long::from(r)).map(drop)
    }
    fn semctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID takes no fourth argument.
        unsafe { (self.semctl)(id, 0, libc::IPC_RMID) };
    }
    fn msgget(&self, key: i32, flg: i32) -> Result<i32, i32> {
        // SAFETY: integers only.
        check(c_long::from(unsafe { (self.msgget)(key, flg) })).map(|v| v as i32)
    }
    #[inline]
    fn msgsnd(&self, id: i32, buf: &MsgBuf, len: usize, flg: i32) -> Result<(), i32> {
        let len = len.min(buf.text.len());
        // SAFETY: a live msgbuf with at least `len` text bytes.
        let r = unsafe { (self.msgsnd)(id, (buf as *const MsgBuf).cast(), len, flg) };
        check(c_long::from(r)).map(drop)
    }
    #[inline]
    fn msgrcv(
        &self,
        id: i32,
        buf: &mut MsgBuf,
        len: usize,
        typ: i64,
        flg: i32,
    ) -> Result<usize, i32> {
        let len = len.min(buf.text.len());
        // SAFETY: a live msgbuf with room for `len` text bytes.
        let r = unsafe { (self.msgrcv)(id, (buf as *mut MsgBuf).cast(), len, typ, flg) };
        check(r as c_long).map(|n| n as usize)
    }
    fn msgctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID reads no buffer.
        unsafe { (self.msgctl)(id, libc::IPC_RMID, core::ptr::null_mut()) };
    }
}

/// The C library's wrappers: the kernel's System V IPC.
pub struct Libc;

impl CApi for Libc {
    #[inline]
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> Result<i32, i32> {
        // SAFETY: integers only.
        check(c_long::from(unsafe { libc::semget(key, nsems, flg) })).map(|v| v as i32)
    }
    #[inline]
    fn semop(&self, id: i32, sops: &[sembuf]) -> Result<(), i32> {
        // SAFETY: a live slice and its length; the kernel only reads it
        // (`ipcns::abi::sembuf` is laid out as `struct sembuf`).
        let r = unsafe { libc::semop(id, sops.as_ptr().cast_mut().cast(), sops.len()) };
        check(c_long::from(r)).map(drop)
    }
    fn semctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID takes no fourth argument.
        unsafe { libc::semctl(id, 0, libc::IPC_RMID) };
    }
    fn msgget(&self, key: i32, flg: i32) -> Result<i32, i32> {
        // SAFETY: integers only.
        check(c_long::from(unsafe { libc::msgget(key, flg) })).map(|v| v as i32)
    }
    #[inline]
    fn msgsnd(&self, id: i32, buf: &MsgBuf, len: usize, flg: i32) -> Result<(), i32> {
        let len = len.min(buf.text.len());
        // SAFETY: a live msgbuf with at least `len` text bytes.
        let r = unsafe { libc::msgsnd(id, (buf as *const MsgBuf).cast(), len, flg) };
        check(c_long::from(r)).map(drop)
    }
    #[inline]
    fn msgrcv(
        &self,
        id: i32,
        buf: &mut MsgBuf,
        len: usize,
        typ: i64,
        flg: i32,
    ) -> Result<usize, i32> {
        let len = len.min(buf.text.len());
        // SAFETY: a live msgbuf with room for `len` text bytes.
        let r = unsafe { libc::msgrcv(id, (buf as *mut MsgBuf).cast(), len, typ, flg) };
        check(r as c_long).map(|n| n as usize)
    }
    fn msgctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID reads no buffer.
        unsafe { libc::msgctl(id, libc::IPC_RMID, core::ptr::null_mut()) };
    }
}

/// `unshare(CLONE_NEWUSER | CLONE_NEWIPC)`: a fresh IPC namespace for a
/// caller without CAP_SYS_ADMIN, inside a user namespace of its own.
pub fn unshare_user_ipc() -> std::io::Result<()> {
    // SAFETY: a flag-only system call.
    let r = unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWIPC) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The system call instruction itself (`ipcns_sys::raw`): the kernel's
/// System V IPC, or, in a process under `ipcns run`'s supervisor, the
/// supervisor's (its seccomp filter sends these calls there).
pub struct Raw;

impl CApi for Raw {
    fn semget(&self, key: i32, nsems: i32, flg: i32) -> Result<i32, i32> {
        ipcns_sys::sysv::semget(key, nsems, flg).map_err(|e| e.0)
    }
    /// `semop(semid, sops, nsops)` as system call 65 (`SYS_semop`), not
    /// the C library's (which makes `semtimedop`). semop(2); ipc/sem.c
    /// `ksys_semtimedop`.
    #[inline]
    fn semop(&self, id: i32, sops: &[sembuf]) -> Result<(), i32> {
        // SAFETY: a live slice and its length, laid out as the kernel's
        // `struct sembuf` (crates/bench/src/sys.rs pins it); the kernel
        // only reads it.
        let r = unsafe {
            ipcns_sys::raw::syscall3(
                libc::SYS_semop,
                id as usize,
                sops.as_ptr() as usize,
                sops.len(),
            )
        };
        r.map(drop).map_err(|e| e.0)
    }
    fn semctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID reads and writes no user memory: `arg` is 0.
        let _ = unsafe { ipcns_sys::sysv::semctl(id, 0, libc::IPC_RMID, 0) };
    }
    fn msgget(&self, key: i32, flg: i32) -> Result<i32, i32> {
        ipcns_sys::sysv::msgget(key, flg).map_err(|e| e.0)
    }
    #[inline]
    fn msgsnd(&self, id: i32, buf: &MsgBuf, len: usize, flg: i32) -> Result<(), i32> {
        let len = len.min(buf.text.len());
        // SAFETY: a live msgbuf with at least `len` text bytes, all the
        // kernel reads.
        let r = unsafe {
            ipcns_sys::raw::syscall4(
                libc::SYS_msgsnd,
                id as usize,
                (buf as *const MsgBuf) as usize,
                len,
                flg as usize,
            )
        };
        r.map(drop).map_err(|e| e.0)
    }
    #[inline]
    fn msgrcv(
        &self,
        id: i32,
        buf: &mut MsgBuf,
        len: usize,
        typ: i64,
        flg: i32,
    ) -> Result<usize, i32> {
        let len = len.min(buf.text.len());
        // SAFETY: a live msgbuf with room for `len` text bytes, all the
        // kernel writes.
        unsafe {
            ipcns_sys::raw::syscall5(
                libc::SYS_msgrcv,
                id as usize,
                (buf as *mut MsgBuf) as usize,
                len,
                typ as usize,
                flg as usize,
            )
        }
        .map_err(|e| e.0)
    }
    fn msgctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID reads and writes no user memory: `buf` is 0.
        let _ = unsafe { ipcns_sys::sysv::msgctl(id, libc::IPC_RMID, 0) };
    }
}

/// System V shared memory as a C program calls it: a segment made,
/// attached and detached at once, removed. Errors are errno values.
pub trait CShm {
    /// `shmget(IPC_PRIVATE, size, IPC_CREAT | 0600)`.
    fn shmget_private(&self, size: usize) -> Result<i32, i32>;
    /// `shmat(id, NULL, 0)`, then `shmdt` of the address it gave, which
    /// nothing else sees. shmop(2).
    fn attach_detach(&self, id: i32) -> Result<(), i32>;
    /// `shmctl(id, IPC_RMID, NULL)`.
    fn shmctl_rmid(&self, id: i32);
}

impl CShm for Libc {
    fn shmget_private(&self, size: usize) -> Result<i32, i32> {
        // SAFETY: integers only.
        let r = unsafe { libc::shmget(libc::IPC_PRIVATE, size, libc::IPC_CREAT | 0o600) };
        check(c_long::from(r)).map(|v| v as i32)
    }
    #[inline]
    fn attach_detach(&self, id: i32) -> Result<(), i32> {
        // SAFETY: no address asked for (module doc).
        let p = unsafe { libc::shmat(id, core::ptr::null(), 0) };
        if p as isize == -1 {
            return Err(errno());
        }
        // SAFETY: the attachment made just above, seen by nothing else.
        let r = unsafe { libc::shmdt(p) };
        check(c_long::from(r)).map(drop)
    }
    fn shmctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID reads no buffer.
        unsafe { libc::shmctl(id, libc::IPC_RMID, core::ptr::null_mut()) };
    }
}

impl CShm for Raw {
    fn shmget_private(&self, size: usize) -> Result<i32, i32> {
        ipcns_sys::sysv::shmget(libc::IPC_PRIVATE, size, libc::IPC_CREAT | 0o600).map_err(|e| e.0)
    }
    #[inline]
    fn attach_detach(&self, id: i32) -> Result<(), i32> {
        // SAFETY: no address asked for (module doc).
        let addr = unsafe { ipcns_sys::sysv::shmat(id, 0, 0) }.map_err(|e| e.0)?;
        // SAFETY: the attachment made just above, seen by nothing else.
        unsafe { ipcns_sys::sysv::shmdt(addr) }
            .map(drop)
            .map_err(|e| e.0)
    }
    fn shmctl_rmid(&self, id: i32) {
        // SAFETY: IPC_RMID reads and writes no user memory: `buf` is 0.
        let _ = unsafe { ipcns_sys::sysv::shmctl(id, libc::IPC_RMID, 0) };
    }
}
