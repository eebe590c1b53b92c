//! The arena header: identity, limits, one registry per mechanism, the heap.

use crate::lock::RobustMutex;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

/// "IPCNSARN" in little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"IPCNSARN");
/// Bumped on any change of a shared layout.
pub const LAYOUT_VERSION: u32 = 1;
/// `flags` bit: ipcmni_extend mode.
pub const FLAG_EXTEND: u32 = 1;
/// `flags` bit: created shared (the creation mode gave group or other any
/// permission), so other users may attach when they ask to.
pub const FLAG_SHARED: u32 = 2;

/// The namespace's limits and sysctls (`/proc/sys/kernel/...`), as Linux
/// keeps them per IPC namespace. Protected by the sem registry lock for
/// writes; read without a lock (each is one atomic word).
///
/// # Layout
/// 56 bytes.
#[repr(C, align(8))]
pub struct Limits {
    /// `sem`: SEMMSL, SEMMNS, SEMOPM, SEMMNI (`ns->sem_ctls[0..4]`).
    pub semmsl: AtomicI32,
    pub semmns: AtomicI32,
    pub semopm: AtomicI32,
    pub semmni: AtomicI32,
    pub msgmni: AtomicI32,
    pub msgmax: AtomicI32,
    pub msgmnb: AtomicI32,
    pub shmmni: AtomicI32,
    pub shmmax: AtomicU64,
    pub shmall: AtomicU64,
    pub shm_rmid_forced: AtomicI32,
    pub _pad: AtomicU32,
}

const _: () = assert!(core::mem::size_of::<Limits>() == 56);

/// What the registry holder was doing, so that a successor can finish or
/// undo it after the holder's death (see `registry.rs`).
///
/// # Layout
/// 24 bytes.
#[repr(C, align(8))]
pub struct Journal {
    /// `JOURNAL_*` of registry.rs; 0 = nothing in progress.
    pub op: AtomicU32,
    pub idx: AtomicU32,
    pub key: AtomicI32,
    pub _pad: AtomicU32,
    pub aux: AtomicU64,
}

/// One mechanism's registry (`struct ipc_ids`). Every field is protected by
/// `lock` unless noted.
///
/// # Layout
/// 192 bytes.
#[repr(C, align(64))]
pub struct Registry {
    pub lock: RobustMutex,
    pub _pad0: [AtomicU64; 2],
    /// Objects present (`ids->in_use`).
    pub in_use: AtomicU32,
    /// Current sequence number (`ids->seq`).
    pub seq: AtomicU32,
    /// Last index handed out by the cyclic allocator (`ids->last_idx`), -1 at first.
    pub last_idx: AtomicI32,
    /// The idr cursor: where the next cyclic search starts (`idr->idr_next`).
    pub cursor: AtomicU32,
    /// `*_next_id` sysctl, -1 when unset.
    pub next_id: AtomicI32,
    /// Highest index in use, -1 if none (`ids->max_idx`).
    pub max_idx: AtomicI32,
    /// Mechanism counter: semaphores in use (sem), segment pages (shm),
    /// bytes queued (msg).
    pub used: AtomicU64,
    /// Second counter: messages queued (msg).
    pub used2: AtomicU64,
    /// Key table: heap offset, capacity (power of two), entries.
    pub keys_off: AtomicU64,
    pub keys_cap: AtomicU32,
    pub keys_len: AtomicU32,
    pub journal: Journal,
    /// Serial numbers of shm backing files (shm registry only).
    pub serial: AtomicU64,
    pub _pad1: [AtomicU64; 3],
}

const _: () = assert!(core::mem::size_of::<Registry>() == 192);

/// Size classes of the heap: 32 B to 64 KiB in powers of two.
pub const HEAP_CLASSES: usize = 12;

/// The heap's state. Protected by `lock`.
///
/// # Layout
/// 256 bytes.
#[repr(C, align(64))]
pub struct HeapState {
    pub lock: RobustMutex,
    pub _pad0: [AtomicU64; 2],
    /// Next never-used byte.
    pub top: AtomicU64,
    /// End of the heap (file size).
    pub end: AtomicU64,
    /// Free lists of small blocks by class.
    pub free: [AtomicU64; HEAP_CLASSES],
    /// Free list of page runs (first-fit, address ordered).
    pub runs: AtomicU64,
    /// Bytes handed out and not freed.
    pub in_use: AtomicU64,
    pub _pad1: [AtomicU64; 6],
}

const _: () = assert!(core::mem::size_of::<HeapState>() == 256);

/// The arena header.
///
/// # Layout
/// Fixed offsets (pinned below); 64 KiB are reserved for it.
#[repr(C, align(64))]
pub struct Header {
    /// Immutable after creation: [`MAGIC`], [`LAYOUT_VERSION`], flags, sizes.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub flags: AtomicU32,
    pub size: AtomicU64,
    pub heap_off: AtomicU64,
    pub slot_size: AtomicU32,
    pub header_size: AtomicU32,
    /// Inode of the user namespace that created the arena: ids are stored
    /// as that namespace sees them.
    pub userns: AtomicU64,
    pub _pad0: [AtomicU64; 2],
    pub limits: Limits,
    pub _pad1: AtomicU64,
    pub registries: [Registry; 3],
    pub heap: HeapState,
}

const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Header, magic) == 0);
    assert!(offset_of!(Header, version) == 8);
    assert!(offset_of!(Header, size) == 16);
    assert!(offset_of!(Header, limits) == 64);
    assert!(offset_of!(Header, registries) == 128);
    assert!(offset_of!(Header, heap) == 128 + 3 * 192);
    assert!(core::mem::size_of::<Header>() <= super::layout::HEADER_SIZE as usize);
};

// repr(C), atomics and RobustMutex only; no Drop.
crate::shared_types!(Header);
