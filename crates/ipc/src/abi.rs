//! Linux's SysV IPC ABI on x86-64: flags, commands and the structures
//! `*ctl` reads and writes (include/uapi/linux/{ipc,sem,msg,shm}.h,
//! asm-generic/{sem,msg,shm}buf.h), with sizes and offsets pinned. The C
//! ABI hands these out unchanged.

#![allow(non_camel_case_types)]

pub const IPC_CREAT: i32 = 0o1000;
pub const IPC_EXCL: i32 = 0o2000;
pub const IPC_NOWAIT: i32 = 0o4000;

pub const IPC_RMID: i32 = 0;
pub const IPC_SET: i32 = 1;
pub const IPC_STAT: i32 = 2;
pub const IPC_INFO: i32 = 3;
/// Or-ed into a command by libc: the 64-bit structures.
pub const IPC_64: i32 = 0x100;

pub const GETPID: i32 = 11;
pub const GETVAL: i32 = 12;
pub const GETALL: i32 = 13;
pub const GETNCNT: i32 = 14;
pub const GETZCNT: i32 = 15;
pub const SETVAL: i32 = 16;
pub const SETALL: i32 = 17;
pub const SEM_STAT: i32 = 18;
pub const SEM_INFO: i32 = 19;
pub const SEM_STAT_ANY: i32 = 20;

pub const MSG_STAT: i32 = 11;
pub const MSG_INFO: i32 = 12;
pub const MSG_STAT_ANY: i32 = 13;

/// msgrcv flags: truncate a long message instead of E2BIG; receive any
/// type but `msgtyp`; copy the message at position `msgtyp` (with
/// IPC_NOWAIT) without removing it.
pub const MSG_NOERROR: i32 = 0o10000;
pub const MSG_EXCEPT: i32 = 0o20000;
pub const MSG_COPY: i32 = 0o40000;

pub const SHM_LOCK: i32 = 11;
pub const SHM_UNLOCK: i32 = 12;
pub const SHM_STAT: i32 = 13;
pub const SHM_INFO: i32 = 14;
pub const SHM_STAT_ANY: i32 = 15;

/// `sem_flg` bit: undo the operation at exit.
pub const SEM_UNDO: i16 = 0x1000;

/// `struct sembuf`: one semaphore operation.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct sembuf {
    pub sem_num: u16,
    pub sem_op: i16,
    pub sem_flg: i16,
}

/// shm_perm.mode bits: segment marked for destruction, and locked.
pub const SHM_DEST: u32 = 0o1000;
pub const SHM_LOCKED: u32 = 0o2000;
/// shmget flags.
pub const SHM_HUGETLB: i32 = 0o4000;
pub const SHM_NORESERVE: i32 = 0o10000;

/// `struct ipc64_perm`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ipc64_perm {
    pub key: i32,
    pub uid: u32,
    pub gid: u32,
    pub cuid: u32,
    pub cgid: u32,
    pub mode: u32,
    pub seq: u16,
    pub __pad2: u16,
    pub __pad3: u32,
    pub __unused1: u64,
    pub __unused2: u64,
}

/// `struct semid64_ds`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct semid64_ds {
    pub sem_perm: ipc64_perm,
    pub sem_otime: i64,
    pub __unused1: u64,
    pub sem_ctime: i64,
    pub __unused2: u64,
    pub sem_nsems: u64,
    pub __unused3: u64,
    pub __unused4: u64,
}

/// `struct msqid64_ds`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct msqid64_ds {
    pub msg_perm: ipc64_perm,
    pub msg_stime: i64,
    pub msg_rtime: i64,
    pub msg_ctime: i64,
    pub msg_cbytes: u64,
    pub msg_qnum: u64,
    pub msg_qbytes: u64,
    pub msg_lspid: i32,
    pub msg_lrpid: i32,
    pub __unused4: u64,
    pub __unused5: u64,
}

/// `struct shmid64_ds`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct shmid64_ds {
    pub shm_perm: ipc64_perm,
    pub shm_segsz: u64,
    pub shm_atime: i64,
    pub shm_dtime: i64,
    pub shm_ctime: i64,
    pub shm_cpid: i32,
    pub shm_lpid: i32,
    pub shm_nattch: u64,
    pub __unused4: u64,
    pub __unused5: u64,
}

/// `struct seminfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct seminfo {
    pub semmap: i32,
    pub semmni: i32,
    pub semmns: i32,
    pub semmnu: i32,
    pub semmsl: i32,
    pub semopm: i32,
    pub semume: i32,
    pub semusz: i32,
    pub semvmx: i32,
    pub semaem: i32,
}

/// `struct msginfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct msginfo {
    pub msgpool: i32,
    pub msgmap: i32,
    pub msgmax: i32,
    pub msgmnb: i32,
    pub msgmni: i32,
    pub msgssz: i32,
    pub msgtql: i32,
    pub msgseg: u16,
}

/// `struct shminfo64`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct shminfo64 {
    pub shmmax: u64,
    pub shmmin: u64,
    pub shmmni: u64,
    pub shmseg: u64,
    pub shmall: u64,
    pub __unused1: u64,
    pub __unused2: u64,
    pub __unused3: u64,
    pub __unused4: u64,
}

/// `struct shm_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct shm_info {
    pub used_ids: i32,
    pub shm_tot: u64,
    pub shm_rss: u64,
    pub shm_swp: u64,
    pub swap_attempts: u64,
    pub swap_successes: u64,
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<ipc64_perm>() == 48);
    assert!(size_of::<sembuf>() == 6);
    assert!(offset_of!(ipc64_perm, mode) == 20);
    assert!(offset_of!(ipc64_perm, seq) == 24);
    assert!(offset_of!(ipc64_perm, __unused1) == 32);
    assert!(size_of::<semid64_ds>() == 104);
    assert!(offset_of!(semid64_ds, sem_ctime) == 64);
    assert!(offset_of!(semid64_ds, sem_nsems) == 80);
    assert!(size_of::<msqid64_ds>() == 120);
    assert!(offset_of!(msqid64_ds, msg_qbytes) == 88);
    assert!(offset_of!(msqid64_ds, msg_lspid) == 96);
    assert!(size_of::<shmid64_ds>() == 112);
    assert!(offset_of!(shmid64_ds, shm_cpid) == 80);
    assert!(offset_of!(shmid64_ds, shm_nattch) == 88);
    assert!(size_of::<seminfo>() == 40);
    assert!(size_of::<msginfo>() == 32);
    assert!(offset_of!(msginfo, msgseg) == 28);
    assert!(size_of::<shminfo64>() == 72);
    assert!(size_of::<shm_info>() == 48);
    assert!(offset_of!(shm_info, shm_tot) == 8);
};
