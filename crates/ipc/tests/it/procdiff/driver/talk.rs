//! Talking to the logical processes: forking them, sending a call and
//! seeing it answered or asleep, settling after a step (module doc of
//! `driver`), and the channels.

use super::{DEADLINE, Driver, IPCNS_SLEEPING, Now, On, Proc, State};
use crate::procdiff::op::Op;
use crate::procdiff::os::{self, PidFd};
use crate::procdiff::serve::{self, MAX_PROCS};
use crate::support;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

impl Driver<'_> {
    /// P`p` forks; the child is the next logical process.
    pub(super) fn fork(&mut self, p: usize) -> Result<String, String> {
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
    pub(super) fn call(&mut self, p: usize, op: Op, on: Option<On>, wait_end: bool) -> String {
        self.call_at(p, op, on, wait_end).0
    }

    /// [`Driver::call`], and the address of a new attachment.
    pub(super) fn call_at(
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
    pub(super) fn stuck(&mut self, p: usize) {
        os::kill(self.procs[p].pid, libc::SIGKILL);
        self.pidfd(p).ended(DEADLINE);
        self.procs[p].state = State::Ended;
    }

    /// Waits until P`p` answers, ends, or sleeps in its call.
    pub(super) fn watch(&mut self, p: usize) -> Now {
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
    pub(super) fn asleep_in_call(&self, pid: i32) -> bool {
        let Some((nr, args)) = os::blocked_in(pid) else {
            return false;
        };
        let in_call = if self.kernel {
            nr == libc::SYS_semtimedop || nr == libc::SYS_msgsnd || nr == libc::SYS_msgrcv
        } else {
            // FUTEX_WAIT on its record's state word, or futex_waitv with
            // that word first (the death words of the set's SEM_UNDO
            // holders after it: `wait.rs`), expecting SLEEPING.
            (nr == libc::SYS_futex
                && args[1] & 0x7f == libc::FUTEX_WAIT as u64
                && args[2] == IPCNS_SLEEPING)
                || (nr == libc::SYS_futex_waitv
                    && os::read_u64(pid, args[0]) == Some(IPCNS_SLEEPING))
        };
        in_call && os::state(pid) == Some('S')
    }

    /// Watches every blocked process until each has answered or sleeps
    /// (module doc); what the answers were, by process.
    pub(super) fn settle(&mut self) -> Vec<String> {
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

    pub(super) fn send(&self, p: usize, words: &[i64]) {
        let text: Vec<String> = words.iter().map(i64::to_string).collect();
        let _ = self.mine[p - 1].send(text.join(" ").as_bytes());
    }

    /// The next message from P`p`, waiting at most `limit`.
    pub(super) fn recv(&self, p: usize, limit: Duration) -> Option<String> {
        let chan = &self.mine[p - 1];
        let _ = chan.set_read_timeout(Some(limit));
        let mut buf = vec![0u8; 64 * 1024];
        let n = chan.recv(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// A message from P`p` if one is there.
    pub(super) fn try_recv(&self, p: usize) -> Option<String> {
        let chan = &self.mine[p - 1];
        let _ = chan.set_nonblocking(true);
        let mut buf = vec![0u8; 64 * 1024];
        let r = chan.recv(&mut buf);
        let _ = chan.set_nonblocking(false);
        let n = r.ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// Kills every process still there.
    pub(super) fn finish(&mut self) {
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
pub(super) fn answer(s: &str) -> (usize, String) {
    match s.split_once(' ') {
        Some((a, text)) => match a.parse::<usize>() {
            Ok(addr) => (addr, text.to_string()),
            Err(_) => (0, s.to_string()),
        },
        None => (0, s.to_string()),
    }
}
