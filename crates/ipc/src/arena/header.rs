//! The arena header: identity, limits, one registry per mechanism, the heap.

use crate::lock::Lock;
use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

/// "IPCNSARN" in little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"IPCNSARN");
/// Bumped on any change of a shared layout. Version 2: ipcns's own locks
/// (no libc mutex in the file), per-slot generations, the architecture,
/// lock kind, boot id and per-cpu mode in the header, reserved room for the
/// process records. Version 3: the heap's per-cpu caches (their region
/// after the tables, `cache_cpus` in the header), the heap's file
/// reservation mark (`HeapState::reserved`); `in_use` counts what the
/// global level handed out, caches included.
pub const LAYOUT_VERSION: u32 = 3;
/// `flags` bit: ipcmni_extend mode.
pub const FLAG_EXTEND: u32 = 1;
/// `flags` bit: created to be shared with other users (its mode grants
/// group or other bits).
pub const FLAG_SHARED: u32 = 2;

/// The machine the arena's layout was written for.
#[cfg(target_arch = "x86_64")]
pub const ARCH: u32 = 0x8664;
#[cfg(target_arch = "aarch64")]
pub const ARCH: u32 = 0xaa64;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const ARCH: u32 = 0;

/// The lock in every lock field: [`crate::lock::Lock`], version 1.
pub const LOCK_KIND: u32 = 1;

/// `percpu`: how per-cpu data in the arena is updated. Processes of the two
/// kinds must not share it.
pub const PERCPU_RSEQ: u32 = 1;
pub const PERCPU_ATOMIC: u32 = 2;

/// The per-cpu mode of this process.
pub fn percpu_mode() -> u32 {
    if ipcns_rseq::mode() == ipcns_rseq::Mode::Fallback {
        PERCPU_ATOMIC
    } else {
        PERCPU_RSEQ
    }
}

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
/// 192 bytes: `lock` @0, `in_use` @32, `keys_off` @72, `journal` @88,
/// `serial` @112.
#[repr(C, align(64))]
pub struct Registry {
    pub lock: Lock,
    pub _pad0: AtomicU64,
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
    /// Generations handed to slots (each creation and removal takes one).
    pub generation: AtomicU64,
    pub _pad1: [AtomicU64; 8],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Registry>() == 192);
    assert!(offset_of!(Registry, in_use) == 32);
    assert!(offset_of!(Registry, keys_off) == 72);
    assert!(offset_of!(Registry, journal) == 88);
    assert!(offset_of!(Registry, serial) == 112);
};

/// Size classes of the heap: 32 B to 64 KiB in powers of two.
pub const HEAP_CLASSES: usize = 12;

/// The heap's state. Protected by `lock`.
///
/// # Layout
/// 256 bytes: `lock` @0, `top` @32, `end` @40, `free` @48, `runs` @144,
/// `in_use` @152, `reserved` @160.
#[repr(C, align(64))]
pub struct HeapState {
    pub lock: Lock,
    pub _pad0: AtomicU64,
    /// Next never-used byte; everything below it is reserved in the file.
    pub top: AtomicU64,
    /// End of the heap (file size).
    pub end: AtomicU64,
    /// Free lists of small blocks by class.
    pub free: [AtomicU64; HEAP_CLASSES],
    /// Free list of page runs (first-fit); a run's first page stays
    /// reserved, the rest is given back to the file system.
    pub runs: AtomicU64,
    /// Bytes handed out by the global level (to callers, or onto the
    /// per-cpu stacks) and not taken back: the bytes in use are this less
    /// what the stacks hold (heap/mod.rs).
    pub in_use: AtomicU64,
    /// The file is reserved from `top` up to here (`fallocate` ahead of
    /// `top`, a chunk at a time, so that a new block rarely costs a system
    /// call). Never below `top`; as trusted as `top` itself.
    pub reserved: AtomicU64,
    pub _pad1: [AtomicU64; 11],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<HeapState>() == 256);
    assert!(offset_of!(HeapState, top) == 32);
    assert!(offset_of!(HeapState, free) == 48);
    assert!(offset_of!(HeapState, runs) == 144);
    assert!(offset_of!(HeapState, in_use) == 152);
    assert!(offset_of!(HeapState, reserved) == 160);
};

/// The arena header.
///
/// # Layout
/// Fixed offsets (pinned below); 64 KiB are reserved for it. `procs` is
/// room kept for the per-process records of the operations (SEM_UNDO lists,
/// attachments), zero until then.
#[repr(C, align(64))]
pub struct Header {
    /// Immutable after creation: [`MAGIC`], [`LAYOUT_VERSION`], flags, sizes,
    /// user namespace, architecture, lock kind, per-cpu mode.
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
    /// [`ARCH`] and [`LOCK_KIND`] of the creator; attach refuses others.
    pub arch: AtomicU32,
    pub lock_kind: AtomicU32,
    /// The boot the arena was created in (24-bit tag of the boot id): locks
    /// held by processes of an earlier boot are known stale.
    pub boot: AtomicU64,
    pub limits: Limits,
    /// [`PERCPU_RSEQ`] or [`PERCPU_ATOMIC`].
    pub percpu: AtomicU32,
    /// Cpus with a heap cache (the layout's `cache_cpus`): the creator's
    /// possible cpus in [`PERCPU_RSEQ`] mode, 0 in [`PERCPU_ATOMIC`] (no
    /// caches: their stacks need rseq).
    pub cache_cpus: AtomicU32,
    pub registries: [Registry; 3],
    pub heap: HeapState,
    pub procs: Procs,
}

/// The table of participating processes (`proc.rs`). Protected by `lock`.
///
/// # Layout
/// 256 bytes: `lock` @0, `table` @32, `cap` @40, `len` @44.
#[repr(C, align(64))]
pub struct Procs {
    pub lock: Lock,
    pub _pad0: AtomicU64,
    /// Heap offset of the array of `cap` records.
    pub table: AtomicU64,
    pub cap: AtomicU32,
    /// Records in use.
    pub len: AtomicU32,
    pub _pad1: [AtomicU64; 26],
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Procs>() == 256);
    assert!(offset_of!(Procs, table) == 32);
};

const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Header, magic) == 0);
    assert!(offset_of!(Header, version) == 8);
    assert!(offset_of!(Header, flags) == 12);
    assert!(offset_of!(Header, size) == 16);
    assert!(offset_of!(Header, heap_off) == 24);
    assert!(offset_of!(Header, arch) == 48);
    assert!(offset_of!(Header, lock_kind) == 52);
    assert!(offset_of!(Header, boot) == 56);
    assert!(offset_of!(Header, limits) == 64);
    assert!(offset_of!(Header, percpu) == 120);
    assert!(offset_of!(Header, cache_cpus) == 124);
    assert!(offset_of!(Header, registries) == 128);
    assert!(offset_of!(Header, heap) == 128 + 3 * 192);
    assert!(offset_of!(Header, procs) == 128 + 3 * 192 + 256);
    assert!(core::mem::size_of::<Header>() <= super::layout::HEADER_SIZE as usize);
};

// repr(C), atomics and Locks only; no Drop.
crate::arena::map::shared_types!(Header);
