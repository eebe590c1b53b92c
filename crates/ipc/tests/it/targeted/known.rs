//! Where a case's live objects are (the links the parent follows in its
//! own mapping once the victim is at work, from the objects the builder
//! reported), and the stores of a case resolved and made there.

use super::build::Built;
use super::map::ArenaMap;
use super::targets::*;
use crate::corrupt::Rng;
use std::collections::BTreeMap;

/// Where the live objects of a case are, found in the arena once the
/// victim is at work.
pub struct Known {
    pub offs: BTreeMap<Obj, u64>,
    pub built: Built,
}

impl Known {
    pub fn discover(map: &ArenaMap, built: &Built, victim: i32) -> Known {
        use Obj::*;
        let g = |off: u64| map.get(off, 8);
        let g4 = |off: u64| map.get(off, 4);
        let mut o = BTreeMap::new();
        fn put(o: &mut BTreeMap<Obj, u64>, k: Obj, v: u64) {
            if v != 0 {
                o.insert(k, v);
            }
        }
        put(&mut o, Abs, 0);
        for (k, name) in [
            (S1, "s1"),
            (S2, "s2"),
            (S3, "s3"),
            (Q1, "q1"),
            (Q2, "q2"),
            (Q3, "q3"),
            (M1, "m1"),
            (M2, "m2"),
        ] {
            put(&mut o, k, built.get(&format!("slot.{name}")));
        }
        let regs = built.get("registries");
        put(&mut o, SemReg, regs);
        put(&mut o, MsgReg, regs + 192);
        put(&mut o, ShmReg, regs + 2 * 192);
        let heap = built.get("heap_state");
        put(&mut o, Heap, heap);
        let procs = heap + PROCS_AFTER_HEAP;
        put(&mut o, Procs, procs);
        let (s1, s3) = (built.get("slot.s1"), built.get("slot.s3"));
        put(&mut o, S1Array, g(s1 + SEM_BASE));
        put(&mut o, S3Array, g(s3 + SEM_BASE));
        let table = g(procs + PROCS_TABLE);
        put(&mut o, ProcsTable, table);
        let cap = g4(procs + PROCS_CAP).min(1 << 12);
        let rec = (0..cap)
            .map(|i| table + i * PROC_BYTES)
            .find(|&r| g4(r + REC_PID) as i32 == victim && g4(r + REC_STATE) == 1);
        if let Some(rec) = rec {
            put(&mut o, Rec, rec);
            let mut e = g(rec + REC_UNDOS);
            for _ in 0..8 {
                if e == 0 {
                    break;
                }
                let semid = g4(e + UNDO_SEMID);
                for (k, name) in [(E1, "s1"), (E2, "s2"), (E3, "s3")] {
                    if semid == built.get(name) {
                        put(&mut o, k, e);
                    }
                }
                e = g(e + UNDO_NEXT_PROC);
            }
            let mut a = g(rec + REC_ATTACHES);
            for _ in 0..8 {
                if a == 0 {
                    break;
                }
                let idx = u64::from(g4(a + AT_IDX) as u32);
                if idx == built.get("m1") & 0x7fff {
                    put(&mut o, A1, a);
                } else if idx == built.get("m2") & 0x7fff {
                    put(&mut o, A2, a);
                }
                a = g(a + AT_NEXT);
            }
        }
        let e1 = o.get(&E1).copied().unwrap_or(0);
        let mut e = g(s1 + SEM_UNDOS);
        for _ in 0..8 {
            if e == 0 {
                break;
            }
            if e != e1 {
                put(&mut o, P1, e);
                break;
            }
            e = g(e + UNDO_NEXT_SET);
        }
        let w1 = g(s1 + SEM_QUEUE);
        put(&mut o, W1, w1);
        if w1 != 0 {
            put(&mut o, W2, g(w1 + W_NEXT));
        }
        let b1 = g(built.get("slot.q1") + MSG_FIRST);
        put(&mut o, B1, b1);
        if b1 != 0 {
            let b2 = g(b1 + BLK_NEXT);
            put(&mut o, B2, b2);
            if b2 != 0 {
                put(&mut o, B3, g(b2 + BLK_NEXT));
            }
        }
        let r1 = g(built.get("slot.q2") + MSG_WAITERS);
        put(&mut o, R1, r1);
        if r1 != 0 {
            put(&mut o, R2, g(r1 + W_NEXT));
        }
        put(&mut o, Rs, g(built.get("slot.q3") + MSG_WAITERS));
        let f0 = g(heap + HEAP_FREE);
        put(&mut o, F0, f0);
        if f0 != 0 {
            put(&mut o, F0b, g(f0));
        }
        let f1 = g(heap + HEAP_FREE + 8);
        put(&mut o, F1, f1);
        if f1 != 0 {
            put(&mut o, F1b, g(f1));
        }
        for cpu in 0..built.get("cache_cpus") {
            for c in 0..10u64 {
                put(
                    &mut o,
                    Cache(cpu as u8, c as u8),
                    built.get("caches")
                        + cpu * built.get("cpu_cache")
                        + built.get("stacks")
                        + c * built.get("stack"),
                );
            }
        }
        Known {
            offs: o,
            built: built.clone(),
        }
    }

    pub fn off(&self, o: Obj) -> Option<u64> {
        if o == Obj::Abs {
            return Some(0);
        }
        self.offs.get(&o).copied()
    }

    /// What is missing for the victim's sleepers, entries and
    /// attachments to be all in place.
    pub fn missing(&self) -> Vec<Obj> {
        use Obj::*;
        [
            E1, E2, E3, P1, W1, W2, B1, B2, B3, R1, R2, Rs, A1, A2, Rec, F0, F0b, F1, F1b,
        ]
        .into_iter()
        .filter(|o| self.off(*o).is_none())
        .collect()
    }
}

/// Who a hostile lock word names.
pub struct Idents {
    pub stranger: u64,
    pub participant: u64,
}

/// A resolved store, for the record.
pub struct Done {
    pub what: String,
    /// Where, how wide, the value before and the value written.
    pub at: u64,
    pub width: u32,
    pub old: u64,
    pub new: u64,
}

/// Makes the stores of `case` (all resolved first: a case with an object
/// missing makes none). Returns what was written, or what is missing.
pub fn apply(
    case: &Case,
    k: &Known,
    map: &ArenaMap,
    ids: &Idents,
    rng: &mut Rng,
) -> Result<Vec<Done>, String> {
    let mut resolved = Vec::new();
    for wr in &case.writes {
        let base = k.off(wr.obj).ok_or(format!("{:?} not found", wr.obj))?;
        let at = base + wr.rel;
        let v = match wr.val {
            Val::N(v) => v,
            Val::At(o, d) => k
                .off(o)
                .ok_or(format!("{o:?} not found"))?
                .wrapping_add_signed(d),
            // An id: E1.semid := S3's, A1.idx := M2's (the `Was` of an
            // array or slot at rel 0, width 0, names the object's id).
            Val::Was(o, _, 0, _) => match o {
                Obj::S3Array => k.built.get("s3"),
                Obj::M2 => k.built.get("m2") & 0x7fff,
                _ => return Err(format!("no id for {o:?}")),
            },
            Val::Was(o, rel, width, d) => {
                let f = k.off(o).ok_or(format!("{o:?} not found"))? + rel;
                map.get(f, width).wrapping_add_signed(d)
            }
            Val::Rand => rng.next(),
            Val::Stranger => ids.stranger,
            Val::Participant => ids.participant,
        };
        resolved.push((wr, at, v));
    }
    let mut out = Vec::new();
    for (wr, at, v) in resolved {
        let v = if wr.width == 4 { v & 0xffff_ffff } else { v };
        let old = map.get(at, wr.width);
        if !map.set(at, wr.width, v) {
            return Err(format!(
                "{:?}+{} at {at:#x} is outside the arena",
                wr.obj, wr.rel
            ));
        }
        out.push(Done {
            what: format!("{:?}+{} @{at:#x}: {old:#x} -> {v:#x}", wr.obj, wr.rel),
            at,
            width: wr.width,
            old,
            new: v,
        });
    }
    Ok(out)
}
