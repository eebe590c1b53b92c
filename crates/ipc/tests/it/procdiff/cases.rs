//! Scripted cases: the process events of issue 8 each in a fixed script,
//! run by the same engine on the kernel and on ipcns.

use super::script::{MsgCmd, SemCmd, Sop, Step, Wait};
use crate::support;

/// Runs `script` on both sides; fails on any difference. With
/// IPCNS_PROCDIFF_SHOW=1 the log is printed all the same.
fn same(name: &str, script: &[Step]) {
    if !support::kernel_or_skip(name) {
        return;
    }
    let (kernel, ours) = super::run_both(script);
    let report = super::report(script, &kernel, &ours);
    if kernel != ours {
        panic!("{name}: ipcns differs from the kernel\n{report}");
    }
    if std::env::var_os("IPCNS_PROCDIFF_SHOW").is_some() {
        eprintln!("{name}:\n{report}");
    }
}

fn op(num: u16, op: i16) -> Sop {
    Sop {
        num,
        op,
        undo: false,
        nowait: false,
    }
}

fn undo(num: u16, op: i16) -> Sop {
    Sop {
        undo: true,
        ..self::op(num, op)
    }
}

fn semop(who: u8, sops: &[Sop]) -> Step {
    Step::Semop {
        who,
        set: 0,
        sops: sops.to_vec(),
        wait: Wait::Block,
    }
}

fn setval(num: u8, v: i32) -> Step {
    Step::SemCtl {
        who: 0,
        set: 0,
        num,
        cmd: SemCmd::SetVal(v),
    }
}

fn semget(nsems: u8) -> Step {
    Step::SemGet {
        who: 0,
        set: 0,
        nsems,
    }
}

fn shmat(who: u8) -> Step {
    Step::ShmAt {
        who,
        seg: 0,
        rdonly: false,
    }
}

fn write(who: u8, nth: u8, at: u32, byte: u8) -> Step {
    Step::ShmWrite { who, nth, at, byte }
}

fn read(who: u8, nth: u8, at: u32) -> Step {
    Step::ShmRead { who, nth, at }
}

/// SEM_UNDO at exit: a child's +2 and -1 are undone when it exits, which
/// completes a waiter for zero queued behind them; a grandchild starts
/// with no adjustment, so its exit undoes only its own.
#[test]
fn undo_at_exit() {
    same(
        "undo_at_exit",
        &[
            semget(2),
            setval(1, 3),
            Step::Fork(0),
            Step::Fork(0),
            semop(1, &[undo(0, 2), undo(1, -1)]),
            semop(2, &[op(0, 0)]),
            Step::Fork(1),
            semop(3, &[undo(1, -1)]),
            Step::Exit(3),
            Step::Exit(1),
            Step::SemCtl {
                who: 0,
                set: 0,
                num: 0,
                cmd: SemCmd::GetAll,
            },
        ],
    );
}

/// SEM_UNDO at SIGKILL: a holder killed while it holds a semaphore with
/// SEM_UNDO gives it back, completing the waiter queued behind; killed
/// while itself blocked, it takes nothing and its earlier adjustment is
/// undone all the same.
#[test]
fn undo_at_sigkill() {
    same(
        "undo_at_sigkill",
        &[
            semget(2),
            setval(0, 1),
            Step::Fork(0),
            Step::Fork(0),
            Step::Fork(0),
            semop(1, &[undo(0, -1)]),
            semop(2, &[op(0, -1)]),
            semop(3, &[undo(1, 1)]),
            semop(3, &[undo(1, -1), op(0, -1)]),
            Step::Kill(1),
            Step::Kill(3),
            Step::Kill(2),
        ],
    );
}

/// SEM_UNDO across exec: the adjustment made before the exec is still
/// there after it, joined by one made after, and both are undone when the
/// new image exits; a second exec changes nothing.
#[test]
fn undo_across_exec() {
    same(
        "undo_across_exec",
        &[
            semget(1),
            Step::Fork(0),
            semop(1, &[undo(0, 2)]),
            Step::Exec(1),
            semop(1, &[undo(0, 1)]),
            Step::Exec(1),
            semop(1, &[op(0, -1)]),
            Step::Exit(1),
        ],
    );
}

/// nattch across fork, exit, SIGKILL and exec: an attachment inherited by
/// a child and a grandchild counts once each (lpid the forking parent),
/// and goes with exit, with SIGKILL and with exec; a detach by the driver
/// last.
#[test]
fn nattch_across_fork_exit_kill_exec() {
    same(
        "nattch_across_fork_exit_kill_exec",
        &[
            Step::ShmGet {
                who: 0,
                seg: 0,
                size: 8192,
            },
            shmat(0),
            Step::Fork(0),
            Step::Fork(1),
            Step::Fork(1),
            Step::Fork(0),
            shmat(4),
            Step::Exit(2),
            Step::Kill(3),
            Step::Exec(1),
            Step::Exec(4),
            Step::ShmDt { who: 0, nth: 0 },
        ],
    );
}

/// A fork by a process that has never attached anything, forked itself by
/// one that detached everything first and attached again afterwards: the
/// grandchild inherits nothing, so nattch does not move (ipcns once
/// counted the grandparent's attachments for it: a child that never made
/// its own record still named its parent's).
#[test]
fn fork_by_a_process_without_attachments() {
    same(
        "fork_by_a_process_without_attachments",
        &[
            Step::ShmGet {
                who: 0,
                seg: 0,
                size: 100,
            },
            shmat(0),
            Step::Fork(0),
            Step::ShmDt { who: 0, nth: 0 },
            Step::Fork(0),
            shmat(0),
            Step::Fork(2),
            Step::Fork(3),
            Step::Exit(3),
        ],
    );
}

/// Shared memory contents across processes: what one process stores,
/// every attachment of the segment shows, in a fork child, in a process
/// that attached on its own, through a read-only attachment, and after
/// IPC_RMID (the segment lives while attached; the last detach destroys
/// it).
#[test]
fn shm_contents_across_processes() {
    same(
        "shm_contents_across_processes",
        &[
            Step::ShmGet {
                who: 0,
                seg: 0,
                size: 5000,
            },
            shmat(0),
            write(0, 0, 4999, 7),
            Step::Fork(0),
            read(1, 0, 4999),
            write(1, 0, 1, 42),
            read(0, 0, 1),
            Step::Fork(0),
            Step::ShmAt {
                who: 2,
                seg: 0,
                rdonly: true,
            },
            read(2, 1, 1),
            write(2, 0, 100, 9),
            read(1, 0, 100),
            Step::ShmCtl {
                who: 1,
                seg: 0,
                rmid: true,
            },
            read(2, 1, 100),
            Step::ShmDt { who: 0, nth: 0 },
            Step::Kill(1),
            Step::ShmDt { who: 2, nth: 0 },
            Step::ShmDt { who: 2, nth: 0 },
        ],
    );
}

/// Blocking semop: waiters seen queued (GETNCNT, GETZCNT), completed in
/// the kernel's order (the oldest that fits), a short timeout (EAGAIN
/// after the full time), signals (EINTR under SA_RESTART, for a decrement
/// and for a wait for zero) and IPC_RMID (EIDRM).
#[test]
fn semop_waiters_timeouts_signals_removal() {
    same(
        "semop_waiters_timeouts_signals_removal",
        &[
            semget(2),
            setval(1, 1),
            Step::Fork(0),
            Step::Fork(0),
            Step::Fork(0),
            Step::Fork(0),
            semop(1, &[op(0, -2)]),
            semop(2, &[op(0, -1)]),
            semop(3, &[op(1, 0)]),
            Step::Semop {
                who: 4,
                set: 0,
                sops: vec![op(0, -1)],
                wait: Wait::Short(20),
            },
            semop(0, &[op(0, 1)]),
            semop(0, &[op(0, 2)]),
            semop(4, &[op(0, -1)]),
            Step::Signal(4),
            Step::Signal(3),
            semop(3, &[op(1, 0)]),
            semop(0, &[op(1, -1)]),
            semop(4, &[op(1, -1)]),
            Step::SemCtl {
                who: 0,
                set: 0,
                num: 0,
                cmd: SemCmd::Rmid,
            },
        ],
    );
}

/// Blocking msgrcv and msgsnd: receivers handed messages by type in
/// arrival order, one whose buffer is too small woken with E2BIG, a
/// sender blocked on a full queue woken by a receive, EINTR, EIDRM.
#[test]
fn msg_waiters_signals_removal() {
    let rcv = |who: u8, typ: i64, cap: u8| Step::MsgRcv {
        who,
        q: 0,
        typ,
        cap,
        flg: 0,
    };
    let snd = |who: u8, mtype: i64, len: u8| Step::MsgSnd {
        who,
        q: 0,
        mtype,
        len,
        nowait: false,
    };
    same(
        "msg_waiters_signals_removal",
        &[
            Step::MsgGet { who: 0, q: 0 },
            Step::Fork(0),
            Step::Fork(0),
            Step::Fork(0),
            rcv(1, 2, 16),
            rcv(2, 0, 4),
            rcv(3, 0, 16),
            snd(0, 1, 8),
            snd(0, 2, 8),
            Step::MsgCtl {
                who: 0,
                q: 0,
                cmd: MsgCmd::SetQbytes(16),
            },
            snd(0, 3, 16),
            snd(1, 3, 8),
            rcv(2, 3, 16),
            rcv(3, 5, 16),
            Step::Signal(3),
            rcv(3, 5, 16),
            rcv(1, 5, 16),
            Step::MsgCtl {
                who: 0,
                q: 0,
                cmd: MsgCmd::Rmid,
            },
        ],
    );
}

/// A process killed with SIGKILL holding a SEM_UNDO adjustment: undone
/// when the driver (not its parent, and reaping nothing) looks right after
/// its pidfd said it was gone, then as a shmget's look and a GETVAL see
/// it (it used to wait for a reaper: the look after the kill, GETVAL and
/// the look after the shmget differed).
#[test]
fn undo_at_sigkill_without_a_reaper() {
    let script = [
        semget(1),
        Step::Fork(0),
        semop(1, &[undo(0, 1)]),
        Step::Kill(1),
        Step::SemCtl {
            who: 0,
            set: 0,
            num: 0,
            cmd: SemCmd::GetVal,
        },
        Step::ShmGet {
            who: 0,
            seg: 0,
            size: 100,
        },
        Step::SemCtl {
            who: 0,
            set: 0,
            num: 0,
            cmd: SemCmd::GetVal,
        },
    ];
    same("undo_at_sigkill_without_a_reaper", &script);
}
