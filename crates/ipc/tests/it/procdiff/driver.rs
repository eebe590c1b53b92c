//! The driver: P0 of a script. It runs P0's calls itself, sends the
//! others' to them, forks, kills and signals, and writes the log: per step
//! one line (the step, its result, the blocked calls it completed) and one
//! line of what P0 then sees of every object.
//!
//! Determinism: a step's effects are over before its line is written.
//! After a call is sent, and after every step, each process with a call
//! outstanding is watched until it has answered or is asleep in the call
//! (`Driver::watch`); rounds repeat while anyone answers (a woken msgsnd
//! retries by itself and may complete a receiver). A waker completes a
//! semop sleeper, or wakes a msg sleeper, before its own call returns, and
//! a woken process reads as running (`R`, TASK_WAKING included) from then
//! on, so a process seen asleep in its call after the step is one the step
//! did not wake. Asleep in its call means: in /proc/PID/syscall, for the
//! kernel, semtimedop, msgsnd or msgrcv; for ipcns, FUTEX_WAIT on a sleeper
//! record's state word with the value SLEEPING (1: a lock's futex waits
//! with a thread id), and state `S`. Deaths are seen through pidfds, after
//! the kernel's `exit_sem`/`exit_shm`.
//!
//! What would be decided by the scheduler is kept out: at most one sender
//! blocked per queue (a second one gets IPC_NOWAIT, since a receive wakes
//! every sender that fits and they race), no IPC_SET of a queue with two
//! waiters or more (they retry in any order), and a short semtimedop is
//! waited for before anything else happens. P0 never blocks (IPC_NOWAIT).
//!
//! Reaping: after a SIGKILL, the ipcns side calls `reap_exited`, as a
//! supervisor that reaps its children would (the design's `ipcns run`):
//! a killed process runs no exit code, and ipcns applies its undo entries
//! when someone finds it gone (a newcomer, a sleeper, `shmctl`); until
//! then GETVAL shows them still in force where the kernel has undone them
//! (`cases::undo_at_sigkill_without_a_reaper`). A normal exit goes
//! through `exit_process` in the exiting process; no reaper runs for it.

use super::op::{self, Op};
use super::os::{self, PidFd};
use super::script::{MsgCmd, SemCmd, Step, Wait};
use super::serve::{self, Ctx, MAX_PROCS};
use crate::support;
use ipcns::abi::*;
use ipcns::shm::attach::SHM_RDONLY;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// How long anything may take before it is reported as stuck.
const DEADLINE: Duration = Duration::from_secs(10);

/// ipcns's `wait::SLEEPING`: the value a sleeper's futex waits on.
const IPCNS_SLEEPING: u64 = 1;

/// The timeout of [`Wait::Long`].
const LONG_MS: u64 = 60_000;

/// What a logical process is waiting for.
#[derive(Clone, Copy, PartialEq, Debug)]
enum On {
    Sem,
    MsgSnd(i32),
    MsgRcv(i32),
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    Idle,
    Blocked(On),
    Ended,
}

/// An attachment of a logical process.
#[derive(Clone, Copy, Debug)]
struct Att {
    addr: usize,
    size: u64,
    rdonly: bool,
}

struct Proc {
    pid: i32,
    /// None for P0.
    pidfd: Option<PidFd>,
    state: State,
    atts: Vec<Att>,
}

/// What a watched process did.
enum Now {
    Answered(String),
    Asleep,
    Ended,
    Stuck(String),
}

pub struct Driver<'a> {
    ctx: &'a Ctx<'a>,
    kernel: bool,
    reaper: bool,
    procs: Vec<Proc>,
    /// The driver's ends of the channels of P1..: `[k - 1]`.
    mine: Vec<UnixDatagram>,
    /// The children's ends.
    theirs: Vec<UnixDatagram>,
    /// Slots: S0, S1 (id, nsems); H0, H1 (id, size); M0, M1.
    sems: [Option<(i32, usize)>; 2],
    shms: [Option<(i32, u64)>; 2],
    msgs: [Option<i32>; 2],
    /// Where each line of the log goes as soon as it is written (so a
    /// driver that hangs still shows how far it got).
    log: &'a mut dyn FnMut(String),
}

impl<'a> Driver<'a> {
    /// A driver on `ctx`; `reaper`: whether it calls `reap_exited` after
    /// a SIGKILL (ipcns; module doc).
    pub fn new(
        ctx: &'a Ctx<'a>,
        reaper: bool,
        log: &'a mut dyn FnMut(String),
    ) -> std::io::Result<Driver<'a>> {
        let mut mine = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..MAX_PROCS {
            let (a, b) = UnixDatagram::pair()?;
            mine.push(a);
            theirs.push(b);
        }
        Ok(Driver {
            ctx,
            kernel: matches!(ctx, Ctx::Kernel),
            reaper,
            procs: vec![Proc {
                pid: std::process::id() as i32,
                pidfd: None,
                state: State::Idle,
                atts: Vec::new(),
            }],
            mine,
            theirs,
            sems: [None; 2],
            shms: [None; 2],
            msgs: [None; 2],
            log,
        })
    }

    /// Runs the script, writing the log.
    pub fn run(mut self, script: &[Step]) {
        for (k, st) in script.iter().enumerate() {
            self.step(k, st);
        }
        self.finish();
    }

    fn step(&mut self, k: usize, st: &Step) {
        let head = format!("{k:2} {st}");
        match self.act(k, st) {
            Err(why) => (self.log)(format!("{head}: skipped ({why})")),
            Ok(result) => {
                let done = self.settle();
                let mut line = format!("{head}: {result}");
                if !done.is_empty() {
                    line.push_str(&format!("; completed {}", done.join(", ")));
                }
                let line = self.named(&line);
                (self.log)(line);
                let look = self.look();
                let look = self.named(&look);
                (self.log)(format!("     {look}"));
            }
        }
    }

    /// Does a step: its result, or why it is skipped.
    fn act(&mut self, k: usize, st: &Step) -> Result<String, String> {
        match st {
            Step::Fork(w) => self.fork(self.idle(*w)?),
            Step::Exit(w) => {
                let p = self.child(*w, false)?;
                self.send(p, &[serve::EXIT]);
                let ended = self.pidfd(p).ended(DEADLINE);
                self.procs[p].state = State::Ended;
                Ok(if ended { "exited" } else { "still running" }.into())
            }
            Step::Kill(w) => {
                let p = self.child(*w, true)?;
                os::kill(self.procs[p].pid, libc::SIGKILL);
                let ended = self.pidfd(p).ended(DEADLINE);
                self.procs[p].state = State::Ended;
                if let (Ctx::Ipcns { ns, .. }, true) = (self.ctx, self.reaper) {
                    let _ = ns.reap_exited();
                }
                Ok(if ended { "killed" } else { "still running" }.into())
            }
            Step::Exec(w) => {
                let p = self.child(*w, false)?;
                self.send(p, &[serve::EXEC]);
                let r = self.recv(p, DEADLINE);
                match r.as_deref() {
                    Some(s) if s.starts_with("ready ") => {
                        self.procs[p].atts.clear();
                        Ok("executed".into())
                    }
                    Some(other) => Ok(answer(other).1),
                    None => Ok("no answer".into()),
                }
            }
            Step::Signal(w) => {
                let p = self.child(*w, true)?;
                os::kill(self.procs[p].pid, libc::SIGUSR1);
                Ok("sent".into())
            }
            Step::SemGet { who, set, nsems } => {
                let p = self.idle(*who)?;
                let n = i32::from(*nsems);
                let r = self.call(p, Op::SemGet { nsems: n }, None, false);
                if let Ok(id) = r.parse::<i32>() {
                    self.sems[*set as usize % 2] = Some((id, n as usize));
                }
                Ok(r)
            }
            Step::Semop {
                who,
                set,
                sops,
                wait,
            } => {
                let p = self.idle(*who)?;
                let (id, _) = self.sems[*set as usize % 2].unwrap_or((-1, 0));
                let driver = p == 0;
                let raw = sops
                    .iter()
                    .map(|o| sembuf {
                        sem_num: o.num,
                        sem_op: o.op,
                        sem_flg: if o.undo { SEM_UNDO } else { 0 }
                            | if o.nowait || (driver && !matches!(wait, Wait::Short(_))) {
                                IPC_NOWAIT as i16
                            } else {
                                0
                            },
                    })
                    .collect();
                let (timeout_ms, wait_end) = match wait {
                    Wait::Block => (None, false),
                    Wait::Short(ms) => (Some(*ms), true),
                    Wait::Long => (Some(LONG_MS), false),
                };
                let op = Op::Semop {
                    id,
                    sops: raw,
                    timeout_ms,
                };
                Ok(self.call(p, op, Some(On::Sem), wait_end))
            }
            Step::SemCtl { who, set, num, cmd } => {
                let p = self.idle(*who)?;
                let (id, nsems) = self.sems[*set as usize % 2].unwrap_or((-1, 3));
                let (cmd, val, vals) = match cmd {
                    SemCmd::SetVal(v) => (SETVAL, *v, Vec::new()),
                    SemCmd::SetAll(v) => (SETALL, 0, v.iter().copied().take(nsems).collect()),
                    SemCmd::GetVal => (GETVAL, 0, Vec::new()),
                    SemCmd::GetAll => (GETALL, 0, Vec::new()),
                    SemCmd::GetPid => (GETPID, 0, Vec::new()),
                    SemCmd::GetNcnt => (GETNCNT, 0, Vec::new()),
                    SemCmd::GetZcnt => (GETZCNT, 0, Vec::new()),
                    SemCmd::Stat => (IPC_STAT, 0, Vec::new()),
                    SemCmd::Rmid => (IPC_RMID, 0, Vec::new()),
                };
                let op = Op::SemCtl {
                    id,
                    num: i32::from(*num),
                    cmd,
                    val,
                    vals,
                };
                Ok(self.call(p, op, None, false))
            }
            Step::ShmGet { who, seg, size } => {
                let p = self.idle(*who)?;
                let size = u64::from(*size);
                let r = self.call(p, Op::ShmGet { size }, None, false);
                if let Ok(id) = r.parse::<i32>() {
                    self.shms[*seg as usize % 2] = Some((id, size));
                }
                Ok(r)
            }
            Step::ShmAt { who, seg, rdonly } => {
                let p = self.idle(*who)?;
                let (id, size) = self.shms[*seg as usize % 2].unwrap_or((-1, 0));
                let flg = if *rdonly { SHM_RDONLY } else { 0 };
                let (r, addr) = self.call_at(p, Op::ShmAt { id, flg }, None, false);
                if let Some(addr) = addr {
                    let n = self.procs[p].atts.len();
                    self.procs[p].atts.push(Att {
                        addr,
                        size,
                        rdonly: *rdonly,
                    });
                    return Ok(format!("{r} as a{n}"));
                }
                Ok(r)
            }
            Step::ShmDt { who, nth } => {
                let p = self.idle(*who)?;
                let n = self.nth(p, *nth)?;
                let addr = self.procs[p].atts[n].addr;
                let r = self.call(p, Op::ShmDt { addr }, None, false);
                if r == "0" {
                    self.procs[p].atts.remove(n);
                }
                Ok(format!("a{n}: {r}"))
            }
            Step::ShmWrite { who, nth, at, byte } => {
                let p = self.idle(*who)?;
                let n = self.nth(p, *nth)?;
                let a = self.procs[p].atts[n];
                if a.rdonly {
                    return Err(format!("a{n} is read-only"));
                }
                let off = u64::from(*at) % a.size.max(1);
                let op = Op::ShmWrite {
                    addr: a.addr + off as usize,
                    byte: *byte,
                };
                Ok(format!("a{n}[{off}]: {}", self.call(p, op, None, false)))
            }
            Step::ShmRead { who, nth, at } => {
                let p = self.idle(*who)?;
                let n = self.nth(p, *nth)?;
                let a = self.procs[p].atts[n];
                let off = u64::from(*at) % a.size.max(1);
                let op = Op::ShmRead {
                    addr: a.addr + off as usize,
                };
                Ok(format!("a{n}[{off}]: {}", self.call(p, op, None, false)))
            }
            Step::ShmCtl { who, seg, rmid } => {
                let p = self.idle(*who)?;
                let (id, _) = self.shms[*seg as usize % 2].unwrap_or((-1, 0));
                let cmd = if *rmid { IPC_RMID } else { IPC_STAT };
                Ok(self.call(p, Op::ShmCtl { id, cmd }, None, false))
            }
            Step::MsgGet { who, q } => {
                let p = self.idle(*who)?;
                let r = self.call(p, Op::MsgGet, None, false);
                if let Ok(id) = r.parse::<i32>() {
                    self.msgs[*q as usize % 2] = Some(id);
                }
                Ok(r)
            }
            Step::MsgSnd {
                who,
                q,
                mtype,
                len,
                nowait,
            } => {
                let p = self.idle(*who)?;
                let id = self.msgs[*q as usize % 2].unwrap_or(-1);
                let mut note = "";
                let mut flg = if *nowait || p == 0 { IPC_NOWAIT } else { 0 };
                if flg == 0 && self.waiting(|on| on == On::MsgSnd(id)) > 0 {
                    flg = IPC_NOWAIT;
                    note = " (IPC_NOWAIT: a sender already waits)";
                }
                let op = Op::MsgSnd {
                    id,
                    mtype: *mtype,
                    len: usize::from(*len),
                    seed: k,
                    flg,
                };
                let r = self.call(p, op, Some(On::MsgSnd(id)), false);
                Ok(format!("{r}{note}"))
            }
            Step::MsgRcv {
                who,
                q,
                typ,
                cap,
                flg,
            } => {
                let p = self.idle(*who)?;
                let id = self.msgs[*q as usize % 2].unwrap_or(-1);
                let flg = if p == 0 { flg | IPC_NOWAIT } else { *flg };
                let op = Op::MsgRcv {
                    id,
                    cap: usize::from(*cap),
                    typ: *typ,
                    flg,
                };
                Ok(self.call(p, op, Some(On::MsgRcv(id)), false))
            }
            Step::MsgCtl { who, q, cmd } => {
                let p = self.idle(*who)?;
                let id = self.msgs[*q as usize % 2].unwrap_or(-1);
                let (cmd, qbytes) = match cmd {
                    MsgCmd::Stat => (IPC_STAT, 0),
                    MsgCmd::Rmid => (IPC_RMID, 0),
                    MsgCmd::SetQbytes(n) => {
                        let n_waiting =
                            self.waiting(|on| on == On::MsgSnd(id) || on == On::MsgRcv(id));
                        if n_waiting > 1 {
                            return Err(format!(
                                "{n_waiting} processes wait on the queue: their retries would race"
                            ));
                        }
                        (IPC_SET, *n)
                    }
                };
                Ok(self.call(p, Op::MsgCtl { id, cmd, qbytes }, None, false))
            }
        }
    }

    /// P`who`, if it exists, has not ended and is not blocked.
    fn idle(&self, who: u8) -> Result<usize, String> {
        let k = usize::from(who);
        match self.procs.get(k).map(|p| p.state) {
            None => Err(format!("no P{k}")),
            Some(State::Idle) => Ok(k),
            Some(State::Blocked(_)) => Err(format!("P{k} is blocked")),
            Some(State::Ended) => Err(format!("P{k} has ended")),
        }
    }

    /// P`who`, not the driver, alive (and idle unless `blocked_too`).
    fn child(&self, who: u8, blocked_too: bool) -> Result<usize, String> {
        let k = usize::from(who);
        if k == 0 {
            return Err("P0 is the driver".into());
        }
        match self.procs.get(k).map(|p| p.state) {
            None => Err(format!("no P{k}")),
            Some(State::Ended) => Err(format!("P{k} has ended")),
            Some(State::Blocked(_)) if !blocked_too => Err(format!("P{k} is blocked")),
            Some(_) => Ok(k),
        }
    }

    /// Which of P`p`'s attachments `nth` names.
    fn nth(&self, p: usize, nth: u8) -> Result<usize, String> {
        let n = self.procs[p].atts.len();
        if n == 0 {
            return Err(format!("P{p} has no attachment"));
        }
        Ok(usize::from(nth) % n)
    }

    /// How many processes wait on something `f` accepts.
    fn waiting(&self, f: impl Fn(On) -> bool) -> usize {
        self.procs
            .iter()
            .filter(|p| matches!(p.state, State::Blocked(on) if f(on)))
            .count()
    }

    fn pidfd(&self, p: usize) -> &PidFd {
        self.procs[p]
            .pidfd
            .as_ref()
            .expect("only the driver has no pidfd")
    }

    /// P`p` forks; the child is the next logical process.
    fn fork(&mut self, p: usize) -> Result<String, String> {
        let next = self.procs.len();
        if next > MAX_PROCS {
            return Err(format!("{MAX_PROCS} processes forked already"));
        }
        if p == 0 {
            let (ctx, theirs) = (self.ctx, &self.theirs);
            support::fork_child(|| serve::serve(ctx, next, theirs));
        } else {
            self.send(p, &[serve::FORK, next as i64]);
            match self.recv(p, DEADLINE) {
                Some(s) if s.starts_with("forked ") => {}
                other => return Ok(format!("fork: {other:?}")),
            }
        }
        // The child answers once it runs: after the fork handlers, so
        // ipcns has counted its attachments (Linux counts them in fork()
        // itself, in the parent, before fork returns: see the module doc
        // of procdiff).
        let pid = match self.recv(next, DEADLINE) {
            Some(s) => match s.strip_prefix("ready ").and_then(|p| p.parse::<i32>().ok()) {
                Some(pid) => pid,
                None => return Ok(format!("child said {s:?}")),
            },
            None => return Ok("child never answered".into()),
        };
        let pidfd = match PidFd::open(pid) {
            Ok(fd) => fd,
            Err(e) => return Ok(format!("pidfd_open: {e}")),
        };
        let atts = self.procs[p].atts.clone();
        self.procs.push(Proc {
            pid,
            pidfd: Some(pidfd),
            state: State::Idle,
            atts,
        });
        Ok(format!("P{next}"))
    }

    /// Runs `op` as P`p`: its result text ("blocked" if it sleeps).
    fn call(&mut self, p: usize, op: Op, on: Option<On>, wait_end: bool) -> String {
        self.call_at(p, op, on, wait_end).0
    }

    /// [`Driver::call`], and the address of a new attachment.
    fn call_at(
        &mut self,
        p: usize,
        op: Op,
        on: Option<On>,
        wait_end: bool,
    ) -> (String, Option<usize>) {
        if p == 0 {
            let out = self.ctx.with(|s| op.run(s));
            return (out.text, out.addr);
        }
        let words = op.words();
        self.send(p, &words);
        let now = if wait_end {
            match self.recv(p, DEADLINE) {
                Some(s) => Now::Answered(s),
                None => Now::Stuck("no answer".into()),
            }
        } else {
            self.watch(p)
        };
        match now {
            Now::Answered(s) => {
                let (addr, text) = answer(&s);
                (text, (addr != 0).then_some(addr))
            }
            Now::Asleep => match on {
                Some(on) => {
                    self.procs[p].state = State::Blocked(on);
                    ("blocked".into(), None)
                }
                None => {
                    // Only calls that can block may sleep.
                    self.stuck(p);
                    ("asleep in a call that cannot block".into(), None)
                }
            },
            Now::Ended => {
                self.procs[p].state = State::Ended;
                ("the process ended".into(), None)
            }
            Now::Stuck(why) => {
                self.stuck(p);
                (format!("stuck: {why}"), None)
            }
        }
    }

    /// Kills a process that will not answer (reported by the caller).
    fn stuck(&mut self, p: usize) {
        os::kill(self.procs[p].pid, libc::SIGKILL);
        self.pidfd(p).ended(DEADLINE);
        self.procs[p].state = State::Ended;
    }

    /// Waits until P`p` answers, ends, or sleeps in its call.
    fn watch(&mut self, p: usize) -> Now {
        let start = Instant::now();
        let mut nap = Duration::from_micros(10);
        loop {
            if let Some(s) = self.try_recv(p) {
                return Now::Answered(s);
            }
            if self.pidfd(p).ended(Duration::ZERO) {
                return match self.try_recv(p) {
                    Some(s) => Now::Answered(s),
                    None => Now::Ended,
                };
            }
            if self.asleep_in_call(self.procs[p].pid) {
                // It may have answered and gone back to its channel.
                return match self.try_recv(p) {
                    Some(s) => Now::Answered(s),
                    None => Now::Asleep,
                };
            }
            if start.elapsed() > DEADLINE {
                return Now::Stuck(support::doing(self.procs[p].pid));
            }
            // Back at once if it answers.
            os::readable(self.mine[p - 1].as_raw_fd(), nap);
            nap = (nap * 2).min(Duration::from_micros(500));
        }
    }

    /// Whether `pid` sleeps in a System V call (module doc).
    fn asleep_in_call(&self, pid: i32) -> bool {
        let Some((nr, args)) = os::blocked_in(pid) else {
            return false;
        };
        let in_call = if self.kernel {
            nr == libc::SYS_semtimedop || nr == libc::SYS_msgsnd || nr == libc::SYS_msgrcv
        } else {
            nr == libc::SYS_futex
                && args[1] & 0x7f == libc::FUTEX_WAIT as u64
                && args[2] == IPCNS_SLEEPING
        };
        in_call && os::state(pid) == Some('S')
    }

    /// Watches every blocked process until each has answered or sleeps
    /// (module doc); what the answers were, by process.
    fn settle(&mut self) -> Vec<String> {
        let mut done = Vec::new();
        loop {
            let mut moved = false;
            for p in 1..self.procs.len() {
                if !matches!(self.procs[p].state, State::Blocked(_)) {
                    continue;
                }
                match self.watch(p) {
                    Now::Asleep => {}
                    Now::Answered(s) => {
                        self.procs[p].state = State::Idle;
                        done.push((p, answer(&s).1));
                        moved = true;
                    }
                    Now::Ended => {
                        self.procs[p].state = State::Ended;
                        done.push((p, "ended".into()));
                        moved = true;
                    }
                    Now::Stuck(why) => {
                        self.stuck(p);
                        done.push((p, format!("stuck: {why}")));
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        done.sort_by_key(|(p, _)| *p);
        done.into_iter().map(|(p, s)| format!("P{p} {s}")).collect()
    }

    /// What P0 sees of every object.
    fn look(&self) -> String {
        let mut parts = Vec::new();
        self.ctx.with(|s| {
            for (i, slot) in self.sems.iter().enumerate() {
                if let Some((id, n)) = *slot {
                    parts.push(format!("S{i} {}", op::sem_look(s, id, n)));
                }
            }
            for (i, slot) in self.shms.iter().enumerate() {
                if let Some((id, _)) = *slot {
                    parts.push(format!("H{i} {}", op::shm_stat(s, id)));
                }
            }
            for (i, slot) in self.msgs.iter().enumerate() {
                if let Some(id) = *slot {
                    parts.push(format!("M{i} {}", op::msg_stat(s, id)));
                }
            }
        });
        parts.join(" | ")
    }

    /// `text` with every `@PID` replaced by the name of its process.
    fn named(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find('@') {
            out.push_str(&rest[..at]);
            let digits: String = rest[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            let pid: i32 = digits.parse().unwrap_or(-1);
            let name = match self.procs.iter().position(|p| p.pid == pid) {
                _ if pid == 0 => "0".to_string(),
                Some(k) => format!("P{k}"),
                None => "P?".to_string(),
            };
            out.push_str(&name);
            rest = &rest[at + 1 + digits.len()..];
        }
        out.push_str(rest);
        out
    }

    fn send(&self, p: usize, words: &[i64]) {
        let text: Vec<String> = words.iter().map(i64::to_string).collect();
        let _ = self.mine[p - 1].send(text.join(" ").as_bytes());
    }

    /// The next message from P`p`, waiting at most `limit`.
    fn recv(&self, p: usize, limit: Duration) -> Option<String> {
        let chan = &self.mine[p - 1];
        let _ = chan.set_read_timeout(Some(limit));
        let mut buf = vec![0u8; 64 * 1024];
        let n = chan.recv(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// A message from P`p` if one is there.
    fn try_recv(&self, p: usize) -> Option<String> {
        let chan = &self.mine[p - 1];
        let _ = chan.set_nonblocking(true);
        let mut buf = vec![0u8; 64 * 1024];
        let r = chan.recv(&mut buf);
        let _ = chan.set_nonblocking(false);
        let n = r.ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// Kills every process still there.
    fn finish(&mut self) {
        for p in 1..self.procs.len() {
            if self.procs[p].state != State::Ended {
                os::kill(self.procs[p].pid, libc::SIGKILL);
                self.pidfd(p).ended(DEADLINE);
                self.procs[p].state = State::Ended;
            }
        }
    }
}

/// An operation's answer: the attachment address (0: none) and the text.
fn answer(s: &str) -> (usize, String) {
    match s.split_once(' ') {
        Some((a, text)) => match a.parse::<usize>() {
            Ok(addr) => (addr, text.to_string()),
            Err(_) => (0, s.to_string()),
        },
        None => (0, s.to_string()),
    }
}
