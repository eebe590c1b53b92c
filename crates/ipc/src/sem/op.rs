//! `semop` and `semtimedop` (ipc/sem.c `do_semtimedop`,
//! `perform_atomic_semop`, `update_queue`, `count_semcnt`).
//!
//! # Protocol
//! Checks that need no lock (nsops, semopm, timeout), then the lookup
//! without the registry lock, EFBIG, permission; lock the set; check it is
//! the set looked up (EIDRM); try the whole array on the current values
//! (all or nothing). Done: commit, then complete what sleepers now can
//! (`update_queue`), oldest first. Blocked with IPC_NOWAIT on the blocking
//! operation: EAGAIN. Otherwise queue a [`wait::Waiter`] carrying a copy
//! of the operations, unlock, and sleep until a waker has completed the
//! operation for us (its result is ours), the deadline passes (EAGAIN) or
//! a signal handler runs (EINTR).
//!
//! A commit that changes one semaphore is one store (value and pid share
//! a word). One that changes several, or completes a sleeper, goes through
//! the set's roll-forward journal: the new values and the sleeper are
//! written first, so a holder killed midway is finished by the next
//! locker, never half applied and never applied twice.
//!
//! Lock state: takes and releases the set's lock (and the heap lock inside
//! it); nothing held on entry or exit.

use super::{JOURNAL_SEMOP, SemKind, sems, undo};
use crate::abi::{self, sembuf};
use crate::creds::Cred;
use crate::errno::{Errno, SysResult};
use crate::limits::{SEMAEM, SEMVMX};
use crate::object::{Counted, Sem, SemSlot, bump};
use crate::perm::{self, S_IRUGO, S_IWUGO};
use crate::registry::{Found, Kind, lock_object, obtain, still_valid};
use crate::session::Session;
use crate::time::now;
use crate::wait::{self, Slept, Waiter};
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicU16, AtomicU64};

/// What trying an operation array on the current values gives.
enum Attempt {
    /// Every operation can be done: the first `n` entries of the buffer
    /// hold the new values, one per semaphore touched (`(sem_num, value,
    /// adjustment)`, in first-touch order; the adjustment is the caller's
    /// undo value for it, when it has one).
    Done(usize),
    /// The operation on `sem_num` must wait: for zero, or to decrement.
    Block { sem_num: u16, zero: bool },
    /// The array fails as a whole.
    Fail(Errno),
}

/// `perform_atomic_semop`: the array on the current values, without
/// changing them. ERANGE above SEMVMX, or for an undo adjustment out of
/// `-(SEMAEM + 1)..=SEMAEM`; blocking: EAGAIN when the blocking operation
/// has IPC_NOWAIT. `adj` is the caller's undo entry for the set.
/// One entry per semaphore an array touches.
type Touch = (u16, i32, i32);

/// A buffer for [`attempt`]: on the stack for up to 8 operations (the
/// common case costs no allocation), else on the heap.
struct Scratch {
    stack: [Touch; 8],
    heap: Vec<Touch>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            stack: [(0, 0, 0); 8],
            heap: Vec::new(),
        }
    }

    /// Room for `n` operations; ENOMEM when it cannot be had (a sleeper's
    /// count comes from the arena: a failed allocation must be an errno,
    /// never an abort).
    fn for_ops(&mut self, n: usize) -> SysResult<&mut [Touch]> {
        if n <= self.stack.len() {
            Ok(&mut self.stack[..])
        } else {
            self.heap
                .try_reserve_exact(n.saturating_sub(self.heap.len()))
                .map_err(|_| Errno::ENOMEM)?;
            self.heap.resize(n, (0, 0, 0));
            Ok(&mut self.heap[..])
        }
    }
}

fn attempt(sems: &[Sem], sops: &[sembuf], adj: Option<&[AtomicU16]>, buf: &mut [Touch]) -> Attempt {
    let mut len = 0usize;
    for sop in sops {
        let n = sop.sem_num;
        let Some(sem) = sems.get(usize::from(n)) else {
            // The set shrank under us: only a corrupt arena does that.
            return Attempt::Fail(Errno::EUCLEAN);
        };
        let new = &mut buf[..len];
        let slot = new.iter().position(|&(m, _, _)| m == n);
        let (cur, cur_adj) = match slot {
            Some(i) => (new[i].1, new[i].2),
            None => (
                sem.val(),
                adj.and_then(|a| a.get(usize::from(n)))
                    .map_or(0, |x| i32::from(x.load(Relaxed) as i16)),
            ),
        };
        let (result, new_adj) = match step(sop, cur, cur_adj) {
            Ok(r) => r,
            Err(a) => return a,
        };
        match slot {
            Some(i) => {
                new[i].1 = result;
                new[i].2 = new_adj;
            }
            None => {
                // `buf` holds at least one entry per operation.
                let Some(e) = buf.get_mut(len) else {
                    return Attempt::Fail(Errno::E2BIG);
                };
                *e = (n, result, new_adj);
                len += 1;
            }
        }
    }
    Attempt::Done(len)
}

/// One operation of an array on the value `cur` (and the caller's undo
/// adjustment `cur_adj`), as perform_atomic_semop's loop body: the new
/// value and adjustment, or what the array comes to (it blocks or fails).
#[inline(always)]
fn step(sop: &sembuf, cur: i32, cur_adj: i32) -> Result<(i32, i32), Attempt> {
    let would_block = |zero| {
        if sop.sem_flg & abi::IPC_NOWAIT as i16 != 0 {
            Attempt::Fail(Errno::EAGAIN)
        } else {
            Attempt::Block {
                sem_num: sop.sem_num,
                zero,
            }
        }
    };
    // "if (!sem_op && result) goto would_block;"
    if sop.sem_op == 0 && cur != 0 {
        return Err(would_block(true));
    }
    // `cur` comes from the arena and may be anything in a corrupt one:
    // saturate rather than overflow (a panic in debug builds).
    let result = cur.saturating_add(i32::from(sop.sem_op));
    // "if (result < 0) goto would_block;"
    if result < 0 {
        return Err(would_block(false));
    }
    // "if (result > SEMVMX) goto out_of_range;" (-ERANGE)
    if result > SEMVMX {
        return Err(Attempt::Fail(Errno::ERANGE));
    }
    // "undo = un->semadj[sop->sem_num] - sem_op; if (undo < (-SEMAEM - 1)
    // || undo > SEMAEM) goto out_of_range;"
    let mut new_adj = cur_adj;
    if sop.sem_flg & abi::SEM_UNDO != 0 {
        new_adj = cur_adj - i32::from(sop.sem_op);
        if !(-(SEMAEM + 1)..=SEMAEM).contains(&new_adj) {
            return Err(Attempt::Fail(Errno::ERANGE));
        }
    }
    Ok((result, new_adj))
}

/// Writes the new values (and `pid` as every touched semaphore's sempid)
/// and the undo entry's new adjustments, completing `waiter` if given.
/// Object lock held.
fn commit(
    a: &Session,
    s: &SemSlot,
    sems: &[Sem],
    new: &[(u16, i32, i32)],
    pid: i32,
    waiter: u64,
    entry: u64,
) -> SysResult<()> {
    if waiter == 0 && entry == 0 && new.len() == 1 {
        let (n, v, _) = new[0];
        sems.get(usize::from(n)).ok_or(Errno::EUCLEAN)?.set(v, pid);
        return Ok(());
    }
    // The journal: the waiter and its ticket, the undo entry, every
    // semaphore's value and pid as they are to be, then every adjustment
    // as it is to be.
    let n = sems.len();
    let words = 3 + 2 * n;
    let journal = a.alloc(words as u64 * 8)?;
    let block: &[AtomicU64] = a.view_slice(journal, words)?;
    block[0].store(waiter, Relaxed);
    let ticket = wait::at(a, waiter).map_or(0, |w| w.sem().ticket().load(Relaxed));
    block[1].store(u64::from(ticket), Relaxed);
    block[2].store(entry, Relaxed);
    let (vals, adjs) = block[3..].split_at(n);
    for (w, sem) in vals.iter().zip(sems) {
        let (v, p) = (sem.val(), sem.pid());
        w.store(u64::from(v as u32) | (u64::from(p as u32) << 32), Relaxed);
    }
    let adj = if entry != 0 {
        Some(undo::adj(a, entry)?)
    } else {
        None
    };
    for (w, x) in adjs.iter().zip(adj.unwrap_or_default()) {
        w.store(u64::from(x.load(Relaxed)), Relaxed);
    }
    for &(m, v, d) in new {
        if let Some(w) = vals.get(usize::from(m)) {
            w.store(u64::from(v as u32) | (u64::from(pid as u32) << 32), Relaxed);
        }
        if let Some(w) = adjs.get(usize::from(m)) {
            w.store(u64::from(d as i16 as u16), Relaxed);
        }
    }
    s.journal_len.store(words as u32, Relaxed);
    s.journal_off.store(journal, Relaxed);
    crate::fault::step();
    s.journal_op.store(JOURNAL_SEMOP, Relaxed);
    crate::fault::step();
    if waiter != 0 {
        return SemKind::repair_object(a, s);
    }
    // No sleeper to complete: the journal's changes made here, as its
    // roll-forward would make them (a death half way leaves the journal,
    // which the next holder rolls forward whole), without looking the set
    // and the entry up again; then the journal closed.
    for &(m, v, d) in new {
        if let Some(sem) = sems.get(usize::from(m)) {
            sem.set(v, pid);
        }
        crate::fault::step();
        if let Some(x) = adj.and_then(|x| x.get(usize::from(m))) {
            x.store(d as i16 as u16, Relaxed);
        }
    }
    super::clear_journal(a, s);
    Ok(())
}

/// The pid a sleeper's operation records (after its operations, see
/// `enqueue`); the sleeping thread's process if that word cannot be read.
fn caller_pid(a: &Session, w: &Waiter) -> i32 {
    caller(a, w).0
}

/// The pid and thread (0: the sleeping thread itself) of a sleeper's
/// caller (see `enqueue`).
fn caller(a: &Session, w: &Waiter) -> (i32, i32) {
    let n = w.sem().nops().load(Relaxed);
    let off = w.sem().ops().load(Relaxed);
    let at = off.saturating_add(u64::from(n) * 8);
    if n == 0 || !a.in_heap(off, wait::ops_bytes(n)) {
        return (w.pid.load(Relaxed), 0);
    }
    a.view_slice::<AtomicU64>(at, 1)
        .ok()
        .and_then(|v| {
            v.first().map(|p| {
                let p = p.load(Relaxed);
                (p as u32 as i32, (p >> 32) as u32 as i32)
            })
        })
        .unwrap_or_else(|| (w.pid.load(Relaxed), 0))
}

/// Whether a supervisor's thread sleeps for a caller that is gone
/// (killed while it slept; `acting.rs`): the supervisor ends that sleep
/// soon, but until then the sleeper is no caller's, as the kernel's
/// sleeper leaves the queue as its task dies. Costs a /proc read, only
/// for records whose caller is not the sleeping thread's process.
fn caller_gone(a: &Session, w: &Waiter) -> bool {
    let (caller, tid) = caller(a, w);
    if caller == w.pid.load(Relaxed) {
        return false;
    }
    if tid > 0 && !crate::lock::thread_answers(caller, tid as u32) {
        return true;
    }
    crate::creds::start_time(caller as u32)
        .is_none_or(|start| crate::lock::process_ending(caller, start))
}

/// The operations saved in a sleeper's record.
fn saved_ops(a: &Session, w: &Waiter) -> SysResult<Vec<sembuf>> {
    let n = w.sem().nops().load(Relaxed);
    let off = w.sem().ops().load(Relaxed);
    // No caller queued more operations than semopm allows (its default at
    // least): a larger count is a corrupt record, whose copy (and every
    // waker's pass over it) would cost in proportion to a hostile number.
    // (A negative semopm sets no limit: the unsigned compare of semop.)
    let semopm = (a.header().limits.semopm.load(Relaxed) as u32).max(crate::limits::SEMOPM as u32);
    if n > semopm {
        return Err(Errno::EUCLEAN);
    }
    if !a.in_heap(off, wait::ops_bytes(n)) {
        return Err(Errno::EUCLEAN);
    }
    let words: &[AtomicU64] = a.view_slice(off, n as usize)?;
    // Sized by the arena: an allocation that fails is ENOMEM, never an
    // abort.
    let mut out = Vec::new();
    out.try_reserve_exact(words.len())
        .map_err(|_| Errno::ENOMEM)?;
    out.extend(words.iter().map(|w| {
        let v = w.load(Relaxed);
        sembuf {
            sem_num: v as u16,
            sem_op: (v >> 16) as u16 as i16,
            sem_flg: (v >> 32) as u16 as i16,
        }
    }));
    Ok(out)
}

/// One sleeper tried again: completed, failed (both end its wait), or
/// still blocked (its blocking operation recorded). Dead sleepers are
/// dropped. Returns whether it left the queue having changed values.
enum Retry {
    Stays,
    Left { altered: bool, sops: Vec<sembuf> },
}

fn retry(a: &Session, s: &SemSlot, sems: &[Sem], off: u64) -> SysResult<Retry> {
    let w = wait::at(a, off)?;
    let sops = match saved_ops(a, w) {
        Ok(sops) => sops,
        // A record we cannot read (or whose operations cannot be copied
        // here): end its wait.
        Err(e) => {
            let status = if e == Errno::ENOMEM {
                libc::ENOMEM
            } else {
                libc::EIDRM
            };
            wait::complete(a, &s.queue, off, status)?;
            return Ok(Retry::Left {
                altered: false,
                sops: Vec::new(),
            });
        }
    };
    let entry = w.sem().undo_entry().load(Relaxed);
    let adj = if entry != 0 {
        let live = undo::head(a, entry).is_ok_and(|h| h.applied.load(Relaxed) == 0);
        match undo::adj(a, entry) {
            Ok(adj) if live => Some(adj),
            _ => {
                // Its undo entry was applied (its process ended) or is no
                // entry: the operation must not happen without it.
                wait::complete(a, &s.queue, off, libc::EINTR)?;
                return Ok(Retry::Left {
                    altered: false,
                    sops: Vec::new(),
                });
            }
        }
    } else {
        None
    };
    let mut scratch = Scratch::new();
    let Ok(buf) = scratch.for_ops(sops.len()) else {
        wait::complete(a, &s.queue, off, libc::ENOMEM)?;
        return Ok(Retry::Left {
            altered: false,
            sops: Vec::new(),
        });
    };
    let outcome = attempt(sems, &sops, adj, buf);
    if let Attempt::Block { sem_num, zero } = outcome {
        w.sem()
            .blocking()
            .store(u32::from(sem_num) | if zero { 1 << 31 } else { 0 }, Relaxed);
        return Ok(Retry::Stays);
    }
    // A sleeper with a live undo entry needs no check: its process's end
    // applies that entry under this same lock, after this operation (which
    // it then takes back) or before it (and the entry is no longer live).
    let alive = if adj.is_some() {
        w.state.load(Relaxed) != crate::park::ABANDONED
    } else {
        wait::sleeper_alive(w)
    };
    if alive && caller_gone(a, w) {
        // A supervisor's thread sleeping for a caller that is gone: its
        // wait ends (the thread lives, and unlinks and frees the record
        // itself), the operation not made, as the kernel's sleeper
        // leaves the queue as its task dies.
        wait::complete(a, &s.queue, off, libc::EINTR)?;
        return Ok(Retry::Left {
            altered: false,
            sops: Vec::new(),
        });
    }
    if !alive {
        wait::drop_dead(a, &s.queue, off)?;
        return Ok(Retry::Left {
            altered: false,
            sops: Vec::new(),
        });
    }
    match outcome {
        Attempt::Done(n) => {
            commit(a, s, sems, &buf[..n], caller_pid(a, w), off, entry)?;
            s.otime.store(now(), Relaxed);
            bump(s.first_count());
            let altered = sops.iter().any(|o| o.sem_op != 0);
            Ok(Retry::Left { altered, sops })
        }
        Attempt::Fail(e) => {
            wait::complete(a, &s.queue, off, e.raw())?;
            Ok(Retry::Left {
                altered: false,
                sops: Vec::new(),
            })
        }
        Attempt::Block { .. } => Ok(Retry::Stays),
    }
}

/// The saved operations of a queued record, if readable.
fn ops_of(a: &Session, off: u64) -> Option<Vec<sembuf>> {
    wait::at(a, off).ok().and_then(|w| saved_ops(a, w).ok())
}

/// `do_smart_wakeup_zero`: the sleepers waiting for zero (and changing
/// nothing) on the semaphores in `touched` that are now 0 (all of them
/// when `touched` is `None`: SETVAL, SETALL, exit), single operations
/// first, then, if any of those semaphores got to 0, the complex ones.
/// Object lock held.
fn wake_zero(a: &Session, s: &SemSlot, sems: &[Sem], touched: Option<&[sembuf]>) -> SysResult<()> {
    let zeros: Vec<u16> = match touched {
        Some(t) => t
            .iter()
            .map(|o| o.sem_num)
            .filter(|&n| sems.get(usize::from(n)).is_some_and(|x| x.val() == 0))
            .collect(),
        None => (0..sems.len() as u16)
            .filter(|&n| sems[usize::from(n)].val() == 0)
            .collect(),
    };
    if zeros.is_empty() {
        return Ok(());
    }
    let is_const = |ops: &[sembuf]| ops.iter().all(|o| o.sem_op == 0);
    // wake_const_ops(sma, num) for each semaphore that got to 0.
    for &num in &zeros {
        for off in wait::snapshot(a, &s.queue) {
            match ops_of(a, off) {
                Some(ops) if ops.len() == 1 && is_const(&ops) && ops[0].sem_num == num => {
                    retry(a, s, sems, off)?;
                }
                _ => {}
            }
        }
    }
    // wake_const_ops(sma, -1): the complex ones.
    for off in wait::snapshot(a, &s.queue) {
        match ops_of(a, off) {
            Some(ops) if ops.len() > 1 && is_const(&ops) => {
                retry(a, s, sems, off)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// `do_smart_update` / `update_queue`: after the values changed (on the
/// semaphores in `touched`, or all of them), completes every sleeper whose
/// operation can now be done (or now fails): those waiting for zero
/// first, then those that change values, oldest first, starting over
/// after each completion that changed values (which may wake more
/// zero-waiters). Sleepers found dead are dropped without their operation.
/// Object lock held.
pub(super) fn update_queue(a: &Session, s: &SemSlot, touched: Option<&[sembuf]>) -> SysResult<()> {
    // No sleeper: nothing to complete (the common case, without a walk).
    if s.queue.load(Relaxed) == 0 {
        return Ok(());
    }
    let sems = sems(a, s)?;
    wake_zero(a, s, sems, touched)?;
    // The semaphore (and kind of wait) of the last sleeper completed.
    let mut handed: Option<u32> = None;
    // Each pass either completes or drops a sleeper, or ends.
    'scan: for _ in 0..=wait::snapshot(a, &s.queue).len() {
        for off in wait::snapshot(a, &s.queue) {
            match ops_of(a, off) {
                Some(ops) if ops.iter().all(|o| o.sem_op == 0) => continue,
                _ => {}
            }
            let blocking = wait::at(a, off).map(|w| w.sem().blocking().load(Relaxed));
            match retry(a, s, sems, off)? {
                Retry::Stays => {}
                Retry::Left { altered, sops } => {
                    handed = blocking.ok().or(handed);
                    if altered {
                        wake_zero(a, s, sems, Some(&sops))?;
                    }
                    continue 'scan;
                }
            }
        }
        break;
    }
    // A sleeper was handed what it waited for: the sleeper now first, if
    // it waits the same way on the same semaphore (a lock's next holder),
    // spins for its turn (woken now, not at its turn: a sleeper's
    // wake-up, tens of µs on a virtual machine whose other cpu idles, is
    // then taken off the handover). Only that one: more spinners took
    // the cpus from the processes they wait for (8 processes on one
    // semaphore of 2 cpus: 40,000 pairs/s nudging 3, 65,000-74,000
    // nudging 1, 51,000-59,000 none), and a sleeper on another semaphore
    // (stress-ng's switch pairs on one set) may wait long.
    if let Some(b) = handed
        && let Ok(w) = wait::at(a, s.queue.load(Relaxed))
        && w.sem().blocking().load(Relaxed) == b
    {
        wait::nudge(w);
    }
    Ok(())
}

/// `count_semcnt`: the sleepers whose blocking operation is on `semnum`,
/// waiting for zero (`zero`) or to decrement. Object lock held.
pub(super) fn count_waiting(a: &Session, s: &SemSlot, semnum: u16, zero: bool) -> i32 {
    // A sleeper killed while queued is not waiting any more (Linux unlinks
    // it as the task dies).
    wait::prune(a, &s.queue);
    let want = u32::from(semnum) | if zero { 1 << 31 } else { 0 };
    wait::snapshot(a, &s.queue)
        .into_iter()
        .filter_map(|off| wait::at(a, off).ok())
        .filter(|w| w.sem().blocking().load(Relaxed) == want && !caller_gone(a, w))
        .count() as i32
}

/// A validated `semtimedop` timeout, in nanoseconds.
fn timeout_ns(t: &libc::timespec) -> SysResult<u64> {
    // timespec64_valid: "if (ts->tv_sec < 0) return false; if ((unsigned
    // long)ts->tv_nsec >= NSEC_PER_SEC) return false;"
    if t.tv_sec < 0 || !(0..1_000_000_000).contains(&t.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok((t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64))
}

/// What a call with SEM_UNDO that fails with `e` (EFBIG, EACCES) leaves:
/// do_semtimedop runs `find_alloc_undo` before those checks (and it checks
/// no permission), so the caller has an undo entry for the set all the
/// same, and its exit sets the set's otime (`exit_sem`). An error of the
/// entry's own (the set removed meanwhile: EIDRM) comes first, as there.
fn undo_first(a: &Session, f: &Found<'_, SemSlot>, semid: i32, undos: bool, e: Errno) -> Errno {
    if !undos {
        return e;
    }
    let made = (|| {
        let _g = locked!(lock_object::<SemKind>(a, f.slot));
        // find_alloc_undo: "if (!ipc_valid_object(&sma->sem_perm)) ...
        // un = ERR_PTR(-EIDRM);"
        still_valid(f)?;
        undo::find_or_make(a, f.slot, semid, f.generation)
    })();
    made.err().unwrap_or(e)
}

/// [`Namespace::semop`](crate::Namespace::semop)'s work.
pub(crate) fn semop(a: &Session, cred: &Cred, semid: i32, sops: &[sembuf]) -> SysResult<i32> {
    semtimedop(a, cred, semid, sops, None)
}

/// [`Namespace::semtimedop`](crate::Namespace::semtimedop)'s work.
pub(crate) fn semtimedop(
    a: &Session,
    cred: &Cred,
    semid: i32,
    sops: &[sembuf],
    timeout: Option<&libc::timespec>,
) -> SysResult<i32> {
    // The call starts: a signal handler noted from now on makes a
    // sleep of this call fail with EINTR.
    semtimedop_since(a, wait::Mark::now(), cred, semid, sops, timeout)
}

/// [`Namespace::semtimedop_since`](crate::Namespace::semtimedop_since)'s work.
pub(crate) fn semtimedop_since(
    a: &Session,
    mark: wait::Mark,
    cred: &Cred,
    semid: i32,
    sops: &[sembuf],
    timeout: Option<&libc::timespec>,
) -> SysResult<i32> {
    let lim = &a.header().limits;
    // do_semtimedop: "if (nsops > ns->sc_semopm) return -E2BIG;" (an
    // unsigned compare: a negative semopm sets no limit), then "if
    // (nsops < 1) return -EINVAL;"; __do_semtimedop: "if (nsops < 1 ||
    // semid < 0) return -EINVAL;".
    if sops.len() as u64 > u64::from(lim.semopm.load(Relaxed) as u32) {
        return Err(Errno::E2BIG);
    }
    if sops.is_empty() || semid < 0 {
        return Err(Errno::EINVAL);
    }
    let budget = timeout.map(timeout_ns).transpose()?;
    let deadline = budget.map(|b| wait::now_ns().saturating_add(b));
    // The locks this call waits on are waited for no longer than its
    // timeout, nor than NOWAIT_LOCK_NS with IPC_NOWAIT (a stopped or
    // hostile holder must not hold such a call): then EAGAIN, as the
    // timeout or the wait would have answered.
    let nowait = sops.iter().any(|o| o.sem_flg & abi::IPC_NOWAIT as i16 != 0);
    let _bound = crate::lock::bound_for(deadline, nowait);
    semtimedop_bounded(a, cred, semid, sops, (deadline, mark)).map_err(|e| {
        if e.0 == libc::ETIMEDOUT {
            Errno::EAGAIN
        } else {
            e
        }
    })
}

fn semtimedop_bounded(
    a: &Session,
    cred: &Cred,
    semid: i32,
    sops: &[sembuf],
    when: (Option<u64>, wait::Mark),
) -> SysResult<i32> {
    let max = sops.iter().map(|o| o.sem_num).max().unwrap_or(0);
    let undos = sops.iter().any(|o| o.sem_flg & abi::SEM_UNDO != 0);
    let alter = sops.iter().any(|o| o.sem_op != 0);
    let f = obtain::<SemKind>(a, semid)?;
    let s = f.slot;
    // find_alloc_undo's first half, before any set lock: the caller's
    // process record (a newcomer's first look reaps dead processes,
    // whose undo entries take other sets' locks).
    if undos {
        a.me()?;
    }
    // "if (max >= sma->sem_nsems) { err = -EFBIG; ...}"
    if u32::from(max) >= s.nsems.load(Relaxed) {
        return Err(undo_first(a, &f, semid, undos, Errno::EFBIG));
    }
    // "if (ipcperms(ns, &sma->sem_perm, alter ? S_IWUGO : S_IRUGO))"
    if let Err(e) = perm::ipcperms(cred, &s.head, if alter { S_IWUGO } else { S_IRUGO }) {
        return Err(undo_first(a, &f, semid, undos, e));
    }
    let mut reaped = false;
    loop {
        match semtimedop_try(a, cred, &f, semid, sops, (max, undos, alter, reaped), when) {
            // Taken off the queue by an execve of ours that failed:
            // the call starts over (as it would have, never queued).
            Err(e) if e == RESTART => continue,
            // It would wait or fail while a SEM_UNDO holder of the set
            // died: its adjustments first, as the kernel applied them at
            // its death, then once more.
            Err(e) if e == DEAD_HOLDERS => {
                super::reap_dead_holders(a, semid);
                reaped = true;
            }
            r => return r,
        }
    }
}

/// How long a sleeper woken by a holder's death word waits to see the
/// holder's process on its way out (`Session::reap_marked`).
const DEATH_PATIENCE_NS: u64 = 20_000_000;

/// The internal result of a try that would wait or fail with EAGAIN
/// while a SEM_UNDO holder of the set may have died (its death word
/// marked): an errno no call returns.
const DEAD_HOLDERS: Errno = Errno(513);

/// One try of [`Namespace::semtimedop`] after its checks: lock, do or
/// queue, sleep. RESTART when the sleep was cancelled; DEAD_HOLDERS when
/// it would wait or fail with EAGAIN while a SEM_UNDO holder of the set
/// may have died, unless `reaped` (they were finished before this try).
fn semtimedop_try(
    a: &Session,
    cred: &Cred,
    f: &Found<'_, SemSlot>,
    semid: i32,
    sops: &[sembuf],
    (max, undos, alter, reaped): (u16, bool, bool, bool),
    (deadline, mark): (Option<u64>, wait::Mark),
) -> SysResult<i32> {
    let s = f.slot;
    // Whether a SEM_UNDO holder that died stands in the way (tried once).
    let dead_holders =
        || !reaped && s.undos.load(Relaxed) != 0 && !undo::marked_holders(a, s).is_empty();
    let (waiter, first, deaths) = {
        let _g = locked!(lock_object::<SemKind>(a, s));
        // "if (!ipc_valid_object(&sma->sem_perm)) goto out_unlock; (-EIDRM)"
        still_valid(f)?;
        let sems = sems(a, s)?;
        if usize::from(max) >= sems.len() {
            return Err(Errno::EIDRM);
        }
        // One operation without undo (most calls: a lock taken or given,
        // a wait for zero): tried on its semaphore directly, without the
        // array's buffer and journal; what blocks goes the common way.
        if let ([sop], false) = (sops, undos) {
            let sem = sems.get(usize::from(sop.sem_num)).ok_or(Errno::EIDRM)?;
            match step(sop, sem.val(), 0) {
                Ok((v, _)) => {
                    sem.set(v, cred.pid);
                    return done(a, s, sops, alter);
                }
                Err(Attempt::Fail(e)) if e == Errno::EAGAIN && dead_holders() => {
                    return Err(DEAD_HOLDERS);
                }
                Err(Attempt::Fail(e)) => return Err(e),
                Err(_) => {}
            }
        }
        // find_alloc_undo: the caller's entry for this set.
        let entry = if undos {
            undo::find_or_make(a, s, semid, f.generation)?
        } else {
            0
        };
        let adj = if entry != 0 {
            Some(undo::adj(a, entry)?)
        } else {
            None
        };
        let mut scratch = Scratch::new();
        let buf = scratch.for_ops(sops.len())?;
        match attempt(sems, sops, adj, buf) {
            Attempt::Done(n) => {
                commit(a, s, sems, &buf[..n], cred.pid, 0, entry)?;
                return done(a, s, sops, alter);
            }
            Attempt::Fail(e) if e == Errno::EAGAIN && dead_holders() => {
                return Err(DEAD_HOLDERS);
            }
            Attempt::Fail(e) => return Err(e),
            Attempt::Block { .. } if dead_holders() => return Err(DEAD_HOLDERS),
            Attempt::Block { sem_num, zero } => {
                let off = enqueue(a, s, cred, sops, sem_num, zero, entry)?;
                if let Some(c) = s.second_count() {
                    bump(c);
                }
                // Read under the lock: whether ours is among the records
                // a waker completes next (`wait::sleep`), and the death
                // words of the set's SEM_UNDO holders, whose deaths may
                // complete it (`process/death.rs`).
                let first = wait::among_first(a, &s.queue, off, wait::SPINNERS);
                (off, first, undo::holder_deaths(a, s))
            }
        }
    };
    sleep_queued(a, s, waiter, first, (deadline, mark), &deaths)
}

/// The end of a semop done by its caller: `otime`, then the sleepers its
/// change may let proceed (`alter`). Object lock held.
#[inline(always)]
fn done(a: &Session, s: &SemSlot, sops: &[sembuf], alter: bool) -> SysResult<i32> {
    s.otime.store(now(), Relaxed);
    bump(s.first_count());
    if alter {
        // Our operation is done: a failure to complete the sleepers (no
        // memory for a journal, a corrupt record) is not ours to report,
        // and they are tried again at the next change.
        let _ = update_queue(a, s, Some(sops));
    }
    Ok(0)
}

/// The sleep of a call [`semtimedop_try`] queued (record `waiter`, among
/// the first its waker completes if `first`), and its end. Apart from the
/// try, and never inlined: the common path, which never sleeps, keeps
/// its registers and a small stack frame.
#[inline(never)]
fn sleep_queued(
    a: &Session,
    s: &SemSlot,
    waiter: u64,
    first: bool,
    (deadline, mark): (Option<u64>, wait::Mark),
    deaths: &[(u32, &core::sync::atomic::AtomicU32)],
) -> SysResult<i32> {
    let w = wait::at(a, waiter)?;
    // A dead SEM_UNDO holder's adjustment may be what this sleeper waits
    // for: the holders whose death words are marked are finished at once
    // (the kernel wakes the sleeper then); now and then, every dead
    // process.
    let holders: Vec<u32> = deaths.iter().map(|&(idx, _)| idx).collect();
    let words: Vec<&core::sync::atomic::AtomicU32> = deaths.iter().map(|&(_, w)| w).collect();
    let mut tick = |dying: u128| {
        // Those whose words were just marked (the kernel woke us in the
        // middle of their deaths) are waited for; the rest looked at.
        let mut n = 0;
        for (i, &idx) in holders.iter().enumerate() {
            let patience = if i < 128 && dying & (1 << i) != 0 {
                DEATH_PATIENCE_NS
            } else {
                0
            };
            n += a.reap_marked(&[idx], patience).unwrap_or(0);
        }
        if n == 0 {
            let _ = a.reap();
        }
    };
    let result = match wait::sleep(
        w,
        deadline,
        mark,
        first,
        &mut tick,
        &words,
        wait::OnStop::Eintr,
    ) {
        Slept::Done(status) => status,
        gave_up => {
            // Leave the queue, unless a waker finished us meanwhile
            // (the lock waited for past the call's deadline, but not
            // for long: a lock kept from us, by a stopped or hostile
            // participant, makes us abandon the record instead, for
            // its next holder to drop; a cancelled sleep waits: the
            // process is frozen for an execve).
            let g = if gave_up == Slept::Cancelled {
                crate::registry::lock_object_unbounded::<SemKind>(a, s)
            } else {
                crate::registry::lock_object_until::<SemKind>(
                    a,
                    s,
                    wait::now_ns().saturating_add(LEAVE_NS),
                )
            };
            let _g = match g {
                Ok(g) => g,
                Err(e) if e.0 == libc::ETIMEDOUT => {
                    return match wait::abandon(w) {
                        // A waker finished it first: its result.
                        Some(status) => {
                            wait::release(a, waiter);
                            if status == 0 {
                                Ok(0)
                            } else {
                                Err(Errno(status))
                            }
                        }
                        None if gave_up == Slept::TimedOut => Err(Errno::EAGAIN),
                        None => Err(Errno::EINTR),
                    };
                }
                Err(e) => return Err(e),
            };
            if let Some(status) = wait::finished(w) {
                status
            } else {
                wait::unlink(a, &s.queue, waiter)?;
                match gave_up {
                    Slept::Cancelled => RESTART.0,
                    // "if (timeout && jiffies_left == 0) error = -EAGAIN;"
                    Slept::TimedOut => libc::EAGAIN,
                    _ => libc::EINTR,
                }
            }
        }
    };
    wait::release(a, waiter);
    if result == 0 {
        Ok(0)
    } else {
        Err(Errno(result))
    }
}

/// How long a sleeper whose wait ended waits for its set's lock to leave
/// the queue, before it abandons its record (`wait::abandon`).
const LEAVE_NS: u64 = 100_000_000;

/// The internal result of a try whose sleep was cancelled (an errno no
/// call returns: the kernel's ERESTARTSYS).
const RESTART: Errno = Errno(512);

/// Queues the caller: a record and a copy of its operations. Object lock
/// held. Returns the record's offset.
fn enqueue(
    a: &Session,
    s: &SemSlot,
    cred: &Cred,
    sops: &[sembuf],
    sem_num: u16,
    zero: bool,
    entry: u64,
) -> SysResult<u64> {
    let n = sops.len() as u32;
    let ops = a.alloc(wait::ops_bytes(n))?;
    let off = match a.alloc(wait::WAITER_BYTES) {
        Ok(off) => off,
        Err(e) => {
            let _ = a.free(ops, wait::ops_bytes(n));
            return Err(e);
        }
    };
    // The operations, then the caller's pid (what the operation records
    // as sempid): the record's `pid` is the sleeping thread's process,
    // which is another when a supervisor sleeps for the caller
    // (`acting.rs`), and wakers ask whether it lives.
    let words: &[AtomicU64] = a.view_slice(ops, sops.len() + 1)?;
    // Above the pid, the calling thread when a supervisor sleeps for it:
    // a thread gone (killed, or ended by another thread's exec) is no
    // caller any more, though its process lives (`caller_gone`).
    let tid = crate::acting::current().map_or(0, |p| p.tid as u32);
    words[sops.len()].store(cred.pid as u32 as u64 | u64::from(tid) << 32, Relaxed);
    for (w, o) in words.iter().zip(sops) {
        w.store(
            u64::from(o.sem_num)
                | (u64::from(o.sem_op as u16) << 16)
                | (u64::from(o.sem_flg as u16) << 32),
            Relaxed,
        );
    }
    let w = wait::at(a, off)?;
    w.state.store(wait::QUEUED, Relaxed);
    w.status.store(0, Relaxed);
    w.who.store(crate::lock::my_identity(), Relaxed);
    w.pid.store(crate::sys::process::getpid(), Relaxed);
    w.sem().nops().store(n, Relaxed);
    w.sem().ops().store(ops, Relaxed);
    w.sem()
        .blocking()
        .store(u32::from(sem_num) | if zero { 1 << 31 } else { 0 }, Relaxed);
    // The undo entry the waker updates when it completes the operation.
    w.sem().undo_entry().store(entry, Relaxed);
    w.sem().ticket().store(wait::ticket(), Relaxed);
    wait::beat(w);
    wait::append(a, &s.queue, off)?;
    Ok(off)
}
