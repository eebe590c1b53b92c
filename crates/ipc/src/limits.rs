//! Per-namespace limits and sysctls, with Linux's defaults.

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
