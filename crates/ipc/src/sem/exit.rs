//! `exit_sem` for one undo entry (`undo.rs`): above the entries and the
//! operations (`op.rs`), since applying an entry wakes the set's sleepers.

use super::{JOURNAL_UNDO, SemKind, op, sems, undo};
use crate::errno::Errno;
use crate::limits::SEMVMX;
use crate::registry::{Kind, lock_object, obtain};
use crate::session::Session;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// `exit_sem` for one entry of process `pid`: its adjustments added to the
/// set's values, clamped to 0..=SEMVMX, sempid = `pid`, sleepers woken.
/// Skipped if already applied or if the set is gone.
pub fn apply_at_exit(a: &Session, off: u64, pid: i32) -> Result<(), Errno> {
    let h = undo::head(a, off)?;
    if h.applied.load(Relaxed) != 0 {
        return Ok(());
    }
    let Ok(f) = obtain::<SemKind>(a, h.semid.load(Relaxed)) else {
        // The set is gone: nothing to undo.
        h.applied.store(1, Relaxed);
        return Ok(());
    };
    let s = f.slot;
    let _g = locked!(lock_object::<SemKind>(a, s));
    if crate::registry::still_valid(&f).is_err()
        || f.generation != h.generation.load(Relaxed)
        || h.applied.load(Relaxed) != 0
    {
        h.applied.store(1, Relaxed);
        return Ok(());
    }
    // The process's sleepers whose operation would change this entry (a
    // dead process's, or one that is ending: exit_sem runs after the
    // task's last semop) leave the queue: their operations never happen.
    undo::cancel_sleepers(a, s, off);
    let sems = sems(a, s)?;
    let adj = undo::adj(a, off)?;
    let n = sems.len();
    // The journal: the entry, then every value as it is to be.
    let words = n + 1;
    let journal = a.alloc(words as u64 * 8)?;
    let block: &[AtomicU64] = a.view_slice(journal, words)?;
    block[0].store(off, Relaxed);
    for (i, (w, sem)) in block[1..].iter().zip(sems).enumerate() {
        let d = adj.get(i).map_or(0, |x| i32::from(x.load(Relaxed) as i16));
        let (v, p) = if d == 0 {
            (sem.val(), sem.pid())
        } else {
            (sem.val().saturating_add(d).clamp(0, SEMVMX), pid)
        };
        w.store(u64::from(v as u32) | (u64::from(p as u32) << 32), Relaxed);
    }
    s.journal_len.store(words as u32, Relaxed);
    s.journal_off.store(journal, Relaxed);
    crate::fault::step();
    s.journal_op.store(JOURNAL_UNDO, Relaxed);
    crate::fault::step();
    SemKind::repair_object(a, s)?;
    crate::fault::step();
    // exit_sem: "do_smart_update(sma, NULL, 0, 1, &wake_q)": otime is set
    // for every set the process has an entry for, adjustments or not.
    s.otime.store(crate::time::now(), Relaxed);
    op::update_queue(a, s, None)
}
