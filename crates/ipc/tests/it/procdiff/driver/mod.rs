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
//! with a thread id), or futex_waitv with that word first, and state `S`. Deaths are seen through pidfds, after
//! the kernel's `exit_sem`/`exit_shm`.
//!
//! What would be decided by the scheduler is kept out: at most one sender
//! blocked per queue (a second one gets IPC_NOWAIT, since a receive wakes
//! every sender that fits and they race), no IPC_SET of a queue with two
//! waiters or more (they retry in any order), and a short semtimedop is
//! waited for before anything else happens. P0 never blocks (IPC_NOWAIT).
//!
//! Reaping: nobody reaps for ipcns. A killed process runs no exit code;
//! the kernel marks its death word in the arena as it dies (`process/
//! death.rs`), and what the driver reads next (GETVAL and the other reads
//! of a set, IPC_STAT of a segment) finishes it first, as Linux finished
//! it in `do_exit` before its pidfd said it was gone. A normal exit goes
//! through `exit_process` in the exiting process.
//!
//! Files: this one (the state, a step's lines, the look), `steps` (what
//! each step does), `talk` (forks, calls, watching and settling, the
//! channels).

mod steps;
mod talk;

use super::op;
use super::os::PidFd;
use super::script::Step;
use super::serve::{Ctx, MAX_PROCS};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// How long anything may take before it is reported as stuck.
const DEADLINE: Duration = Duration::from_secs(10);

/// ipcns's `wait::SLEEPING`: the value a sleeper's futex waits on.
const IPCNS_SLEEPING: u64 = 1;

/// The timeout of `script::Wait::Long`.
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
    /// A driver on `ctx`.
    pub fn new(ctx: &'a Ctx<'a>, log: &'a mut dyn FnMut(String)) -> std::io::Result<Driver<'a>> {
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
}
