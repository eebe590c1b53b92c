//! Per-namespace limits and sysctls, with Linux's defaults.

use crate::arena::header::Limits;
use core::sync::atomic::Ordering::Relaxed;

/// SEMMSL, SEMMNS, SEMOPM, SEMMNI (include/uapi/linux/sem.h).
pub const SEMMSL: i32 = 32000;
pub const SEMMNS: i32 = 1_024_000_000;
pub const SEMOPM: i32 = 500;
pub const SEMMNI: i32 = 32000;
/// SEMVMX and SEMAEM.
pub const SEMVMX: i32 = 32767;
pub const SEMAEM: i32 = SEMVMX;
/// MSGMNI, MSGMAX, MSGMNB (include/uapi/linux/msg.h).
pub const MSGMNI: i32 = 32000;
pub const MSGMAX: i32 = 8192;
pub const MSGMNB: i32 = 16384;
/// SHMMNI, SHMMAX, SHMALL, SHMMIN (include/uapi/linux/shm.h).
pub const SHMMNI: i32 = 4096;
pub const SHMMAX: u64 = u64::MAX - (1 << 24);
pub const SHMALL: u64 = u64::MAX - (1 << 24);
pub const SHMMIN: u64 = 1;

pub(crate) fn init_defaults(l: &Limits) {
    l.semmsl.store(SEMMSL, Relaxed);
    l.semmns.store(SEMMNS, Relaxed);
    l.semopm.store(SEMOPM, Relaxed);
    l.semmni.store(SEMMNI, Relaxed);
    l.msgmni.store(MSGMNI, Relaxed);
    l.msgmax.store(MSGMAX, Relaxed);
    l.msgmnb.store(MSGMNB, Relaxed);
    l.shmmni.store(SHMMNI, Relaxed);
    l.shmmax.store(SHMMAX, Relaxed);
    l.shmall.store(SHMALL, Relaxed);
    l.shm_rmid_forced.store(0, Relaxed);
}
