//! Consistency check of a namespace: what the crash and concurrency tests
//! assert after processes were killed at random points, and what
//! `ipcns ns info` reports. Taking each registry lock first lets a pending
//! repair run, as any caller's would.

use crate::keys;
use crate::msg::MsgKind;
use crate::namespace::Namespace;
use crate::object::{LIVE, Slot};
use crate::registry::{self, IPC_PRIVATE, Kind, Reg};
use crate::sem::SemKind;
use crate::session::Session;
use crate::shm::ShmKind;
use core::sync::atomic::Ordering::Relaxed;

/// Objects per mechanism, as found by the check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    pub sem: u32,
    pub msg: u32,
    pub shm: u32,
}

/// How long a check waits for the locks it takes, in all.
const CHECK_NS: u64 = 3_000_000_000;

/// At most this many problems are listed per mechanism.
const MAX_PROBLEMS: usize = 50;

impl Namespace {
    /// Verifies every invariant of the three registries: each used index
    /// holds a live object and each live object's index is used; every
    /// keyed object is found by its key and the key table holds nothing
    /// else; `in_use`, `max_idx` and the mechanism counters equal what the
    /// objects add up to; and of the heap: every free block (on a list, a
    /// per-cpu cache or a run) is a block of its class and free once, and
    /// the bytes in use and free fit in the heap (heap/audit.rs). Returns
    /// the census, or the first violation.
    pub fn check(&self) -> Result<Census, String> {
        let (census, problems) = self.problems();
        match problems.into_iter().next() {
            None => Ok(census),
            Some(p) => Err(p),
        }
    }

    /// Every violation [`Namespace::check`] looks for, each as a line
    /// (`sem: in_use is 5, the objects say 1`), with the census of what
    /// was found. A registry held by a live holder (a stopped process) is
    /// reported as such and not waited for.
    pub fn problems(&self) -> (Census, Vec<String>) {
        let a = self.arena();
        // A lock kept by a live participant (stopped, say) is not waited
        // for past CHECK_NS: what it guards is reported unchecked.
        let _bound = crate::lock::gate::lock_limit(
            crate::sys::time::monotonic_ns().saturating_add(CHECK_NS),
        );
        let mut p = Vec::new();
        let census = Census {
            sem: check_kind::<SemKind>(a, &mut p),
            msg: check_kind::<MsgKind>(a, &mut p),
            shm: check_kind::<ShmKind>(a, &mut p),
        };
        check_procs(a, &mut p);
        p.extend(
            crate::heap::audit(a)
                .1
                .into_iter()
                .map(|x| format!("heap: {x}")),
        );
        (census, p)
    }
}

fn check_kind<K: Kind>(a: &Session, out: &mut Vec<String>) -> u32 {
    let name = K::MECH.name();
    let start = out.len();
    let mut e = |what: String| {
        if out.len() - start < MAX_PROBLEMS {
            out.push(format!("{name}: {what}"));
        }
    };
    let lock = &a.header().registries[K::MECH as usize].lock;
    if let Some(h) = crate::lock::holder_of(lock)
        && h.verdict == crate::lock::Liveness::Alive
    {
        e(format!(
            "registry held by thread {} (state {}): not checked",
            h.tid,
            h.state.unwrap_or('?')
        ));
        return 0;
    }
    let reg = match Reg::lock::<K>(a) {
        Ok(r) => r,
        Err(x) => {
            e(format!("lock: {x}"));
            return 0;
        }
    };
    let (mut n, mut max, mut u1, mut u2, mut keyed) = (0u32, -1i32, 0u64, 0u64, 0u32);
    // The used indices only: other slots' pages may never have been
    // touched (16,777,216 of them in extend mode).
    for idx in reg.bm().iter() {
        let s = match registry::slot::<K>(a, idx) {
            Ok(s) => s,
            Err(x) => {
                e(format!("slot {idx}: {x}"));
                continue;
            }
        };
        let h = s.head();
        let state = h.state.load(Relaxed);
        if state != LIVE {
            e(format!(
                "index {idx}: used, but its slot is in state {state}"
            ));
            continue;
        }
        // Locking the object runs its repair, as any caller's lock would.
        match registry::lock_object::<K>(a, s) {
            Err(x) => e(format!("object {idx}: {x}")),
            Ok(_g) => {
                for p in K::check_object(a, s) {
                    e(format!("index {idx}: {p}"));
                }
            }
        }
        n += 1;
        max = idx as i32;
        let (x, y) = K::usage(a, s);
        u1 = u1.saturating_add(x);
        u2 = u2.saturating_add(y);
        let key = h.key.load(Relaxed);
        if key != IPC_PRIVATE {
            keyed += 1;
            match keys::get(a, reg.r, key) {
                Ok(Some(i)) if i == idx => {}
                other => e(format!("index {idx}: key {key} finds {other:?}")),
            }
        }
    }
    let r = reg.r;
    let facts = [
        ("in_use", u64::from(r.in_use.load(Relaxed)), u64::from(n)),
        ("max_idx", r.max_idx.load(Relaxed) as u64, max as u64),
        ("used", r.used.load(Relaxed), u1),
        ("used2", r.used2.load(Relaxed), u2),
        (
            "keys",
            u64::from(r.keys_len.load(Relaxed)),
            u64::from(keyed),
        ),
    ];
    for (what, have, want) in facts {
        if have != want {
            e(format!("{what} is {have}, the objects say {want}"));
        }
    }
    if r.journal.op.load(Relaxed) != 0 {
        e("journal left open".to_string());
    }
    n
}

/// Process records: none left behind by a process that is gone (its
/// undo entries not applied).
fn check_procs(a: &Session, out: &mut Vec<String>) {
    let Ok(_g) = crate::proc::lock(a) else {
        out.push("procs: lock failed".to_string());
        return;
    };
    match crate::proc::table(a) {
        Err(e) => out.push(format!("procs: table: {e}")),
        Ok(t) => {
            for r in t
                .iter()
                .filter(|r| r.state.load(Relaxed) == crate::proc::LIVE)
            {
                let pid = r.pid.load(Relaxed);
                if !crate::lock::process_alive(pid, r.start.load(Relaxed)) && out.len() < 200 {
                    out.push(format!(
                        "procs: process {pid} is gone but its record (and undo entries) remain"
                    ));
                }
            }
        }
    }
}
