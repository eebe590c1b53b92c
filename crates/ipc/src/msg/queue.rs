//! The inside of a queue: message blocks, the message list, the block
//! cache, the wait records of blocked callers, and the journal that lets
//! the next holder of the queue's lock finish what a dead holder started.
//!
//! # Protocol
//! Everything here expects the queue's lock held, and leaves it held.
//!
//! A message block is `[next, mtype, size | pid << 32]` then the text
//! (`MSG_HEADER` bytes of header, 32-byte aligned, as the heap hands out
//! its smallest class): `pid` is the last process that sent or received it,
//! which a repair needs to set `lspid` or `lrpid`.
//!
//! Wait records ([`Waiter`]) of blocked senders and receivers hang on one
//! FIFO list, `waiters`, each marked with its kind (`nops`). A waker never
//! unlinks a record: it writes the outcome (`status`, and for a receiver
//! handed a message, `ops` = the block) and flips `state` to DONE. The
//! record stays linked until its own sleeper, holding the lock, unlinks and
//! frees it ([`collect`]); so a record the journal names is always still
//! allocated when a repair reads it (the repair runs before anyone else
//! holds the lock). Records of dead sleepers are unlinked and freed by
//! whoever meets them and finds the sleeper gone.
//!
//! # Crash safety
//! Every change that takes more than one store is journaled: `journal` =
//! a block's offset | `OP_*`, written (Release) before the change, cleared
//! after it; `journal_aux` = the wait record the change concerns. Each
//! step of a journaled change is idempotent, so [`repair`] (run by the
//! next holder after a death) simply does the whole change again, then
//! recounts `cbytes`, `qnum` and `last` from the list. Changes of one store
//! (a record flipped to DONE, a record appended or unlinked) need none. A
//! death can leak a heap block in the window between dropping the last
//! reference to it and freeing it (as the heap itself can), never leave
//! a block both owned and free, a list half linked or a count wrong.
//!
//! Every offset read from the arena is checked before use and every walk
//! is bounded by the number of blocks the arena could hold; a bad link
//! cuts the list there (what follows is leaked).

use super::MSG_HEADER;
use crate::arena::bytes;
use crate::chain::Chain;
use crate::errno::{Errno, SysResult};
use crate::heap;
use crate::lock;
use crate::object::{Counted, MsgSlot, bump};
use crate::registry::{Found, still_valid};
use crate::session::Session;
use crate::time::now;
use crate::wait::{self, Slept, WAITER_BYTES, Waiter};
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// `journal`: the block is being filled for msgsnd; not linked. Repair:
/// back to the cache or the heap.
pub(super) const OP_FILL: u64 = 1;
/// The block is complete: link it at the tail.
pub(super) const OP_SEND: u64 = 2;
/// The block is being received: unlink it, then recycle it.
pub(super) const OP_RECV: u64 = 3;
/// The block is handed to the receiver whose record is `journal_aux`.
pub(super) const OP_HANDOVER: u64 = 4;
/// The sender record `journal_aux` moves to the tail of `waiters`.
pub(super) const OP_MOVE: u64 = 5;
const OP_MASK: u64 = 31;

/// Alignment of every message block (the heap's smallest class).
const BLOCK_ALIGN: u64 = 32;

/// Record kinds (`Waiter::nops`).
pub(super) const KIND_RECV: u32 = 1;
pub(super) const KIND_SEND: u32 = 2;
/// `Waiter::flags`: the receiver's search mode in the low byte, and in bits
/// 8..16 how often a scan met the record finished but not yet collected.
const MODE_MASK: u32 = 0xff;
const SIGHTING: u32 = 1 << 8;

/// A spinning receiver whose last sign of life (its queueing, then its
/// spin's beats, every microsecond or two: `wait::beat`) is younger than
/// this is taken as alive without asking the system.
const SPIN_TRUST_NS: u64 = 15_000;

/// The most blocks (or records) a list can hold: a longer walk is a cycle.
fn walk_limit(a: &Session) -> u64 {
    a.layout().size / BLOCK_ALIGN
}

/// The most wait records a list is walked for (`chain.rs`: more sleepers
/// than one queue can have).
fn waiters_limit(a: &Session) -> u64 {
    walk_limit(a).min(crate::chain::MAX_LINKS)
}

/// The link of the message block at `off`, if it is one.
fn link(a: &Session, off: u64) -> Option<u64> {
    block(a, off).ok().map(|b| b.next())
}

/// The messages of a list from `first`, in order: bounded by the blocks
/// the arena could hold, and cycle-proof (`chain.rs`: a list that loops
/// back ends, broken, after about its tail and loop again, however large
/// the arena's limit is). A link that is no block ends it, broken.
pub(super) fn messages(a: &Session, first: u64) -> Chain<impl FnMut(u64) -> Option<u64> + '_> {
    Chain::bounded(first, move |off| link(a, off), walk_limit(a))
}

/// A message block in the heap, checked: aligned, header and text inside
/// the heap's handed-out part.
#[derive(Clone, Copy)]
pub(super) struct Block<'a> {
    pub off: u64,
    w: &'a [AtomicU64],
}

/// The block at `off`; EUCLEAN when it cannot be one.
pub(super) fn block(a: &Session, off: u64) -> SysResult<Block<'_>> {
    if off == 0 || !off.is_multiple_of(BLOCK_ALIGN) || !a.in_heap(off, MSG_HEADER) {
        return Err(Errno::EUCLEAN);
    }
    let b = Block {
        off,
        w: a.view_slice(off, 3)?,
    };
    if !a.in_heap(off, MSG_HEADER + b.size().next_multiple_of(8)) {
        return Err(Errno::EUCLEAN);
    }
    Ok(b)
}

impl<'a> Block<'a> {
    pub fn next(&self) -> u64 {
        self.w[0].load(Relaxed)
    }
    pub fn set_next(&self, v: u64) {
        self.w[0].store(v, Relaxed);
    }
    pub fn mtype(&self) -> i64 {
        self.w[1].load(Relaxed) as i64
    }
    pub fn set_mtype(&self, t: i64) {
        self.w[1].store(t as u64, Relaxed);
    }
    /// Text bytes.
    pub fn size(&self) -> u64 {
        self.w[2].load(Relaxed) & 0xffff_ffff
    }
    /// The last sender or receiver.
    pub fn pid(&self) -> i32 {
        (self.w[2].load(Relaxed) >> 32) as i32
    }
    /// Size and pid in one store.
    pub fn set_size_pid(&self, size: u64, pid: i32) {
        self.w[2].store(
            (size & 0xffff_ffff) | (u64::from(pid as u32) << 32),
            Relaxed,
        );
    }
    /// The bytes the heap handed out for it.
    fn alloc_size(&self) -> u64 {
        MSG_HEADER + self.size()
    }
    /// The text as words (the last one padded), inside the heap (checked
    /// by [`block`] for the block's size).
    fn text(&self, a: &'a Session) -> SysResult<&'a [AtomicU64]> {
        a.view_slice(self.off + MSG_HEADER, self.size().div_ceil(8) as usize)
    }

    /// Writes the text (the block's size must be `text.len()`), through
    /// the arena's bulk copy (arena/bytes.rs): relaxed atomic words for
    /// short texts, one string copy for long ones.
    pub fn write_text(&self, a: &'a Session, text: &[u8]) -> SysResult<()> {
        bytes::copy_in(self.text(a)?, text);
        Ok(())
    }

    /// Copies the first `out.len()` bytes of the text (at most its size)
    /// into `out`; returns how many. As `write_text`.
    pub fn read_text(&self, a: &'a Session, out: &mut [u8]) -> SysResult<usize> {
        let n = out.len().min(self.size() as usize);
        Ok(bytes::copy_out(self.text(a)?, &mut out[..n]))
    }
}

/// A block for a message of `size` bytes, named by the journal (OP_FILL),
/// its size and sender written: the cached block if the heap would hand
/// out the same class for this size, else a new one.
pub(super) fn take_block<'a>(
    a: &'a Session,
    s: &MsgSlot,
    size: u64,
    pid: i32,
) -> SysResult<Block<'a>> {
    let need = heap::footprint(MSG_HEADER + size);
    let c = s.cache.load(Relaxed);
    if c != 0 {
        match block(a, c) {
            Ok(b) if heap::footprint(b.alloc_size()) == need => {
                // Release: a repair that sees the journal sees the block.
                s.journal.store(c | OP_FILL, Release);
                s.cache.store(0, Relaxed);
                b.set_size_pid(size, pid);
                return block(a, c);
            }
            Ok(_) => {}
            // Not a block: forget it (leaked).
            Err(_) => s.cache.store(0, Relaxed),
        }
    }
    // Not zeroed: the header and the text are written before anything
    // reads them (a repair reads only the size, written first).
    let off = a.alloc_uninit(MSG_HEADER + size)?;
    // The size first: a repair frees the block by it.
    a.view::<AtomicU64>(off + 16)?.store(
        (size & 0xffff_ffff) | (u64::from(pid as u32) << 32),
        Relaxed,
    );
    s.journal.store(off | OP_FILL, Release);
    block(a, off)
}

/// Puts back the block the journal names (OP_FILL or OP_RECV, unlinked):
/// into the cache if it is empty, else to the heap; clears the journal.
/// Idempotent: a block already cached stays.
pub(super) fn recycle(a: &Session, s: &MsgSlot, b: u64) {
    let c = s.cache.load(Relaxed);
    if c == b {
        s.journal.store(0, Release);
        return;
    }
    if c == 0 {
        s.cache.store(b, Relaxed);
        s.journal.store(0, Release);
        return;
    }
    // The journal first: a death between the two leaks the block instead
    // of freeing it twice.
    s.journal.store(0, Release);
    if let Ok(blk) = block(a, b) {
        let _ = a.free(b, blk.alloc_size());
    }
}

/// Disposes of a block nothing refers to any more (no journal entry).
pub(super) fn discard(a: &Session, s: Option<&MsgSlot>, b: u64) {
    let Ok(blk) = block(a, b) else {
        return;
    };
    match s {
        Some(s) if s.cache.load(Relaxed) == 0 => s.cache.store(b, Relaxed),
        _ => {
            let _ = a.free(b, blk.alloc_size());
        }
    }
}

/// Links `b` at the tail of the message list. Idempotent.
pub(super) fn link_tail(a: &Session, s: &MsgSlot, b: u64) -> SysResult<()> {
    let last = s.last.load(Relaxed);
    if last == b {
        return Ok(());
    }
    if last == 0 {
        s.first.store(b, Relaxed);
    } else {
        block(a, last)?.set_next(b);
    }
    s.last.store(b, Relaxed);
    Ok(())
}

/// Unlinks `b`, whose predecessor is `prev` (0: `b` is first). A message
/// linked to itself ends the list (it is taken, then recycled: a list
/// still naming it would hand its block out twice), and whatever ends the
/// list makes `prev` its last.
pub(super) fn unlink_at(a: &Session, s: &MsgSlot, prev: u64, b: &Block<'_>) -> SysResult<()> {
    let next = match b.next() {
        n if n == b.off => 0,
        n => n,
    };
    if prev == 0 {
        s.first.store(next, Relaxed);
    } else {
        block(a, prev)?.set_next(next);
    }
    if next == 0 || s.last.load(Relaxed) == b.off {
        s.last.store(prev, Relaxed);
    }
    Ok(())
}

/// Takes `b` off the list wherever it is (a repair). Idempotent. A bad
/// link or a cycle ends the search (the recount cuts them).
fn ensure_unlinked(a: &Session, s: &MsgSlot, b: u64) {
    let mut prev = 0u64;
    for cur in messages(a, s.first.load(Relaxed)) {
        if cur == b {
            if let Ok(c) = block(a, cur) {
                let _ = unlink_at(a, s, prev, &c);
            }
            return;
        }
        prev = cur;
    }
}

/// Cuts the message list where a cycle closes (what the list was as far
/// as it was sound). Object lock held.
pub(super) fn cut_loop(a: &Session, s: &MsgSlot) {
    if let Some(closing) = crate::chain::cut_point(s.first.load(Relaxed), |off| link(a, off))
        && let Ok(c) = block(a, closing)
    {
        c.set_next(0);
    }
}

/// Recounts `cbytes`, `qnum` and `last` from the list, cutting it where a
/// cycle closes (what the list was as far as it was sound) and at the
/// first link that is not a block.
pub(super) fn recount(a: &Session, s: &MsgSlot) {
    cut_loop(a, s);
    let (mut n, mut bytes, mut prev) = (0u64, 0u64, 0u64);
    let mut cur = s.first.load(Relaxed);
    let limit = walk_limit(a);
    while cur != 0 {
        match block(a, cur) {
            Ok(c) if n < limit => {
                n += 1;
                bytes = bytes.saturating_add(c.size());
                prev = cur;
                cur = c.next();
            }
            _ => {
                match block(a, prev) {
                    Ok(p) => p.set_next(0),
                    Err(_) => s.first.store(0, Relaxed),
                }
                break;
            }
        }
    }
    s.last.store(prev, Relaxed);
    s.cbytes.store(bytes, Relaxed);
    s.qnum.store(n, Relaxed);
}

/// `msg_fits_inqueue`: "msgsz + msq->q_cbytes <= msq->q_qbytes && 1 +
/// msq->q_qnum <= msq->q_qbytes".
pub(super) fn fits(s: &MsgSlot, size: u64) -> bool {
    let qb = s.qbytes.load(Relaxed);
    size.saturating_add(s.cbytes.load(Relaxed)) <= qb
        && s.qnum.load(Relaxed).saturating_add(1) <= qb
}

/// What a repair does: the journaled change again, from the start, then
/// the counts from the list. Leaves the journal clear.
pub(super) fn repair(a: &Session, s: &MsgSlot) {
    let j = s.journal.load(Acquire);
    let aux = s.journal_aux.load(Relaxed);
    let b = j & !OP_MASK;
    match j & OP_MASK {
        OP_FILL => recycle(a, s, b),
        OP_SEND => {
            if let Ok(blk) = block(a, b)
                && link_tail(a, s, b).is_ok()
            {
                s.lspid.store(blk.pid(), Relaxed);
                s.stime.store(now(), Relaxed);
            }
        }
        OP_RECV => {
            ensure_unlinked(a, s, b);
            if let Ok(blk) = block(a, b) {
                s.lrpid.store(blk.pid(), Relaxed);
                s.rtime.store(now(), Relaxed);
            }
            recycle(a, s, b);
        }
        OP_HANDOVER => {
            if let (Ok(blk), Ok(w)) = (block(a, b), wait::at(a, aux)) {
                hand_over(s, &blk, aux, w);
            }
        }
        OP_MOVE if wait::at(a, aux).is_ok() && !on_list(a, s, aux) => {
            let _ = wait::append(a, &s.waiters, aux);
        }
        _ => {}
    }
    s.journal.store(0, Release);
    s.journal_aux.store(0, Relaxed);
    recount(a, s);
}

// ---- wait records ----------------------------------------------------

/// What a blocked caller waits for.
pub(super) struct Wants {
    pub kind: u32,
    /// Receiver: the largest message it takes (`r_maxsize`); sender: its
    /// message's size.
    pub size: u32,
    pub mode: u32,
    pub msgtyp: i64,
}

/// The receiver's search mode and type (`r_mode`, `r_msgtype`).
pub(super) fn wanted(w: &Waiter) -> (u32, i64) {
    (
        w.msg().flags().load(Relaxed) & MODE_MASK,
        w.msg().msgtyp().load(Relaxed) as i64,
    )
}

/// Queues a record for the caller at the tail of `waiters`; its offset.
/// The record names the calling thread and its real process (not the
/// caller's `Cred::pid`, which a caller may have made for another
/// process): wakers judge by them whether the sleeper lives.
pub(super) fn enqueue(a: &Session, s: &MsgSlot, wants: Wants) -> SysResult<u64> {
    let off = a.alloc(WAITER_BYTES)?;
    let w = wait::at(a, off)?;
    w.state.store(wait::QUEUED, Relaxed);
    w.status.store(0, Relaxed);
    w.who.store(lock::my_identity(), Relaxed);
    w.pid.store(crate::sys::process::getpid(), Relaxed);
    let m = w.msg();
    // The kind, and above it the calling thread when a supervisor's
    // thread sleeps for it (`acting.rs`): the receiver `msg_lrpid` shows.
    let caller = crate::acting::current().map_or(0, |p| p.tid as u32 & 0xff_ffff);
    m.kind().store(wants.kind | caller << 8, Relaxed);
    m.handed().store(0, Relaxed);
    m.size().store(wants.size, Relaxed);
    m.flags().store(wants.mode & MODE_MASK, Relaxed);
    m.msgtyp().store(wants.msgtyp as u64, Relaxed);
    m.heartbeat()
        .store(crate::sys::time::monotonic_ns(), Relaxed);
    if let Err(e) = wait::append(a, &s.waiters, off) {
        let _ = a.free(off, WAITER_BYTES);
        return Err(e);
    }
    Ok(off)
}

/// Ends a record's wait with `status` and wakes its sleeper. The record
/// stays linked; its sleeper collects it.
pub(super) fn finish(w: &Waiter, status: i32) {
    wait::finish_linked(w, status);
}

/// Whether the receiver of a record still lives. One that still spins and
/// gave a sign of life a moment ago (queued, or beat) is taken as alive
/// without asking the system (a receiver killed within those microseconds
/// can take a message with it, as one killed just after msgrcv returned
/// would). The word was once a deadline set at queueing, which the spin's
/// first beat (the same word) overwrote with the time of the beat: every
/// hand-over then watched the receiver's heartbeat, up to 3 µs, under the
/// queue's lock.
pub(super) fn receiver_alive(w: &Waiter) -> bool {
    (w.state.load(Relaxed) == wait::QUEUED
        && crate::sys::time::monotonic_ns()
            .checked_sub(w.msg().heartbeat().load(Relaxed))
            .is_some_and(|age| age < SPIN_TRUST_NS))
        || wait::sleeper_alive(w)
}

/// For a finished record a scan meets again and again: whether its
/// sleeper died before collecting it (asked at the 2nd, 4th, 8th...
/// sighting, so that a slow live sleeper costs few checks).
pub(super) fn uncollected_and_dead(w: &Waiter) -> bool {
    let f = w.msg().flags().load(Relaxed);
    let seen = ((f >> 8) & 0xff) + 1;
    if seen <= 0xff {
        w.msg().flags().store(f + SIGHTING, Relaxed);
    }
    seen >= 2 && seen.is_power_of_two() && !wait::sleeper_alive(w)
}

/// Unlinks and frees the record `off` (predecessor `prev`, 0 = head) of a
/// sleeper found dead, with the block it was handed.
pub(super) fn drop_record(a: &Session, s: &MsgSlot, prev: u64, off: u64) -> SysResult<()> {
    let w = wait::at(a, off)?;
    let next = w.next.load(Relaxed);
    if prev == 0 {
        s.waiters.store(next, Relaxed);
    } else {
        wait::at(a, prev)?.next.store(next, Relaxed);
    }
    let b = w.msg().handed().swap(0, Relaxed);
    if b != 0 {
        discard(a, Some(s), b);
    }
    let _ = a.free(off, WAITER_BYTES);
    Ok(())
}

/// The walk of `waiters`: `f(prev, off, record)` returns what to do next.
pub(super) enum Step {
    /// Go on with the next record.
    Next,
    /// The record was unlinked (its predecessor stays the same).
    Gone,
    /// End the walk.
    Stop,
}

/// Visits the records in order. A link that is not a record cuts the list
/// there; the walk is bounded, and a list that loops back is cut where it
/// closes (`chain.rs`), found in time proportional to its tail and loop
/// (Brent's mark; a record that `f` moved to the tail and the walk meets
/// again ends the walk too, as the walkers that move records stop there).
pub(super) fn walk(
    a: &Session,
    s: &MsgSlot,
    mut f: impl FnMut(u64, u64, &Waiter) -> SysResult<Step>,
) -> SysResult<()> {
    let mut prev = 0u64;
    let mut cur = s.waiters.load(Relaxed);
    let (mut mark, mut power, mut lam) = (0u64, 1u64, 0u64);
    for _ in 0..waiters_limit(a) {
        if cur == 0 {
            return Ok(());
        }
        if cur == mark {
            cut_cycle(a, s);
            return Ok(());
        }
        let Ok(w) = wait::at(a, cur) else {
            match wait::at(a, prev) {
                Ok(p) => p.next.store(0, Relaxed),
                Err(_) => s.waiters.store(0, Relaxed),
            }
            return Ok(());
        };
        let next = w.next.load(Relaxed);
        match f(prev, cur, w)? {
            Step::Next => prev = cur,
            Step::Gone => {}
            Step::Stop => return Ok(()),
        }
        lam += 1;
        if lam == power {
            mark = cur;
            power = power.saturating_mul(2);
            lam = 0;
        }
        cur = next;
    }
    Ok(())
}

/// Cuts the wait records' list where it loops back, if it does: what the
/// list was as far as it was sound (every record stays on it).
fn cut_cycle(a: &Session, s: &MsgSlot) {
    let next = |off: u64| wait::at(a, off).ok().map(|w| w.next.load(Relaxed));
    if let Some(closing) = crate::chain::cut_point(s.waiters.load(Relaxed), next)
        && let Ok(w) = wait::at(a, closing)
    {
        w.next.store(0, Relaxed);
    }
}

fn on_list(a: &Session, s: &MsgSlot, off: u64) -> bool {
    let mut found = false;
    let _ = walk(a, s, |_, cur, _| {
        found = cur == off;
        Ok(if found { Step::Stop } else { Step::Next })
    });
    found
}

/// Hands block `b` to the receiver record `r` (`pipelined_send`): its
/// pids and times, then the record finished with the block. Idempotent
/// (a repair's): a record already DONE keeps what it has.
pub(super) fn hand_over(s: &MsgSlot, b: &Block<'_>, _r: u64, w: &Waiter) {
    let t = now();
    s.lspid.store(b.pid(), Relaxed);
    s.stime.store(t, Relaxed);
    // "ipc_update_pid(&msq->q_lrpid, task_pid(msr->r_tsk))": the
    // receiving thread's id.
    let caller = (w.msg().kind().load(Relaxed) >> 8) as i32;
    s.lrpid.store(
        if caller != 0 {
            caller
        } else {
            (w.who.load(Relaxed) & lock::TID_MASK) as i32
        },
        Relaxed,
    );
    s.rtime.store(t, Relaxed);
    if w.state.load(Acquire) != wait::DONE {
        // Sent and received at once (a repair's hand-over of a record
        // already DONE counted when it was done).
        bump(s.first_count());
        if let Some(c) = s.second_count() {
            bump(c);
        }
        w.msg().handed().store(b.off, Relaxed);
        finish(w, 0);
    }
}

/// `ss_wakeup(msq, &wake_q, false)`: wakes the blocked senders whose
/// message now fits (they retry); the others go to the tail, in order, and
/// the walk stops when it meets the first of them again.
pub(super) fn wake_senders(a: &Session, s: &MsgSlot) -> SysResult<()> {
    let mut stop = 0u64;
    walk(a, s, |prev, cur, w| {
        if w.msg().kind().load(Relaxed) & 0xff != KIND_SEND {
            return Ok(Step::Next);
        }
        if w.state.load(Acquire) == wait::DONE {
            if uncollected_and_dead(w) {
                drop_record(a, s, prev, cur)?;
                return Ok(Step::Gone);
            }
            return Ok(Step::Next);
        }
        if cur == stop {
            return Ok(Step::Stop);
        }
        if fits(s, u64::from(w.msg().size().load(Relaxed))) {
            finish(w, 0);
            return Ok(Step::Next);
        }
        if stop == 0 {
            stop = cur;
        }
        if w.next.load(Relaxed) == 0 {
            return Ok(Step::Stop); // already the tail
        }
        move_to_tail(a, s, prev, cur)?;
        Ok(Step::Gone)
    })
}

/// `list_move_tail`, journaled (two links change).
fn move_to_tail(a: &Session, s: &MsgSlot, prev: u64, r: u64) -> SysResult<()> {
    s.journal_aux.store(r, Relaxed);
    s.journal.store(OP_MOVE, Release);
    let next = wait::at(a, r)?.next.load(Relaxed);
    if prev == 0 {
        s.waiters.store(next, Relaxed);
    } else {
        wait::at(a, prev)?.next.store(next, Relaxed);
    }
    wait::append(a, &s.waiters, r)?;
    s.journal.store(0, Release);
    s.journal_aux.store(0, Relaxed);
    Ok(())
}

/// Ends the wait of every record of `kind` (0: all) still waiting with
/// `status`: `expunge_all` (receivers: EAGAIN after IPC_SET, EIDRM at
/// removal) and `ss_wakeup(kill)`.
pub(super) fn wake_all(a: &Session, s: &MsgSlot, kind: u32, status: i32) {
    let _ = walk(a, s, |_, _, w| {
        if (kind == 0 || w.msg().kind().load(Relaxed) & 0xff == kind)
            && w.state.load(Acquire) != wait::DONE
        {
            finish(w, status);
        }
        Ok(Step::Next)
    });
}

/// A sleeper's end of its wait, lock held: unlinks its record (if it is
/// still on this slot's list) and frees it. Returns whether the record was
/// finished, its status, and the block it was handed (now the caller's).
pub(super) fn collect(a: &Session, s: &MsgSlot, off: u64) -> SysResult<(bool, i32, u64)> {
    let w = wait::at(a, off)?;
    // Acquire: pairs with the Release in `finish`.
    let done = w.state.load(Acquire) == wait::DONE;
    let status = w.status.load(Relaxed);
    let b = w.msg().handed().swap(0, Relaxed);
    wait::unlink(a, &s.waiters, off)?;
    let _ = a.free(off, WAITER_BYTES);
    Ok((done, status, b))
}

/// How a sleep on a queue ended.
pub(super) enum Woke {
    /// A waker finished the record.
    Done,
    /// A signal handler ran first.
    Interrupted,
    /// The queue was removed and nobody finished the record (its remover
    /// died midway).
    Removed,
    /// Taken off the queue by an execve of the process that failed: the
    /// call starts over.
    Cancelled,
}

/// Sleeps on our record (no lock held) until a waker finishes it, a signal
/// handler runs (one noted since `mark`, the call's start), or, looking
/// once a second, the queue is found removed. Spinning first only if the
/// record was among the first on the list (`first`, `wait::sleep`).
pub(super) fn sleep(f: &Found<'_, MsgSlot>, w: &Waiter, mark: wait::Mark, first: bool) -> Woke {
    let mut first = first;
    loop {
        let deadline = Some(wait::now_ns() + 1_000_000_000);
        let slept = wait::sleep(
            w,
            deadline,
            mark,
            core::mem::take(&mut first),
            &mut |_| {},
            &[],
            wait::OnStop::Restart,
        );
        match slept {
            Slept::Done(_) => return Woke::Done,
            Slept::Interrupted => return Woke::Interrupted,
            Slept::Cancelled => return Woke::Cancelled,
            Slept::TimedOut => {
                if still_valid(f).is_err() {
                    return Woke::Removed;
                }
            }
        }
    }
}

/// What is inconsistent in a queue (lock held), for `Namespace::check`.
pub(super) fn audit(a: &Session, s: &MsgSlot) -> Vec<String> {
    let mut out = Vec::new();
    if s.journal.load(Relaxed) != 0 {
        out.push("msg journal left open".to_string());
    }
    let (mut n, mut bytes, mut tail) = (0u64, 0u64, 0u64);
    let first = s.first.load(Relaxed);
    let mut walk = messages(a, first);
    for cur in walk.by_ref() {
        n += 1;
        bytes += block(a, cur).map_or(0, |c| c.size());
        tail = cur;
    }
    if walk.broken() {
        out.push(match crate::chain::cut_point(first, |off| link(a, off)) {
            Some(_) => "message list loops".to_string(),
            None => {
                let bad = if tail == 0 {
                    first
                } else {
                    link(a, tail).unwrap_or(0)
                };
                format!("message list links to {bad:#x}, no block")
            }
        });
    }
    let facts = [
        ("qnum", s.qnum.load(Relaxed), n),
        ("cbytes", s.cbytes.load(Relaxed), bytes),
        ("last", s.last.load(Relaxed), tail),
    ];
    for (what, have, want) in facts {
        if have != want {
            out.push(format!("{what} is {have:#x}, the list says {want:#x}"));
        }
    }
    let c = s.cache.load(Relaxed);
    if c != 0 && block(a, c).is_err() {
        out.push(format!("cache holds {c:#x}, no block"));
    }
    let mut records = 0u64;
    let mut cur = s.waiters.load(Relaxed);
    while cur != 0 {
        let Ok(w) = wait::at(a, cur) else {
            out.push(format!("waiter list links to {cur:#x}, no record"));
            break;
        };
        records += 1;
        if records > waiters_limit(a) {
            out.push("waiter list loops".to_string());
            break;
        }
        cur = w.next.load(Relaxed);
    }
    out
}
