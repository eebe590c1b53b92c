//! The object slots: one fixed-size record per index and mechanism, holding
//! `struct kern_ipc_perm` and the mechanism's own fields. A slot is never
//! anything but a slot of its mechanism (type-stable memory), so a lookup
//! without the registry lock may lock it and then check that it is still
//! the object it wanted, as Linux does under RCU.
//!
//! Field ownership: `state` and `seq` change only under both the registry
//! lock and the object lock; every other field under the object lock
//! (creation fills them under the registry lock before publishing `state`).

use crate::arena::map::Shared;
use crate::lock::Lock;
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64};

/// `state`: unused.
pub const FREE: u32 = 0;
/// `state`: being created by the registry holder; not yet visible.
pub const CREATING: u32 = 1;
/// `state`: a live object.
pub const LIVE: u32 = 2;
/// `state`: being removed by the registry holder; already invisible.
pub const DELETING: u32 = 3;

/// `struct kern_ipc_perm`, as ipcns keeps it.
///
/// # Layout
/// 96 bytes: `lock` @0, `generation` @24, `state` @32, `seq` @36, `key` @40,
/// `uid` @44, `gid` @48, `cuid` @52, `cgid` @56, `mode` @60, `ctime` @64,
/// `perm_seq` @72, `spare` @80 (a segment's file, shm/file.rs; a set's
/// or a queue's activity counters, [`Counted`]).
#[repr(C, align(8))]
pub struct Head {
    pub lock: Lock,
    /// Changes at every creation and removal in this slot and never
    /// repeats: a lookup that saw generation G and finds another after
    /// locking knows the object it looked up is gone, even if the new one
    /// has the same id (a reused index with a wrapped or chosen sequence).
    pub generation: AtomicU64,
    pub state: AtomicU32,
    pub seq: AtomicU32,
    pub key: AtomicI32,
    /// Owner and creator ids, as the arena's creating user namespace sees them.
    pub uid: AtomicU32,
    pub gid: AtomicU32,
    pub cuid: AtomicU32,
    pub cgid: AtomicU32,
    /// `mode & S_IRWXUGO`, plus SHM_DEST / SHM_LOCKED for segments.
    pub mode: AtomicU32,
    /// Last change time (seconds), for every mechanism.
    pub ctime: AtomicI64,
    /// Odd while IPC_SET writes `uid`, `gid` and `mode` (object and
    /// registry locks held), so that a lookup without the registry lock
    /// (`recent.rs`) never combines two settings. A holder that dies
    /// leaves it odd: such lookups then take the lock until the next
    /// IPC_SET makes it even again.
    pub perm_seq: AtomicU64,
    pub spare: [AtomicU64; 2],
}

/// Semaphores kept inside the slot (sets of up to this many need no heap).
pub const INLINE_SEMS: usize = 5;

/// One semaphore: `struct sem`'s value and last pid, in one word so that
/// both change in a single store (a holder killed between two stores would
/// leave a value with the wrong pid).
///
/// # Layout
/// 8 bytes: `semval` in the low 32 bits, `sempid` in the high.
#[repr(C, align(8))]
pub struct Sem {
    word: AtomicU64,
}

impl Sem {
    /// `semval`.
    #[inline]
    pub fn val(&self) -> i32 {
        self.word.load(core::sync::atomic::Ordering::Relaxed) as u32 as i32
    }

    /// `sempid`.
    #[inline]
    pub fn pid(&self) -> i32 {
        (self.word.load(core::sync::atomic::Ordering::Relaxed) >> 32) as u32 as i32
    }

    /// Sets both in one store.
    #[inline]
    pub fn set(&self, val: i32, pid: i32) {
        self.word.store(
            u64::from(val as u32) | (u64::from(pid as u32) << 32),
            core::sync::atomic::Ordering::Relaxed,
        );
    }
}

/// A semaphore set (`struct sem_array`).
///
/// # Layout
/// 192 bytes: head, `nsems` @96, `otime` @104, `base` @112, `queue` @120,
/// `journal_op` @128, `journal_off` @136, `undos` @144, `inline` @152.
#[repr(C, align(64))]
pub struct SemSlot {
    pub head: Head,
    pub nsems: AtomicU32,
    pub flags: AtomicU32,
    pub otime: AtomicI64,
    /// Heap offset of the `Sem` array, or 0 when it is `inline`.
    pub base: AtomicU64,
    /// Waiters (semop), head of a list in the heap; 0 = none.
    pub queue: AtomicU64,
    /// Roll-forward journal for multi-word updates (SETALL).
    pub journal_op: AtomicU32,
    pub journal_len: AtomicU32,
    pub journal_off: AtomicU64,
    /// The set's SEM_UNDO entries (`sma->list_id`): heap offset of the
    /// first, linked through their `next_set`. Protected by the set lock.
    pub undos: AtomicU64,
    pub inline: [Sem; INLINE_SEMS],
}

/// A message queue (`struct msg_queue`). Every field but `head` is
/// protected by the queue's lock (`head.lock`); msg/queue.rs says how each
/// change survives the death of the lock's holder.
///
/// # Layout
/// 192 bytes: head, `qbytes` @96, `cbytes` @104, `qnum` @112, `lspid` @120,
/// `lrpid` @124, `stime` @128, `rtime` @136, `first` @144, `last` @152,
/// `waiters` @160, `cache` @168, `journal` @176, `journal_aux` @184.
/// (Layout version 2 named the words @160 and @168 `senders` and
/// `receivers` and left @176 and @184 spare; all four were zero in every
/// arena, as they are in a queue with nothing waiting, cached or
/// journaled.)
#[repr(C, align(64))]
pub struct MsgSlot {
    pub head: Head,
    /// The queue's size limit in bytes (`q_qbytes`; it is also the limit
    /// on the number of messages). Fits 32 bits (IPC_SET truncates).
    pub qbytes: AtomicU64,
    /// Bytes and messages queued (`q_cbytes`, `q_qnum`); neither exceeds
    /// `qbytes`.
    pub cbytes: AtomicU64,
    pub qnum: AtomicU64,
    pub lspid: AtomicI32,
    pub lrpid: AtomicI32,
    pub stime: AtomicI64,
    pub rtime: AtomicI64,
    /// The message list (heap offsets of message blocks), oldest first.
    pub first: AtomicU64,
    pub last: AtomicU64,
    /// Blocked senders and receivers: one FIFO list of wait records
    /// (`wait::Waiter`, heap offsets), each marked with its kind.
    pub waiters: AtomicU64,
    /// One free message block kept for the next msgsnd; 0 = none.
    pub cache: AtomicU64,
    /// Roll-forward journal: a message block's offset or-ed with the
    /// operation in progress (msg/queue.rs `OP_*`); 0 = none.
    pub journal: AtomicU64,
    /// The journal's second word: the counts after the operation, or the
    /// wait record it completes or moves.
    pub journal_aux: AtomicU64,
}

/// A shared memory segment (`struct shmid_kernel`).
///
/// # Layout
/// 192 bytes: head, `size` @96, `atime` @104, `dtime` @112, `cpid` @120,
/// `lpid` @124, `nattch` @128, `serial` @136, `creator_start` @144,
/// `spare` @168 (a huge page segment's file: shm/huge.rs), `calls` @184. The head's
/// `spare` (@80, @88) holds a normal segment's file's device and inode
/// (shm/file.rs); layout version 3 left both zero, which still reads as
/// "no file recorded".
#[repr(C, align(64))]
pub struct ShmSlot {
    pub head: Head,
    pub size: AtomicU64,
    pub atime: AtomicI64,
    pub dtime: AtomicI64,
    pub cpid: AtomicI32,
    pub lpid: AtomicI32,
    pub nattch: AtomicU64,
    /// Serial number of the backing file (`<arena>.shm.<serial>`).
    pub serial: AtomicU64,
    /// Start time (clock ticks since boot) of the creating process, which
    /// with `cpid` tells whether the creator still lives (shm_rmid_forced).
    pub creator_start: AtomicU64,
    /// The attachment being counted or uncounted (`shm/attach.rs`): heap
    /// offset and operation, so the next locker finishes it.
    pub journal_attach: AtomicU64,
    pub journal_op: AtomicU64,
    pub spare: [AtomicU64; 2],
    /// Activity (`ipcns top`): the shmat and shmdt calls that counted or
    /// uncounted an attachment ([`bump`]). The slot's last 8 bytes
    /// were padding before, zero in every arena.
    pub calls: AtomicU64,
}

/// Adds one to an activity counter (`ipcns top`, [`Counted`]): the
/// operations each object served, which the kernel does not count. The
/// object's lock is held: a plain load and store, no atomic
/// read-modify-write, on a line the operation writes anyway (a set's
/// `otime`, a queue's `cbytes`, a segment's `atime`). A holder killed
/// between the two loses one count; a stray write makes a wrong count,
/// nothing else reads it.
#[inline(always)]
pub fn bump(c: &AtomicU64) {
    use core::sync::atomic::Ordering::Relaxed;
    c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
}

/// The activity counters kept in the free words of the slots (`head.spare`
/// of sets and queues, which only segments use; `calls` of segments).
/// Zeroed when an object is created; an object made by an earlier build
/// starts from the count its index's previous object left.
pub trait Counted {
    /// Sets: semop calls completed. Queues: messages sent. Segments:
    /// shmat and shmdt calls.
    fn first_count(&self) -> &AtomicU64;
    /// Sets: semop calls that slept. Queues: messages received. Segments:
    /// none (None).
    fn second_count(&self) -> Option<&AtomicU64>;
}

impl Counted for SemSlot {
    fn first_count(&self) -> &AtomicU64 {
        &self.head.spare[0]
    }
    fn second_count(&self) -> Option<&AtomicU64> {
        Some(&self.head.spare[1])
    }
}

impl Counted for MsgSlot {
    fn first_count(&self) -> &AtomicU64 {
        &self.head.spare[0]
    }
    fn second_count(&self) -> Option<&AtomicU64> {
        Some(&self.head.spare[1])
    }
}

impl Counted for ShmSlot {
    fn first_count(&self) -> &AtomicU64 {
        &self.calls
    }
    fn second_count(&self) -> Option<&AtomicU64> {
        None
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Head>() == 96);
    assert!(offset_of!(Head, generation) == 24);
    assert!(offset_of!(Head, state) == 32);
    assert!(offset_of!(Head, key) == 40);
    assert!(offset_of!(Head, mode) == 60);
    assert!(offset_of!(Head, ctime) == 64);
    assert!(offset_of!(Head, perm_seq) == 72);
    assert!(size_of::<SemSlot>() == crate::arena::layout::SLOT_SIZE as usize);
    assert!(offset_of!(SemSlot, nsems) == 96);
    assert!(offset_of!(SemSlot, undos) == 144);
    assert!(offset_of!(SemSlot, inline) == 152);
    assert!(size_of::<MsgSlot>() == crate::arena::layout::SLOT_SIZE as usize);
    assert!(offset_of!(MsgSlot, first) == 144);
    assert!(offset_of!(MsgSlot, waiters) == 160);
    assert!(offset_of!(MsgSlot, journal) == 176);
    assert!(offset_of!(MsgSlot, journal_aux) == 184);
    assert!(size_of::<ShmSlot>() == crate::arena::layout::SLOT_SIZE as usize);
    assert!(offset_of!(ShmSlot, nattch) == 128);
    assert!(offset_of!(Head, spare) == 80);
    assert!(offset_of!(ShmSlot, spare) == 168);
    assert!(offset_of!(ShmSlot, calls) == 184);
};

// repr(C), atomics and Locks only, no Drop; any bits are valid.
crate::arena::map::shared_types!(Head, Sem, SemSlot, MsgSlot, ShmSlot);

/// A slot type with its `Head` first.
pub trait Slot: Shared {
    fn head(&self) -> &Head;
}

impl Slot for SemSlot {
    fn head(&self) -> &Head {
        &self.head
    }
}
impl Slot for MsgSlot {
    fn head(&self) -> &Head {
        &self.head
    }
}
impl Slot for ShmSlot {
    fn head(&self) -> &Head {
        &self.head
    }
}
