//! One System V call with every argument resolved (ids, attachment
//! addresses), as the driver runs it itself or sends it to a logical
//! process: its encoding on the wire (a list of integers) and its result
//! as text.
//!
//! Results never show what differs by nature between the kernel and ipcns:
//! times read as set (`T`) or not (`0`), and a process id is written
//! `@PID`, which the driver replaces by the logical name of that process
//! (`P2`). Attachment addresses travel beside the text, never in it.

use super::os;
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{Errno, SysResult};
use ipcns_oracle::sysv::SysV;
use std::time::{Duration, Instant};

/// A call, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `semget(IPC_PRIVATE, nsems, IPC_CREAT | 0600)`.
    SemGet { nsems: i32 },
    /// `semtimedop(id, sops, timeout)`; no timeout: `semop`.
    Semop {
        id: i32,
        sops: Vec<sembuf>,
        timeout_ms: Option<u64>,
    },
    /// `semctl(id, num, cmd, ...)`: SETVAL's value in `val`, SETALL's
    /// values in `vals`.
    SemCtl {
        id: i32,
        num: i32,
        cmd: i32,
        val: i32,
        vals: Vec<u16>,
    },
    /// `shmget(IPC_PRIVATE, size, IPC_CREAT | 0600)`.
    ShmGet { size: u64 },
    /// `shmat(id, NULL, flg)`.
    ShmAt { id: i32, flg: i32 },
    /// `shmdt(addr)`.
    ShmDt { addr: usize },
    /// One byte stored at `addr` (inside a writable attachment).
    ShmWrite { addr: usize, byte: u8 },
    /// One byte loaded from `addr` (inside an attachment).
    ShmRead { addr: usize },
    /// `shmctl(id, IPC_STAT or IPC_RMID)`.
    ShmCtl { id: i32, cmd: i32 },
    /// `msgget(IPC_PRIVATE, IPC_CREAT | 0600)`.
    MsgGet,
    /// `msgsnd(id, {mtype, text}, len, flg)` with the text [`text`]`(seed,
    /// len)`.
    MsgSnd {
        id: i32,
        mtype: i64,
        len: usize,
        seed: usize,
        flg: i32,
    },
    /// `msgrcv(id, buf, cap, typ, flg)`.
    MsgRcv {
        id: i32,
        cap: usize,
        typ: i64,
        flg: i32,
    },
    /// `msgctl(id, cmd)`: IPC_STAT, IPC_RMID, or IPC_SET of `qbytes` (the
    /// rest as IPC_STAT shows it).
    MsgCtl { id: i32, cmd: i32, qbytes: u64 },
}

/// What a call gave: its text, and the address of a new attachment.
pub struct Outcome {
    pub text: String,
    pub addr: Option<usize>,
}

/// The text of message `seed`: `len` bytes that name it.
pub fn text(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed * 31 + i * 7 + 1) as u8).collect()
}

/// `v` or the errno's name.
pub fn show(r: SysResult<i32>) -> String {
    match r {
        Ok(v) => v.to_string(),
        Err(e) => e.name().to_string(),
    }
}

/// A time as set or not.
pub fn t(x: i64) -> &'static str {
    if x != 0 { "T" } else { "0" }
}

/// Sets' values are read into a buffer this long (every set of the
/// scripts is shorter).
const GETALL_LEN: usize = 8;

impl Op {
    /// The call as integers: an opcode, then its arguments.
    pub fn words(&self) -> Vec<i64> {
        match self {
            Op::SemGet { nsems } => vec![1, i64::from(*nsems)],
            Op::Semop {
                id,
                sops,
                timeout_ms,
            } => {
                let mut w = vec![
                    2,
                    i64::from(*id),
                    timeout_ms.map_or(-1, |ms| ms as i64),
                    sops.len() as i64,
                ];
                for o in sops {
                    w.extend([
                        i64::from(o.sem_num),
                        i64::from(o.sem_op),
                        i64::from(o.sem_flg),
                    ]);
                }
                w
            }
            Op::SemCtl {
                id,
                num,
                cmd,
                val,
                vals,
            } => {
                let mut w = vec![
                    3,
                    i64::from(*id),
                    i64::from(*num),
                    i64::from(*cmd),
                    i64::from(*val),
                    vals.len() as i64,
                ];
                w.extend(vals.iter().map(|&v| i64::from(v)));
                w
            }
            Op::ShmGet { size } => vec![4, *size as i64],
            Op::ShmAt { id, flg } => vec![5, i64::from(*id), i64::from(*flg)],
            Op::ShmDt { addr } => vec![6, *addr as i64],
            Op::ShmWrite { addr, byte } => vec![7, *addr as i64, i64::from(*byte)],
            Op::ShmRead { addr } => vec![8, *addr as i64],
            Op::ShmCtl { id, cmd } => vec![9, i64::from(*id), i64::from(*cmd)],
            Op::MsgGet => vec![10],
            Op::MsgSnd {
                id,
                mtype,
                len,
                seed,
                flg,
            } => vec![
                11,
                i64::from(*id),
                *mtype,
                *len as i64,
                *seed as i64,
                i64::from(*flg),
            ],
            Op::MsgRcv { id, cap, typ, flg } => {
                vec![12, i64::from(*id), *cap as i64, *typ, i64::from(*flg)]
            }
            Op::MsgCtl { id, cmd, qbytes } => {
                vec![13, i64::from(*id), i64::from(*cmd), *qbytes as i64]
            }
        }
    }

    /// The call that [`Op::words`] wrote; None for anything else.
    pub fn from_words(w: &[i64]) -> Option<Op> {
        let i32_at = |k: usize| w.get(k).and_then(|&v| i32::try_from(v).ok());
        let u_at = |k: usize| w.get(k).and_then(|&v| usize::try_from(v).ok());
        Some(match *w.first()? {
            1 => Op::SemGet { nsems: i32_at(1)? },
            2 => {
                let n = u_at(3)?;
                let mut sops = Vec::new();
                for k in 0..n.min(64) {
                    let b = 4 + 3 * k;
                    sops.push(sembuf {
                        sem_num: u16::try_from(*w.get(b)?).ok()?,
                        sem_op: i16::try_from(*w.get(b + 1)?).ok()?,
                        sem_flg: i16::try_from(*w.get(b + 2)?).ok()?,
                    });
                }
                Op::Semop {
                    id: i32_at(1)?,
                    sops,
                    timeout_ms: u64::try_from(*w.get(2)?).ok(),
                }
            }
            3 => {
                let n = u_at(5)?.min(64);
                let vals = (0..n)
                    .map(|k| w.get(6 + k).and_then(|&v| u16::try_from(v).ok()))
                    .collect::<Option<Vec<u16>>>()?;
                Op::SemCtl {
                    id: i32_at(1)?,
                    num: i32_at(2)?,
                    cmd: i32_at(3)?,
                    val: i32_at(4)?,
                    vals,
                }
            }
            4 => Op::ShmGet {
                size: u64::try_from(*w.get(1)?).ok()?,
            },
            5 => Op::ShmAt {
                id: i32_at(1)?,
                flg: i32_at(2)?,
            },
            6 => Op::ShmDt { addr: u_at(1)? },
            7 => Op::ShmWrite {
                addr: u_at(1)?,
                byte: u8::try_from(*w.get(2)?).ok()?,
            },
            8 => Op::ShmRead { addr: u_at(1)? },
            9 => Op::ShmCtl {
                id: i32_at(1)?,
                cmd: i32_at(2)?,
            },
            10 => Op::MsgGet,
            11 => Op::MsgSnd {
                id: i32_at(1)?,
                mtype: *w.get(2)?,
                len: u_at(3)?.min(1 << 16),
                seed: u_at(4)?,
                flg: i32_at(5)?,
            },
            12 => Op::MsgRcv {
                id: i32_at(1)?,
                cap: u_at(2)?.min(1 << 16),
                typ: *w.get(3)?,
                flg: i32_at(4)?,
            },
            13 => Op::MsgCtl {
                id: i32_at(1)?,
                cmd: i32_at(2)?,
                qbytes: u64::try_from(*w.get(3)?).ok()?,
            },
            _ => return None,
        })
    }

    /// Runs the call on `s`.
    pub fn run(&self, s: &dyn SysV) -> Outcome {
        let text = |text: String| Outcome { text, addr: None };
        match self {
            Op::SemGet { nsems } => text(show(s.semget(0, *nsems, IPC_CREAT | 0o600))),
            Op::Semop {
                id,
                sops,
                timeout_ms,
            } => {
                let ts = timeout_ms.map(|ms| libc::timespec {
                    tv_sec: (ms / 1000) as i64,
                    tv_nsec: (ms % 1000 * 1_000_000) as i64,
                });
                let start = Instant::now();
                let r = s.semtimedop(*id, sops, ts.as_ref());
                let mut out = show(r);
                // Without IPC_NOWAIT, EAGAIN means the timeout passed: not
                // before it was up. (How soon a call with IPC_NOWAIT
                // returns is the scheduler's business, not shown.)
                let nowait = sops.iter().any(|o| i32::from(o.sem_flg) & IPC_NOWAIT != 0);
                if let (Some(ms), Err(Errno::EAGAIN), false) = (timeout_ms, r, nowait)
                    && start.elapsed() < Duration::from_millis(*ms)
                {
                    out.push_str(" before its timeout was up");
                }
                text(out)
            }
            Op::SemCtl {
                id,
                num,
                cmd,
                val,
                vals,
            } => text(semctl(s, *id, *num, *cmd, *val, vals)),
            Op::ShmGet { size } => text(show(s.shmget(0, *size, IPC_CREAT | 0o600))),
            Op::ShmAt { id, flg } => match s.shmat(*id, *flg) {
                Ok(addr) => Outcome {
                    text: "attached".into(),
                    addr: Some(addr),
                },
                Err(e) => text(e.name().into()),
            },
            Op::ShmDt { addr } => text(show(s.shmdt(*addr))),
            Op::ShmWrite { addr, byte } => {
                os::poke(*addr, *byte);
                text("stored".into())
            }
            Op::ShmRead { addr } => text(format!("byte {}", os::peek(*addr))),
            Op::ShmCtl { id, cmd } => text(if *cmd == IPC_STAT {
                shm_stat(s, *id)
            } else {
                show(s.shmctl(*id, *cmd, ShmArg::None))
            }),
            Op::MsgGet => text(show(s.msgget(0, IPC_CREAT | 0o600))),
            Op::MsgSnd {
                id,
                mtype,
                len,
                seed,
                flg,
            } => text(show(s.msgsnd(*id, *mtype, &self::text(*seed, *len), *flg))),
            Op::MsgRcv { id, cap, typ, flg } => {
                let mut buf = vec![0u8; *cap];
                text(match s.msgrcv(*id, &mut buf, *typ, *flg) {
                    Ok((mtype, n)) => format!("type {mtype}, {n} bytes {:?}", &buf[..n]),
                    Err(e) => e.name().into(),
                })
            }
            Op::MsgCtl { id, cmd, qbytes } => text(match *cmd {
                IPC_STAT => msg_stat(s, *id),
                IPC_SET => {
                    let mut ds = msqid64_ds::default();
                    match s.msgctl(*id, IPC_STAT, MsgArg::Ds(&mut ds)) {
                        Err(e) => format!("IPC_STAT first: {}", e.name()),
                        Ok(_) => {
                            ds.msg_qbytes = *qbytes;
                            show(s.msgctl(*id, IPC_SET, MsgArg::Ds(&mut ds)))
                        }
                    }
                }
                cmd => show(s.msgctl(*id, cmd, MsgArg::None)),
            }),
        }
    }
}

/// A semctl command and what it shows.
fn semctl(s: &dyn SysV, id: i32, num: i32, cmd: i32, val: i32, vals: &[u16]) -> String {
    match cmd {
        SETVAL => show(s.semctl(id, num, SETVAL, SemArg::Val(val))),
        SETALL => {
            let mut v = vals.to_vec();
            show(s.semctl(id, 0, SETALL, SemArg::Array(&mut v)))
        }
        GETALL => {
            let mut v = vec![0u16; GETALL_LEN];
            match s.semctl(id, 0, GETALL, SemArg::Array(&mut v)) {
                Ok(_) => format!("{:?}", &v[..used(s, id)]),
                Err(e) => e.name().into(),
            }
        }
        GETPID => match s.semctl(id, num, GETPID, SemArg::None) {
            Ok(pid) => format!("@{pid}"),
            Err(e) => e.name().into(),
        },
        IPC_STAT => sem_stat(s, id),
        cmd => show(s.semctl(id, num, cmd, SemArg::None)),
    }
}

/// How many of GETALL's values belong to the set (its nsems).
fn used(s: &dyn SysV, id: i32) -> usize {
    let mut ds = semid64_ds::default();
    match s.semctl(id, 0, IPC_STAT, SemArg::Ds(&mut ds)) {
        Ok(_) => (ds.sem_nsems as usize).min(GETALL_LEN),
        Err(_) => GETALL_LEN,
    }
}

/// The owner, creator, key and mode of an object.
fn perm(p: &ipc64_perm) -> String {
    format!(
        "uid {} gid {} cuid {} cgid {} key {} mode {:o}",
        p.uid, p.gid, p.cuid, p.cgid, p.key, p.mode
    )
}

/// IPC_STAT of a set: every field, times as set or not.
pub fn sem_stat(s: &dyn SysV, id: i32) -> String {
    let mut ds = semid64_ds::default();
    match s.semctl(id, 0, IPC_STAT, SemArg::Ds(&mut ds)) {
        Ok(_) => format!(
            "nsems {} otime {} ctime {} {}",
            ds.sem_nsems,
            t(ds.sem_otime),
            t(ds.sem_ctime),
            perm(&ds.sem_perm)
        ),
        Err(e) => e.name().into(),
    }
}

/// IPC_STAT of a segment: every field, times as set or not, pids named.
pub fn shm_stat(s: &dyn SysV, id: i32) -> String {
    let mut ds = shmid64_ds::default();
    match s.shmctl(id, IPC_STAT, ShmArg::Ds(&mut ds)) {
        Ok(_) => format!(
            "size {} nattch {} cpid @{} lpid @{} atime {} dtime {} ctime {} {}",
            ds.shm_segsz,
            ds.shm_nattch,
            ds.shm_cpid,
            ds.shm_lpid,
            t(ds.shm_atime),
            t(ds.shm_dtime),
            t(ds.shm_ctime),
            perm(&ds.shm_perm)
        ),
        Err(e) => e.name().into(),
    }
}

/// IPC_STAT of a queue: every field, times as set or not, pids named.
pub fn msg_stat(s: &dyn SysV, id: i32) -> String {
    let mut ds = msqid64_ds::default();
    match s.msgctl(id, IPC_STAT, MsgArg::Ds(&mut ds)) {
        Ok(_) => format!(
            "qnum {} cbytes {} qbytes {} lspid @{} lrpid @{} stime {} rtime {} ctime {} {}",
            ds.msg_qnum,
            ds.msg_cbytes,
            ds.msg_qbytes,
            ds.msg_lspid,
            ds.msg_lrpid,
            t(ds.msg_stime),
            t(ds.msg_rtime),
            t(ds.msg_ctime),
            perm(&ds.msg_perm)
        ),
        Err(e) => e.name().into(),
    }
}

/// The values, waiters and last pids of a set, semaphore by semaphore.
pub fn sem_look(s: &dyn SysV, id: i32, nsems: usize) -> String {
    let mut v = vec![0u16; GETALL_LEN];
    let all = match s.semctl(id, 0, GETALL, SemArg::Array(&mut v)) {
        Ok(_) => format!("{:?}", &v[..nsems.min(GETALL_LEN)]),
        Err(e) => return format!("GETALL {}", e.name()),
    };
    let each: Vec<String> = (0..nsems as i32)
        .map(|n| {
            let get = |cmd| s.semctl(id, n, cmd, SemArg::None);
            format!(
                "s{n} n{} z{} {}",
                show(get(GETNCNT)),
                show(get(GETZCNT)),
                match get(GETPID) {
                    Ok(p) => format!("@{p}"),
                    Err(e) => e.name().into(),
                }
            )
        })
        .collect();
    format!("{all} {} {}", each.join(" "), sem_stat(s, id))
}
