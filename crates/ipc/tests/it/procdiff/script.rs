//! Scripts: steps over logical processes and objects, and the proptest
//! strategy that writes them.
//!
//! `who` names a logical process by number: P0 is the driver, P1, P2...
//! the processes forked during the script, numbered in the order the
//! forks happen (whoever forks). Objects are named by slot: sets S0, S1,
//! segments H0, H1, queues M0, M1, each the last one created into that
//! slot. Attachments are named by position in their process's list
//! (`nth`, taken modulo its length). A step naming a process that does not
//! exist, has ended or is blocked (but for a kill or a signal) is skipped,
//! the same way on both sides.

use ipcns::abi::*;
use proptest::prelude::*;
use std::fmt;

/// One semaphore operation: `num`, `op`, SEM_UNDO and IPC_NOWAIT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sop {
    pub num: u16,
    pub op: i16,
    pub undo: bool,
    pub nowait: bool,
}

/// How long a semop may wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wait {
    /// `semop`: until done.
    Block,
    /// `semtimedop` for this many milliseconds; the driver waits for the
    /// call to end before the next step (EAGAIN unless it completes at
    /// once).
    Short(u64),
    /// `semtimedop` for a minute: blocks as `semop` in a script's life.
    Long,
}

/// A semctl command.
#[derive(Debug, Clone, PartialEq)]
pub enum SemCmd {
    SetVal(i32),
    SetAll(Vec<u16>),
    GetVal,
    GetAll,
    GetPid,
    GetNcnt,
    GetZcnt,
    Stat,
    Rmid,
}

/// A msgctl command.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MsgCmd {
    Stat,
    Rmid,
    SetQbytes(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// P`who` forks: the child is the next logical process.
    Fork(u8),
    /// P`who` (not P0) calls exit.
    Exit(u8),
    /// P`who` (not P0) is sent SIGKILL.
    Kill(u8),
    /// P`who` (not P0) re-executes its program.
    Exec(u8),
    /// P`who` (not P0) is sent SIGUSR1 (a handler with SA_RESTART).
    Signal(u8),
    SemGet {
        who: u8,
        set: u8,
        nsems: u8,
    },
    Semop {
        who: u8,
        set: u8,
        sops: Vec<Sop>,
        wait: Wait,
    },
    SemCtl {
        who: u8,
        set: u8,
        num: u8,
        cmd: SemCmd,
    },
    ShmGet {
        who: u8,
        seg: u8,
        size: u32,
    },
    ShmAt {
        who: u8,
        seg: u8,
        rdonly: bool,
    },
    ShmDt {
        who: u8,
        nth: u8,
    },
    /// One byte at offset `at` (modulo the segment's size) of an
    /// attachment; a read-only one is skipped (the store would fault).
    ShmWrite {
        who: u8,
        nth: u8,
        at: u32,
        byte: u8,
    },
    ShmRead {
        who: u8,
        nth: u8,
        at: u32,
    },
    ShmCtl {
        who: u8,
        seg: u8,
        rmid: bool,
    },
    MsgGet {
        who: u8,
        q: u8,
    },
    MsgSnd {
        who: u8,
        q: u8,
        mtype: i64,
        len: u8,
        nowait: bool,
    },
    MsgRcv {
        who: u8,
        q: u8,
        typ: i64,
        cap: u8,
        flg: i32,
    },
    MsgCtl {
        who: u8,
        q: u8,
        cmd: MsgCmd,
    },
}

impl fmt::Display for Sop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{:+}", self.num, self.op)?;
        if self.undo {
            f.write_str(" UNDO")?;
        }
        if self.nowait {
            f.write_str(" NOWAIT")?;
        }
        Ok(())
    }
}

/// msgrcv's flags by name.
pub fn msg_flags(flg: i32) -> String {
    let mut v = Vec::new();
    for (bit, name) in [
        (IPC_NOWAIT, "NOWAIT"),
        (MSG_NOERROR, "NOERROR"),
        (MSG_EXCEPT, "EXCEPT"),
    ] {
        if flg & bit != 0 {
            v.push(name);
        }
    }
    v.join("|")
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Fork(w) => write!(f, "P{w} fork"),
            Step::Exit(w) => write!(f, "P{w} exit"),
            Step::Kill(w) => write!(f, "SIGKILL P{w}"),
            Step::Exec(w) => write!(f, "P{w} exec"),
            Step::Signal(w) => write!(f, "SIGUSR1 P{w}"),
            Step::SemGet { who, set, nsems } => write!(f, "P{who} S{set} = semget({nsems})"),
            Step::Semop {
                who,
                set,
                sops,
                wait,
            } => {
                let ops: Vec<String> = sops.iter().map(Sop::to_string).collect();
                write!(f, "P{who} semop S{set} [{}]", ops.join(", "))?;
                match wait {
                    Wait::Block => Ok(()),
                    Wait::Short(ms) => write!(f, " timeout {ms} ms"),
                    Wait::Long => f.write_str(" timeout 60 s"),
                }
            }
            Step::SemCtl { who, set, num, cmd } => write!(f, "P{who} semctl S{set} s{num} {cmd:?}"),
            Step::ShmGet { who, seg, size } => write!(f, "P{who} H{seg} = shmget({size})"),
            Step::ShmAt { who, seg, rdonly } => write!(
                f,
                "P{who} shmat H{seg}{}",
                if *rdonly { " RDONLY" } else { "" }
            ),
            Step::ShmDt { who, nth } => write!(f, "P{who} shmdt a{nth}"),
            Step::ShmWrite { who, nth, at, byte } => {
                write!(f, "P{who} a{nth}[{at}] = {byte}")
            }
            Step::ShmRead { who, nth, at } => write!(f, "P{who} read a{nth}[{at}]"),
            Step::ShmCtl { who, seg, rmid } => write!(
                f,
                "P{who} shmctl H{seg} {}",
                if *rmid { "IPC_RMID" } else { "IPC_STAT" }
            ),
            Step::MsgGet { who, q } => write!(f, "P{who} M{q} = msgget()"),
            Step::MsgSnd {
                who,
                q,
                mtype,
                len,
                nowait,
            } => write!(
                f,
                "P{who} msgsnd M{q} type {mtype} {len} bytes{}",
                if *nowait { " NOWAIT" } else { "" }
            ),
            Step::MsgRcv {
                who,
                q,
                typ,
                cap,
                flg,
            } => write!(
                f,
                "P{who} msgrcv M{q} type {typ} cap {cap} {}",
                msg_flags(*flg)
            ),
            Step::MsgCtl { who, q, cmd } => write!(f, "P{who} msgctl M{q} {cmd:?}"),
        }
    }
}

/// A script, one step a line.
pub fn listing(steps: &[Step]) -> String {
    steps
        .iter()
        .enumerate()
        .map(|(k, s)| format!("  {k:2}: {s}\n"))
        .collect()
}

/// Who runs an operation: the driver less often than the others (it
/// cannot block).
fn who() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![0u8, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 4])
}

/// A process other than the driver.
fn child() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![1u8, 1, 2, 2, 3, 3, 4])
}

fn slot() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![0u8, 0, 0, 1])
}

fn sop() -> impl Strategy<Value = Sop> {
    (
        prop::sample::select(vec![0u16, 0, 1, 1, 2]),
        prop::sample::select(vec![-2i16, -1, -1, 0, 1, 1, 1, 2]),
        prop::sample::select(vec![false, false, true]),
        prop::sample::select(vec![false, false, false, false, false, true]),
    )
        .prop_map(|(num, op, undo, nowait)| Sop {
            num,
            op,
            undo,
            nowait,
        })
}

fn wait() -> impl Strategy<Value = Wait> {
    prop_oneof![
        6 => Just(Wait::Block),
        2 => Just(Wait::Short(4)),
        2 => Just(Wait::Long),
    ]
}

fn sem_cmd() -> impl Strategy<Value = SemCmd> {
    prop_oneof![
        4 => (0i32..4).prop_map(SemCmd::SetVal),
        1 => prop::collection::vec(0u16..3, 3).prop_map(SemCmd::SetAll),
        2 => Just(SemCmd::GetVal),
        1 => Just(SemCmd::GetAll),
        1 => Just(SemCmd::GetPid),
        2 => Just(SemCmd::GetNcnt),
        2 => Just(SemCmd::GetZcnt),
        1 => Just(SemCmd::Stat),
        2 => Just(SemCmd::Rmid),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let sem = prop_oneof![
        1 => (who(), slot(), 1u8..4).prop_map(|(who, set, nsems)| Step::SemGet { who, set, nsems }),
        10 => (who(), slot(), prop::collection::vec(sop(), 1..3), wait())
            .prop_map(|(who, set, sops, wait)| Step::Semop { who, set, sops, wait }),
        6 => (who(), slot(), 0u8..3, sem_cmd())
            .prop_map(|(who, set, num, cmd)| Step::SemCtl { who, set, num, cmd }),
    ];
    let shm = prop_oneof![
        1 => (who(), slot(), prop::sample::select(vec![100u32, 4096, 5000]))
            .prop_map(|(who, seg, size)| Step::ShmGet { who, seg, size }),
        3 => (who(), slot(), prop::sample::select(vec![false, false, false, true]))
            .prop_map(|(who, seg, rdonly)| Step::ShmAt { who, seg, rdonly }),
        2 => (who(), 0u8..3).prop_map(|(who, nth)| Step::ShmDt { who, nth }),
        3 => (who(), 0u8..3, prop::sample::select(vec![0u32, 1, 99, 4095, 4999]), 1u8..=255)
            .prop_map(|(who, nth, at, byte)| Step::ShmWrite { who, nth, at, byte }),
        3 => (who(), 0u8..3, prop::sample::select(vec![0u32, 1, 99, 4095, 4999]))
            .prop_map(|(who, nth, at)| Step::ShmRead { who, nth, at }),
        3 => (who(), slot(), prop::sample::select(vec![false, false, false, false, true]))
            .prop_map(|(who, seg, rmid)| Step::ShmCtl { who, seg, rmid }),
    ];
    let msg = prop_oneof![
        1 => (who(), slot()).prop_map(|(who, q)| Step::MsgGet { who, q }),
        5 => (who(), slot(), 1i64..4, prop::sample::select(vec![0u8, 4, 8, 8, 16]),
              prop::sample::select(vec![false, false, false, true]))
            .prop_map(|(who, q, mtype, len, nowait)| Step::MsgSnd { who, q, mtype, len, nowait }),
        5 => (who(), slot(), prop::sample::select(vec![0i64, 0, 1, 2, 3, -2]),
              prop::sample::select(vec![4u8, 16, 16]),
              prop::sample::select(vec![0, 0, 0, MSG_NOERROR, MSG_EXCEPT, IPC_NOWAIT]))
            .prop_map(|(who, q, typ, cap, flg)| Step::MsgRcv { who, q, typ, cap, flg }),
        3 => (who(), slot(), prop_oneof![
                3 => Just(MsgCmd::Stat),
                1 => Just(MsgCmd::Rmid),
                2 => prop::sample::select(vec![16u64, 24, 16384]).prop_map(MsgCmd::SetQbytes),
            ])
            .prop_map(|(who, q, cmd)| Step::MsgCtl { who, q, cmd }),
    ];
    let proc = prop_oneof![
        3 => prop::sample::select(vec![0u8, 1, 2, 3, 4]).prop_map(Step::Fork),
        2 => child().prop_map(Step::Exit),
        2 => child().prop_map(Step::Kill),
        1 => child().prop_map(Step::Exec),
        2 => child().prop_map(Step::Signal),
    ];
    prop_oneof![6 => sem, 4 => shm, 4 => msg, 3 => proc]
}

/// A script: P0 makes a set, a segment and a queue (sized), attaches the
/// segment and forks three children (which inherit the attachment); then `steps`
/// random steps (shrunk on failure; the opening stays).
pub fn script(steps: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Step>> {
    (
        1u8..4,
        prop::sample::select(vec![100u32, 4096, 5000]),
        prop::sample::select(vec![16u64, 24, 16384]),
        prop::collection::vec(step(), steps),
    )
        .prop_map(|(nsems, size, qbytes, body)| {
            opening(nsems, size, qbytes)
                .into_iter()
                .chain(body)
                .collect()
        })
}

/// The opening of every random script (a queue of `qbytes` bytes: a small
/// one fills after a message or two, and senders block).
pub fn opening(nsems: u8, size: u32, qbytes: u64) -> Vec<Step> {
    vec![
        Step::SemGet {
            who: 0,
            set: 0,
            nsems,
        },
        Step::ShmGet {
            who: 0,
            seg: 0,
            size,
        },
        Step::MsgGet { who: 0, q: 0 },
        Step::MsgCtl {
            who: 0,
            q: 0,
            cmd: MsgCmd::SetQbytes(qbytes),
        },
        Step::ShmAt {
            who: 0,
            seg: 0,
            rdonly: false,
        },
        Step::Fork(0),
        Step::Fork(0),
        Step::Fork(0),
    ]
}
