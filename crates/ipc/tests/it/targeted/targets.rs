//! The targets: one field of a live object and the hostile values it is
//! given, each value one case. Fields are found by the pinned layouts of
//! the library's shared types (object.rs `SemSlot`, `MsgSlot`, `ShmSlot`;
//! sem/undo.rs `UndoHead`; wait.rs `Waiter`; msg/queue.rs's message
//! block; shm/attach.rs `Attach`; proc.rs `Proc`; arena/header.rs `Procs`,
//! `HeapState`, `Registry`; heap/cache.rs `CacheStack`; lock/mod.rs
//! `Lock`), starting from the objects the builder reported and the links
//! the parent follows in the arena once the victim is at work
//! (known.rs).

use super::build::S1_N;

/// A live object of a case (or a place in the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Obj {
    /// Offset 0: header fields by absolute offset.
    Abs,
    S1,
    S2,
    S3,
    Q1,
    Q2,
    Q3,
    M1,
    M2,
    /// S1's and S3's semaphore arrays (heap).
    S1Array,
    S3Array,
    /// The victim's undo entries on S1, S2, S3; the builder's on S1.
    E1,
    E2,
    E3,
    P1,
    /// S1's sleepers (the victim's threads), in queue order.
    W1,
    W2,
    /// Q1's messages, in order.
    B1,
    B2,
    B3,
    /// Q2's waiting receivers; Q3's waiting sender.
    R1,
    R2,
    Rs,
    /// The victim's attachments of M1 and M2.
    A1,
    A2,
    /// The victim's process record; the process table.
    Rec,
    Procs,
    ProcsTable,
    /// The heap's state; the first two free blocks of classes 32 and 64.
    Heap,
    F0,
    F0b,
    F1,
    F1b,
    /// The registries (sem, msg, shm).
    SemReg,
    MsgReg,
    ShmReg,
    /// Class `c`'s stack in cpu `cpu`'s cache.
    Cache(u8, u8),
}

/// A hostile value.
#[derive(Clone, Copy, Debug)]
pub enum Val {
    N(u64),
    /// An object's offset plus a delta (a link to it, into it, or beside).
    At(Obj, i64),
    /// A field's current value plus a delta.
    Was(Obj, u64, u32, i64),
    /// Random bits (from the case's generator).
    Rand,
    /// The identity of a live thread of a process that maps no arena.
    Stranger,
    /// The identity of a live participant's thread that never lets go
    /// (the builder's).
    Participant,
}

/// One store: `width` bytes (4 or 8) at `obj + rel`.
#[derive(Clone, Copy, Debug)]
pub struct Write {
    pub obj: Obj,
    pub rel: u64,
    pub width: u32,
    pub val: Val,
}

/// One case: the target, the value's description, the stores.
#[derive(Clone, Debug)]
pub struct Case {
    pub target: String,
    pub value: String,
    pub writes: Vec<Write>,
    /// Whether the stores are made once, or again and again while the
    /// victim makes its calls.
    pub race: Race,
}

/// How the stores of a case meet the victim's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Race {
    /// Once, before the victim's calls.
    Once,
    /// Again every 200 µs while the victim makes its calls (a repair or a
    /// cut undone at once; a lock word stolen from whoever holds it).
    Repeat,
    /// The hostile value and the old one in turn, every 200 µs (a field
    /// that changes between two reads of one call, or of two calls).
    Toggle,
}

impl Case {
    /// Every store makes a list loop back on itself (a link to a node of
    /// the same list), once: the library cuts such a list, so the heap
    /// must come out of the case sound (nothing freed twice) whatever the
    /// victim did. Not a message list's longer loops: msgrcv takes
    /// messages from the head without walking the list (a walk per call
    /// would cost its length), so a loop closing behind the head is found
    /// only by the next walk, by which time a block taken may be linked
    /// still; a message linked to itself must be cut when it is taken.
    pub fn heap_kept(&self) -> bool {
        self.race == Race::Once
            && self.writes.iter().all(|w| match w.val {
                Val::At(o, 0) => {
                    let f = family(w.obj, w.rel);
                    f.is_some_and(|f| Some(f) == family(o, w.rel))
                        && (f != Some(MESSAGES) || o == w.obj)
                }
                _ => false,
            })
    }

    /// A live participant keeps a lock forever: the victim's untimed calls
    /// run with a lock limit.
    pub fn held(&self) -> bool {
        self.writes
            .iter()
            .any(|w| matches!(w.val, Val::Participant))
    }
}

// Field offsets (the pinned layouts named in the module doc).
pub(super) const LOCK: u64 = 0;
pub(super) const LOCK_DIRTY: u64 = 8;
pub(super) const SEM_NSEMS: u64 = 96;
pub(super) const SEM_BASE: u64 = 112;
pub(super) const SEM_QUEUE: u64 = 120;
pub(super) const SEM_UNDOS: u64 = 144;
pub(super) const MSG_QBYTES: u64 = 96;
pub(super) const MSG_CBYTES: u64 = 104;
pub(super) const MSG_QNUM: u64 = 112;
pub(super) const MSG_FIRST: u64 = 144;
pub(super) const MSG_LAST: u64 = 152;
pub(super) const MSG_WAITERS: u64 = 160;
pub(super) const MSG_CACHE: u64 = 168;
pub(super) const SHM_SIZE: u64 = 96;
pub(super) const SHM_NATTCH: u64 = 128;
pub(super) const SHM_SERIAL: u64 = 136;
pub(super) const UNDO_NEXT_PROC: u64 = 0;
pub(super) const UNDO_NEXT_SET: u64 = 8;
pub(super) const UNDO_PROC: u64 = 16;
pub(super) const UNDO_SEMID: u64 = 20;
pub(super) const UNDO_NSEMS: u64 = 32;
pub(super) const UNDO_APPLIED: u64 = 36;
pub(super) const W_STATE: u64 = 0;
pub(super) const W_NEXT: u64 = 8;
pub(super) const W_WHO: u64 = 16;
pub(super) const W_NOPS: u64 = 28;
pub(super) const W_OPS: u64 = 32;
pub(super) const W_ENTRY: u64 = 48;
pub(super) const BLK_NEXT: u64 = 0;
pub(super) const BLK_MTYPE: u64 = 8;
pub(super) const BLK_SIZE: u64 = 16;
pub(super) const AT_NEXT: u64 = 0;
pub(super) const AT_ADDR: u64 = 8;
pub(super) const AT_SIZE: u64 = 16;
pub(super) const AT_IDX: u64 = 24;
pub(super) const AT_LEN: u64 = 40;
pub(super) const REC_PID: u64 = 0;
pub(super) const REC_STATE: u64 = 4;
pub(super) const REC_UNDOS: u64 = 16;
pub(super) const REC_ATTACHES: u64 = 24;
pub(super) const PROCS_TABLE: u64 = 32;
pub(super) const PROCS_CAP: u64 = 40;
pub(super) const PROCS_LEN: u64 = 44;
pub(super) const HEAP_TOP: u64 = 32;
pub(super) const HEAP_FREE: u64 = 48;
pub(super) const HEAP_RUNS: u64 = 144;
pub(super) const STACK_ITEMS: u64 = 8;
/// arena/header.rs: `offset_of!(Header, procs) == 128 + 3 * 192 + 256`,
/// the heap's state just before it.
pub(super) const PROCS_AFTER_HEAP: u64 = 256;
/// The bytes of a process record (proc.rs).
pub(super) const PROC_BYTES: u64 = 64;

/// [`family`] of a queue's messages.
pub(super) const MESSAGES: u8 = 4;

/// The list a link field (`obj + rel`) belongs to, if it is one: its
/// nodes' links are the same field.
fn family(obj: Obj, rel: u64) -> Option<u8> {
    use Obj::*;
    Some(match (obj, rel) {
        (E1 | E2 | E3, UNDO_NEXT_PROC) => 1,
        (E1 | P1, UNDO_NEXT_SET) => 2,
        (W1 | W2, W_NEXT) => 3,
        (B1 | B2 | B3, BLK_NEXT) => MESSAGES,
        (R1 | R2, W_NEXT) => 5,
        (Rs, W_NEXT) => 6,
        (A1 | A2, AT_NEXT) => 7,
        _ => return None,
    })
}

fn w(obj: Obj, rel: u64, width: u32, val: Val) -> Write {
    Write {
        obj,
        rel,
        width,
        val,
    }
}

/// The cases of one target: one field, each value alone.
fn field(
    out: &mut Vec<Vec<Case>>,
    target: &str,
    obj: Obj,
    rel: u64,
    width: u32,
    vals: &[(&str, Val)],
) {
    out.push(
        vals.iter()
            .map(|(d, v)| Case {
                target: target.to_string(),
                value: d.to_string(),
                writes: vec![w(obj, rel, width, *v)],
                race: Race::Once,
            })
            .collect(),
    );
}

/// The cases of one target whose values take several stores.
fn multi(out: &mut Vec<Vec<Case>>, target: &str, vals: Vec<(&str, Vec<Write>)>) {
    out.push(
        vals.into_iter()
            .map(|(d, writes)| Case {
                target: target.to_string(),
                value: d.to_string(),
                writes,
                race: Race::Once,
            })
            .collect(),
    );
}

/// Every case, grouped by target, each group in the order its values are
/// tried (the most telling first).
pub fn all(cpus: u32) -> Vec<Vec<Case>> {
    use Obj::*;
    use Val::*;
    let mut t = Vec::new();
    let n = S1_N as u64;
    // ---- semaphore sets ----
    field(
        &mut t,
        "S1.nsems",
        S1,
        SEM_NSEMS,
        4,
        &[
            ("nsems+1 (bigger than the array)", N(n + 1)),
            ("0", N(0)),
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("1", N(1)),
            ("40 (S3's size: far past the array)", N(40)),
            ("nsems-1", N(n - 1)),
            ("0x7fffffff", N(0x7fff_ffff)),
            ("0xffff", N(0xffff)),
        ],
    );
    field(
        &mut t,
        "S2.nsems (inline set)",
        S2,
        SEM_NSEMS,
        4,
        &[
            ("6 (past the inline array)", N(6)),
            ("0", N(0)),
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("5", N(5)),
        ],
    );
    field(
        &mut t,
        "S1.base",
        S1,
        SEM_BASE,
        8,
        &[
            ("S3's array (another object)", At(S3Array, 0)),
            ("0 (inline, with 8 semaphores)", N(0)),
            ("unaligned (+1)", Was(S1, SEM_BASE, 8, 1)),
            ("outside the heap (arena end - 8)", Was(Abs, 16, 8, -8)),
            ("a wait record (W1)", At(W1, 0)),
            ("the process table", At(ProcsTable, 0)),
            ("u64::MAX", N(u64::MAX)),
            ("unaligned (+4)", Was(S1, SEM_BASE, 8, 4)),
            ("the header (64)", N(64)),
            ("a message (B1)", At(B1, 0)),
            ("an undo entry (E2)", At(E2, 0)),
            ("the heap's top - 8", Was(Heap, HEAP_TOP, 8, -8)),
            ("the arena's end", Was(Abs, 16, 8, 0)),
        ],
    );
    field(
        &mut t,
        "S2.base (inline set)",
        S2,
        SEM_BASE,
        8,
        &[
            ("S1's array", At(S1Array, 0)),
            ("arena end - 8", Was(Abs, 16, 8, -8)),
            ("random", Rand),
        ],
    );
    field(
        &mut t,
        "S1.undos (list head)",
        S1,
        SEM_UNDOS,
        8,
        &[
            ("a wait record (W1)", At(W1, 0)),
            ("0 (entries lost)", N(0)),
            ("into an entry (E1+8)", At(E1, 8)),
            ("S2's entry", At(E2, 0)),
            ("the slot itself", At(S1, 0)),
            ("u64::MAX", N(u64::MAX)),
            ("random", Rand),
        ],
    );
    field(
        &mut t,
        "E1.next_set",
        E1,
        UNDO_NEXT_SET,
        8,
        &[
            ("itself (one-entry cycle)", At(E1, 0)),
            ("0 (P1 cut off)", N(0)),
            ("random", Rand),
            ("a wait record (W1)", At(W1, 0)),
        ],
    );
    field(
        &mut t,
        "P1.next_set (list tail)",
        P1,
        UNDO_NEXT_SET,
        8,
        &[("E1 (two-entry cycle)", At(E1, 0)), ("itself", At(P1, 0))],
    );
    field(
        &mut t,
        "E3.next_proc (victim's list head entry)",
        E3,
        UNDO_NEXT_PROC,
        8,
        &[
            ("itself (one-entry cycle)", At(E3, 0)),
            ("random", Rand),
            ("the builder's entry (P1)", At(P1, 0)),
            ("an attachment (A1)", At(A1, 0)),
            ("0", N(0)),
        ],
    );
    field(
        &mut t,
        "E2.next_proc",
        E2,
        UNDO_NEXT_PROC,
        8,
        &[("E3 (two-entry cycle)", At(E3, 0)), ("itself", At(E2, 0))],
    );
    field(
        &mut t,
        "E1.next_proc (tail)",
        E1,
        UNDO_NEXT_PROC,
        8,
        &[
            ("E2 (cycle after the head)", At(E2, 0)),
            ("itself", At(E1, 0)),
        ],
    );
    field(
        &mut t,
        "E1.nsems",
        E1,
        UNDO_NSEMS,
        4,
        &[
            ("set's nsems+1", N(n + 1)),
            ("0", N(0)),
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("0x10000", N(0x10000)),
            ("1", N(1)),
        ],
    );
    field(
        &mut t,
        "E1.proc",
        E1,
        UNDO_PROC,
        4,
        &[("u32::MAX", N(u64::from(u32::MAX))), ("0", N(0))],
    );
    field(
        &mut t,
        "E1.semid",
        E1,
        UNDO_SEMID,
        4,
        &[("S3's id", Was(S3Array, 0, 0, 0)), ("random", Rand)],
    );
    field(
        &mut t,
        "E1.applied",
        E1,
        UNDO_APPLIED,
        4,
        &[("1", N(1)), ("random", Rand)],
    );
    // ---- sleepers (wait records) ----
    field(
        &mut t,
        "W1.next",
        W1,
        W_NEXT,
        8,
        &[
            ("itself (self-cycle)", At(W1, 0)),
            ("random", Rand),
            ("a message (B1)", At(B1, 0)),
            ("0 (W2 cut off)", N(0)),
            ("an undo entry (E1)", At(E1, 0)),
        ],
    );
    field(
        &mut t,
        "W2.next (tail)",
        W2,
        W_NEXT,
        8,
        &[("W1 (two-record cycle)", At(W1, 0)), ("itself", At(W2, 0))],
    );
    field(
        &mut t,
        "W1.nops",
        W1,
        W_NOPS,
        4,
        &[
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("0", N(0)),
            ("0x8000000 (1 GiB of operations)", N(0x0800_0000)),
            ("5 (past its block)", N(5)),
            ("1<<20", N(1 << 20)),
        ],
    );
    field(
        &mut t,
        "W1.ops",
        W1,
        W_OPS,
        8,
        &[
            ("0", N(0)),
            ("random", Rand),
            ("the record itself", At(W1, 0)),
            ("unaligned (+4)", Was(W1, W_OPS, 8, 4)),
            ("the heap's start", Was(Abs, 24, 8, 0)),
            ("arena end - 8", Was(Abs, 16, 8, -8)),
        ],
    );
    field(
        &mut t,
        "W1.who",
        W1,
        W_WHO,
        8,
        &[
            ("0", N(0)),
            ("random", Rand),
            ("W2's sleeper", Was(W2, W_WHO, 8, 0)),
            ("a stranger", Stranger),
        ],
    );
    field(
        &mut t,
        "W1.state",
        W1,
        W_STATE,
        4,
        &[("DONE (2)", N(2)), ("random", Rand)],
    );
    field(
        &mut t,
        "W1.undo entry",
        W1,
        W_ENTRY,
        8,
        &[
            ("S2's entry (E2)", At(E2, 0)),
            ("the builder's entry (P1)", At(P1, 0)),
            ("random", Rand),
        ],
    );
    // ---- message queues ----
    field(
        &mut t,
        "B1.next (Q1's messages)",
        B1,
        BLK_NEXT,
        8,
        &[
            ("itself (self-cycle)", At(B1, 0)),
            ("random", Rand),
            ("a wait record (R1)", At(R1, 0)),
            ("0 (B2, B3 cut off)", N(0)),
        ],
    );
    field(
        &mut t,
        "B2.next",
        B2,
        BLK_NEXT,
        8,
        &[("B1 (two-message cycle)", At(B1, 0)), ("itself", At(B2, 0))],
    );
    field(
        &mut t,
        "B3.next (tail)",
        B3,
        BLK_NEXT,
        8,
        &[
            ("itself", At(B3, 0)),
            ("B1 (three-message cycle)", At(B1, 0)),
        ],
    );
    field(
        &mut t,
        "B1.size",
        B1,
        BLK_SIZE,
        4,
        &[
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("0x10000", N(0x10000)),
            ("0", N(0)),
        ],
    );
    field(
        &mut t,
        "B1.mtype",
        B1,
        BLK_MTYPE,
        8,
        &[("0", N(0)), ("i64::MIN", N(1 << 63))],
    );
    // B3 is still queued when the victim searches for the lowest type.
    field(
        &mut t,
        "B3.mtype (queued at msgrcv(<=2))",
        B3,
        BLK_MTYPE,
        8,
        &[
            ("i64::MIN", N(1 << 63)),
            ("0", N(0)),
            ("-1", N(u64::MAX)),
            ("i64::MAX", N(i64::MAX as u64)),
        ],
    );
    field(
        &mut t,
        "Q1.first",
        Q1,
        MSG_FIRST,
        8,
        &[
            ("0 (with qnum 3)", N(0)),
            ("B2", At(B2, 0)),
            ("random", Rand),
            ("a wait record (R1)", At(R1, 0)),
            ("into B1 (+8)", At(B1, 8)),
            ("u64::MAX", N(u64::MAX)),
        ],
    );
    field(
        &mut t,
        "Q1.last",
        Q1,
        MSG_LAST,
        8,
        &[("0", N(0)), ("random", Rand), ("B1", At(B1, 0))],
    );
    field(
        &mut t,
        "Q1.qnum",
        Q1,
        MSG_QNUM,
        8,
        &[
            ("u64::MAX", N(u64::MAX)),
            ("0", N(0)),
            ("1<<40", N(1 << 40)),
        ],
    );
    field(
        &mut t,
        "Q1.cbytes",
        Q1,
        MSG_CBYTES,
        8,
        &[("u64::MAX", N(u64::MAX)), ("0", N(0))],
    );
    field(
        &mut t,
        "Q1.qbytes",
        Q1,
        MSG_QBYTES,
        8,
        &[
            ("u64::MAX", N(u64::MAX)),
            ("0", N(0)),
            ("1", N(1)),
            ("1<<63", N(1 << 63)),
        ],
    );
    multi(
        &mut t,
        "Q1.qbytes+cbytes",
        vec![(
            "qbytes u64::MAX, cbytes u64::MAX",
            vec![
                w(Q1, MSG_QBYTES, 8, N(u64::MAX)),
                w(Q1, MSG_CBYTES, 8, N(u64::MAX)),
            ],
        )],
    );
    multi(
        &mut t,
        "Q2.qbytes+qnum",
        vec![(
            "qbytes u64::MAX, qnum u64::MAX",
            vec![
                w(Q2, MSG_QBYTES, 8, N(u64::MAX)),
                w(Q2, MSG_QNUM, 8, N(u64::MAX)),
            ],
        )],
    );
    field(
        &mut t,
        "Q2.waiters (receivers)",
        Q2,
        MSG_WAITERS,
        8,
        &[
            ("0 (receivers lost)", N(0)),
            ("random", Rand),
            ("a message (B1)", At(B1, 0)),
            ("a semaphore sleeper (W1)", At(W1, 0)),
            ("R2 (R1 skipped)", At(R2, 0)),
        ],
    );
    field(
        &mut t,
        "R1.next",
        R1,
        W_NEXT,
        8,
        &[
            ("itself (self-cycle)", At(R1, 0)),
            ("random", Rand),
            ("0 (R2 cut off)", N(0)),
        ],
    );
    field(
        &mut t,
        "R2.next (tail)",
        R2,
        W_NEXT,
        8,
        &[("R1 (two-record cycle)", At(R1, 0)), ("itself", At(R2, 0))],
    );
    field(
        &mut t,
        "R1.who",
        R1,
        W_WHO,
        8,
        &[("0", N(0)), ("a stranger", Stranger)],
    );
    field(
        &mut t,
        "Q3.waiters (sender)",
        Q3,
        MSG_WAITERS,
        8,
        &[("0 (sender lost)", N(0)), ("random", Rand)],
    );
    field(
        &mut t,
        "Rs.next (Q3's sender)",
        Rs,
        W_NEXT,
        8,
        &[
            ("itself (self-cycle)", At(Rs, 0)),
            ("R1 (another queue's record)", At(R1, 0)),
        ],
    );
    field(
        &mut t,
        "Q1.cache",
        Q1,
        MSG_CACHE,
        8,
        &[("a queued message (B2)", At(B2, 0)), ("random", Rand)],
    );
    // ---- segments ----
    field(
        &mut t,
        "M1.size",
        M1,
        SHM_SIZE,
        8,
        &[
            ("a page past its file", Was(M1, SHM_SIZE, 8, 4096)),
            ("1 MiB past its file", Was(M1, SHM_SIZE, 8, 1 << 20)),
            ("1<<40", N(1 << 40)),
            ("u64::MAX", N(u64::MAX)),
            ("0", N(0)),
            ("1", N(1)),
        ],
    );
    field(
        &mut t,
        "M1.serial",
        M1,
        SHM_SERIAL,
        8,
        &[
            (
                "M2's serial (another segment's file)",
                Was(M2, SHM_SERIAL, 8, 0),
            ),
            ("0", N(0)),
            ("u64::MAX", N(u64::MAX)),
            ("random", Rand),
        ],
    );
    field(
        &mut t,
        "M1.nattch",
        M1,
        SHM_NATTCH,
        8,
        &[
            ("0", N(0)),
            ("u64::MAX", N(u64::MAX)),
            ("1<<40", N(1 << 40)),
        ],
    );
    // ---- the victim's process record and attachments ----
    field(
        &mut t,
        "Rec.undos (victim's list head)",
        Rec,
        REC_UNDOS,
        8,
        &[
            ("into an entry (E1+8)", At(E1, 8)),
            ("0 (entries lost)", N(0)),
            ("random", Rand),
            ("an attachment (A1)", At(A1, 0)),
            ("the builder's entry (P1)", At(P1, 0)),
            ("a wait record (W1)", At(W1, 0)),
        ],
    );
    field(
        &mut t,
        "Rec.attaches (victim's list head)",
        Rec,
        REC_ATTACHES,
        8,
        &[
            ("an undo entry (E1)", At(E1, 0)),
            ("0 (attachments lost)", N(0)),
            ("random", Rand),
            ("into A1 (+8)", At(A1, 8)),
        ],
    );
    field(
        &mut t,
        "A1.next (tail)",
        A1,
        AT_NEXT,
        8,
        &[
            ("A2 (two-entry cycle)", At(A2, 0)),
            ("itself", At(A1, 0)),
            ("random", Rand),
        ],
    );
    field(
        &mut t,
        "A2.next (head)",
        A2,
        AT_NEXT,
        8,
        &[("itself (self-cycle)", At(A2, 0))],
    );
    field(
        &mut t,
        "A1.addr",
        A1,
        AT_ADDR,
        8,
        &[("0", N(0)), ("random", Rand)],
    );
    field(
        &mut t,
        "A1.size",
        A1,
        AT_SIZE,
        8,
        &[("1<<40", N(1 << 40)), ("u64::MAX", N(u64::MAX))],
    );
    field(
        &mut t,
        "A1.len",
        A1,
        AT_LEN,
        8,
        &[("1<<40", N(1 << 40)), ("u64::MAX", N(u64::MAX))],
    );
    field(
        &mut t,
        "A1.idx",
        A1,
        AT_IDX,
        4,
        &[
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("M2's (another segment)", Was(M2, 0, 0, 0)),
        ],
    );
    field(&mut t, "Rec.pid", Rec, REC_PID, 4, &[("random", Rand)]);
    field(
        &mut t,
        "Rec.state",
        Rec,
        REC_STATE,
        4,
        &[("0 (free)", N(0)), ("random", Rand)],
    );
    // ---- the process table ----
    field(
        &mut t,
        "procs.cap",
        Procs,
        PROCS_CAP,
        4,
        &[
            ("u32::MAX", N(u64::from(u32::MAX))),
            ("0", N(0)),
            ("1 (victim's record outside)", N(1)),
            ("(1<<20)+1", N((1 << 20) + 1)),
            ("twice its table", Was(Procs, PROCS_CAP, 4, 32)),
        ],
    );
    field(
        &mut t,
        "procs.table",
        Procs,
        PROCS_TABLE,
        8,
        &[
            ("S3's array (another object)", At(S3Array, 0)),
            ("0", N(0)),
            ("random", Rand),
            (
                "shifted by a record",
                Was(Procs, PROCS_TABLE, 8, PROC_BYTES as i64),
            ),
            ("arena end - 64", Was(Abs, 16, 8, -64)),
            ("unaligned (+4)", Was(Procs, PROCS_TABLE, 8, 4)),
        ],
    );
    field(
        &mut t,
        "procs.len",
        Procs,
        PROCS_LEN,
        4,
        &[("u32::MAX", N(u64::from(u32::MAX))), ("0", N(0))],
    );
    // ---- the heap ----
    let free_head = |c: u64| HEAP_FREE + 8 * c;
    field(
        &mut t,
        "heap.free[32B] head",
        Heap,
        free_head(0),
        8,
        &[
            ("a live wait record (W1)", At(W1, 0)),
            ("random", Rand),
            ("unaligned (+8)", At(F0, 8)),
            ("arena end - 32", Was(Abs, 16, 8, -32)),
            ("S3's array", At(S3Array, 0)),
        ],
    );
    field(
        &mut t,
        "heap.free[64B] head",
        Heap,
        free_head(1),
        8,
        &[
            ("a live wait record (W1)", At(W1, 0)),
            ("random", Rand),
            ("an undo entry (E1)", At(E1, 0)),
        ],
    );
    field(
        &mut t,
        "F0.link (free 32B block)",
        F0,
        0,
        8,
        &[
            ("itself (self-cycle)", At(F0, 0)),
            ("random", Rand),
            ("a live message (B1)", At(B1, 0)),
        ],
    );
    field(
        &mut t,
        "F0b.link",
        F0b,
        0,
        8,
        &[("F0 (two-block cycle)", At(F0, 0))],
    );
    field(
        &mut t,
        "F1.link (free 64B block)",
        F1,
        0,
        8,
        &[
            ("itself (self-cycle)", At(F1, 0)),
            ("a live wait record (W2)", At(W2, 0)),
        ],
    );
    field(
        &mut t,
        "F1b.link",
        F1b,
        0,
        8,
        &[("F1 (two-block cycle)", At(F1, 0))],
    );
    // The lists with the caches emptied (leaked), so that the victim's
    // next allocations of the class reach them.
    let empty = |c: u8| -> Vec<Write> {
        (0..cpus as u8)
            .map(|cpu| w(Cache(cpu, c), 0, 8, N(0)))
            .collect()
    };
    let with = |mut v: Vec<Write>, x: Write| {
        v.push(x);
        v
    };
    multi(
        &mut t,
        "heap.free lists, caches emptied",
        vec![
            ("32B: F0 self-cycle", with(empty(0), w(F0, 0, 8, At(F0, 0)))),
            (
                "64B: head = a live wait record (W1)",
                with(empty(1), w(Heap, free_head(1), 8, At(W1, 0))),
            ),
            (
                "64B: F1b -> F1 two-block cycle",
                with(empty(1), w(F1b, 0, 8, At(F1, 0))),
            ),
            (
                "32B: head random",
                with(empty(0), w(Heap, free_head(0), 8, Rand)),
            ),
            (
                "32B: head = a live message (B1)",
                with(empty(0), w(Heap, free_head(0), 8, At(B1, 0))),
            ),
        ],
    );
    let every_cpu = |c: u8, v: Val| -> Vec<Write> {
        (0..cpus as u8)
            .map(|cpu| w(Cache(cpu, c), 0, 8, v))
            .collect()
    };
    multi(
        &mut t,
        "cache counts (every cpu)",
        vec![
            ("32B: 16 (past the capacity)", every_cpu(0, N(16))),
            ("64B: u64::MAX", every_cpu(1, N(u64::MAX))),
            ("64B: 15 (full of whatever is there)", every_cpu(1, N(15))),
            ("32B: 0 (blocks leaked)", every_cpu(0, N(0))),
            (
                "64B: 1, holding a live wait record (W1)",
                (0..cpus as u8)
                    .flat_map(|cpu| {
                        [
                            w(Cache(cpu, 1), STACK_ITEMS, 8, At(W1, 0)),
                            w(Cache(cpu, 1), 0, 8, N(1)),
                        ]
                    })
                    .collect(),
            ),
            ("128B: 1<<40", every_cpu(2, N(1 << 40))),
        ],
    );
    field(
        &mut t,
        "heap.top",
        Heap,
        HEAP_TOP,
        8,
        &[
            ("the arena's end", Was(Abs, 16, 8, 0)),
            ("the heap's start (nothing handed out)", Was(Abs, 24, 8, 0)),
            ("u64::MAX", N(u64::MAX)),
            (
                "top - 4096 (live objects above it)",
                Was(Heap, HEAP_TOP, 8, -4096),
            ),
        ],
    );
    field(
        &mut t,
        "heap.runs",
        Heap,
        HEAP_RUNS,
        8,
        &[("random", Rand), ("S3's array", At(S3Array, 0))],
    );
    // ---- every lock word ----
    let locks: [(&str, Obj, u64); 8] = [
        ("S1.lock", S1, LOCK),
        ("Q2.lock", Q2, LOCK),
        ("M1.lock", M1, LOCK),
        ("sem registry lock", SemReg, LOCK),
        ("msg registry lock", MsgReg, LOCK),
        ("shm registry lock", ShmReg, LOCK),
        ("heap lock", Heap, LOCK),
        ("procs lock", Procs, LOCK),
    ];
    for (name, obj, rel) in locks {
        multi(
            &mut t,
            name,
            vec![
                ("a stranger's identity", vec![w(obj, rel, 8, Stranger)]),
                ("random", vec![w(obj, rel, 8, Rand)]),
                (
                    "a live participant that never lets go",
                    vec![w(obj, rel, 8, Participant)],
                ),
                (
                    "0, repair pending (dirty 1)",
                    vec![w(obj, rel, 8, N(0)), w(obj, rel + LOCK_DIRTY, 4, N(1))],
                ),
            ],
        );
    }
    // ---- counts with the heap's top moved to the arena's end, so that
    // the checks against the handed-out part pass for any count the heap
    // could hold: what the victim then allocates in proportion ----
    let top_at_end = || w(Heap, HEAP_TOP, 8, Was(Abs, 16, 8, 0));
    let heap_start = Was(Abs, 24, 8, 0);
    multi(
        &mut t,
        "counts with the heap's top at the arena's end",
        vec![
            (
                "W1: nops 1<<27 (1 GiB of operations), ops at the heap's start",
                vec![
                    top_at_end(),
                    w(W1, W_NOPS, 4, N(1 << 27)),
                    w(W1, W_OPS, 8, heap_start),
                ],
            ),
            (
                "S1: nsems 1<<29 (4 GiB of semaphores), base at the heap's start",
                vec![
                    top_at_end(),
                    w(S1, SEM_NSEMS, 4, N(1 << 29)),
                    w(S1, SEM_BASE, 8, heap_start),
                ],
            ),
            (
                "E1: nsems 1<<27",
                vec![top_at_end(), w(E1, UNDO_NSEMS, 4, N(1 << 27))],
            ),
            (
                "procs: cap 1<<20, table at the heap's start",
                vec![
                    top_at_end(),
                    w(Procs, PROCS_CAP, 4, N(1 << 20)),
                    w(Procs, PROCS_TABLE, 8, heap_start),
                ],
            ),
            (
                "B3: size u32::MAX",
                vec![top_at_end(), w(B3, BLK_SIZE, 4, N(u64::from(u32::MAX)))],
            ),
        ],
    );
    // ---- while the victim works ----
    let mut racing = |target: &str, race: Race, vals: Vec<(&str, Vec<Write>)>| {
        t.push(
            vals.into_iter()
                .map(|(d, writes)| Case {
                    target: target.to_string(),
                    value: d.to_string(),
                    writes,
                    race,
                })
                .collect(),
        );
    };
    racing(
        "lock words stolen (0, again and again)",
        Race::Repeat,
        vec![
            ("S1.lock", vec![w(S1, LOCK, 8, N(0))]),
            ("Q2.lock", vec![w(Q2, LOCK, 8, N(0))]),
            ("heap lock", vec![w(Heap, LOCK, 8, N(0))]),
            ("procs lock", vec![w(Procs, LOCK, 8, N(0))]),
            ("sem registry lock", vec![w(SemReg, LOCK, 8, N(0))]),
            ("M1.lock", vec![w(M1, LOCK, 8, N(0))]),
        ],
    );
    racing(
        "links made cycles again and again",
        Race::Repeat,
        vec![
            ("W1.next = W1", vec![w(W1, W_NEXT, 8, At(W1, 0))]),
            ("R1.next = R1", vec![w(R1, W_NEXT, 8, At(R1, 0))]),
            ("B2.next = B1", vec![w(B2, BLK_NEXT, 8, At(B1, 0))]),
            (
                "E3.next_proc = E3",
                vec![w(E3, UNDO_NEXT_PROC, 8, At(E3, 0))],
            ),
            ("A2.next = A2", vec![w(A2, AT_NEXT, 8, At(A2, 0))]),
            ("P1.next_set = E1", vec![w(P1, UNDO_NEXT_SET, 8, At(E1, 0))]),
        ],
    );
    racing(
        "fields changing between reads (in turn with the old value)",
        Race::Toggle,
        vec![
            ("S1.nsems = nsems+1", vec![w(S1, SEM_NSEMS, 4, N(n + 1))]),
            (
                "S1.base = S3's array",
                vec![w(S1, SEM_BASE, 8, At(S3Array, 0))],
            ),
            ("S1.nsems = 0", vec![w(S1, SEM_NSEMS, 4, N(0))]),
            ("Q1.qnum = u64::MAX", vec![w(Q1, MSG_QNUM, 8, N(u64::MAX))]),
            (
                "B3.size = u32::MAX",
                vec![w(B3, BLK_SIZE, 4, N(u64::from(u32::MAX)))],
            ),
            (
                "W1.nops = u32::MAX",
                vec![w(W1, W_NOPS, 4, N(u64::from(u32::MAX)))],
            ),
            ("procs.cap = 1", vec![w(Procs, PROCS_CAP, 4, N(1))]),
            ("M1.size = 1 (shrunk)", vec![w(M1, SHM_SIZE, 8, N(1))]),
            (
                "M1.size = a page past its file",
                vec![w(M1, SHM_SIZE, 8, Was(M1, SHM_SIZE, 8, 4096))],
            ),
        ],
    );
    racing(
        "the heap while the victim allocates",
        Race::Repeat,
        vec![
            (
                "free[64B] head = a live wait record (W1)",
                vec![w(Heap, free_head(1), 8, At(W1, 0))],
            ),
            ("32B cache counts 16 (every cpu)", every_cpu(0, N(16))),
        ],
    );
    t
}

/// Round-robin order: the first value of every target, then the second...
pub fn interleave(groups: Vec<Vec<Case>>) -> Vec<Case> {
    let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = Vec::new();
    for k in 0..longest {
        for g in &groups {
            if let Some(c) = g.get(k) {
                out.push(c.clone());
            }
        }
    }
    out
}
