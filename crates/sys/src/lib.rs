//! # ipcns-sys: ipcns's system calls, through the instruction itself
//!
//! The one place in ipcns where a system call is made: the core's own
//! file, process and credential work, its futexes and clocks, the C ABI's
//! pass-through `syscall`, and the host kernel's System V IPC for the
//! oracle all come here.
//!
//! ipcns runs inside programs that carry other preloads. fakeroot, for
//! one, interposes `open`, `stat`, `mkdir`, `chown`, `getuid`... and talks
//! to its daemon over SysV message queues, that is through ipcns: had the
//! core opened its arena with libc's `open`, fakeroot would have called
//! back into our `msgsnd` while we initialise (recursion, or a deadlock),
//! and its faked uid 0 would have been taken for the real one, which the
//! kernel checks. So every such call here is the `syscall` instruction
//! itself (`svc 0` on aarch64), not a libc symbol, nor libc's `syscall`
//! (which our own C ABI exports). The exceptions: `clock_gettime` (the
//! vDSO, see [`time`]), and, on architectures other than x86_64 and
//! aarch64, `libc::syscall` and `libc::mmap` (documented in [`raw`] and
//! [`mem`]).
//!
//! Errors are the kernel's errno numbers ([`Errno`]); no wrapper sets the
//! thread's `errno`.
//!
//! # Safety
//! Every system call's `unsafe` is in this crate, in the modules that
//! opt back in to `unsafe_code` (the crate root does not; [`errno`] has
//! none). Each module's `# Safety` says what its calls rely on: the
//! system call numbers are libc's for the target, every pointer passed is
//! to memory of the size the call expects that lives for the call
//! (NUL-terminated paths, buffers with their true lengths, borrowed
//! atomics), and descriptors are owned by an [`Fd`] until its drop.
//! Wrappers that could affect memory they do not own (`mmap` at a fixed
//! address, `munmap`, `shmat`, `shmdt`), or that pass on a word the
//! kernel may take as a pointer (`raw`, the System V `*ctl` calls), are
//! `unsafe fn`; the rest are safe.

pub mod cred;
mod errno;
mod fd;
pub mod fs;
pub mod futex;
pub mod mem;
pub mod process;
pub mod raw;
pub mod robust;
pub mod signal;
mod stat;
/// The kernel's own System V IPC (direct system calls: x86_64 and aarch64
/// have them, i386 multiplexes them through `ipc(2)`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod sysv;
pub mod time;

pub use errno::{Errno, SysResult};
pub use fd::Fd;
pub use stat::Stat;
