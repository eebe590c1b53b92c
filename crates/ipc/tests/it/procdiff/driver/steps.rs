//! What each step of a script does, on the driver's side: the call it
//! makes or sends, with its arguments resolved (ids, attachment
//! addresses), and the bookkeeping of slots and attachments.

use super::talk::answer;
use super::{Att, DEADLINE, Driver, LONG_MS, On, State};
use crate::procdiff::op::Op;
use crate::procdiff::os;
use crate::procdiff::script::{MsgCmd, SemCmd, Step, Wait};
use crate::procdiff::serve;
use ipcns::abi::*;
use ipcns::shm::attach::SHM_RDONLY;

impl Driver<'_> {
    /// Does a step: its result, or why it is skipped.
    pub(super) fn act(&mut self, k: usize, st: &Step) -> Result<String, String> {
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
}
