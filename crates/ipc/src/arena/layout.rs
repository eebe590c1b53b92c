//! Where everything lives in the arena file: the header, then per mechanism
//! a table of fixed-size object slots, a used-index bitmap and its summary,
//! then the heap. All addresses are byte offsets from the start of the file.
//!
//! # Layout (layout version 3)
//! ```text
//! 0                      Header (64 KiB reserved)
//! per mechanism (sem, msg, shm), page aligned:
//!   slots                ipc_mni * 192 bytes (the object headers, by idx)
//!   bitmap               ipc_mni bits, 1 = index in use
//!   summary              ipc_mni / 64 bits, 1 = bitmap word full
//!   reserved             1 bit per page of slots, 1 = reserved in the file
//! caches, page aligned   cache_cpus * 1280 bytes: the heap's per-cpu
//!                        caches of free blocks (heap/cache.rs), one
//!                        `CpuCache` per cpu; none when cache_cpus is 0
//! heap                   everything else (arrays, messages, key tables)
//! ```
//! Bitmaps, summaries, reserved bits and the caches are reserved
//! (fallocate) at creation; a page of slots when its first object is
//! created; the heap as its top grows. So no call ever faults in a page the
//! file system may not have (SIGBUS on a full tmpfs).
//! The file is sparse: untouched pages cost nothing, so the extend mode's
//! 16,777,216 slots per mechanism cost no memory until used; nor address
//! space: a process maps each table only up to the slots it has needed
//! (map.rs), since the tables alone would take 9 GiB of it.

/// Bytes reserved for the header.
pub const HEADER_SIZE: u64 = 64 * 1024;
/// Bytes of one cpu's cache (`heap::cache::CpuCache`, pinned there).
pub const CPU_CACHE_SIZE: u64 = 1280;
/// The most cpus an arena keeps caches for (Linux's largest `NR_CPUS`);
/// a header asking for more describes no arena of ours.
pub const MAX_CACHE_CPUS: u32 = 8192;
/// Bytes per object slot.
pub const SLOT_SIZE: u64 = 192;
const PAGE: u64 = 4096;

/// `IPCMNI` and the id shift of the two modes (ipc/util.h).
pub const IPCMNI_SHIFT: u32 = 15;
pub const IPCMNI_EXTEND_SHIFT: u32 = 24;

/// The three mechanisms, in the order of their tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mech {
    Sem = 0,
    Msg = 1,
    Shm = 2,
}

impl Mech {
    pub const ALL: [Mech; 3] = [Mech::Sem, Mech::Msg, Mech::Shm];

    pub fn name(self) -> &'static str {
        match self {
            Mech::Sem => "sem",
            Mech::Msg => "msg",
            Mech::Shm => "shm",
        }
    }
}

/// The offsets derived from the mode and the heap size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub extend: bool,
    pub ipc_mni: u32,
    pub shift: u32,
    pub tables: [Table; 3],
    /// The per-cpu caches: `cache_cpus` of [`CPU_CACHE_SIZE`] bytes from
    /// `caches` (page aligned).
    pub caches: u64,
    pub cache_cpus: u32,
    pub heap_off: u64,
    pub size: u64,
}

/// One mechanism's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    pub slots: u64,
    pub bitmap: u64,
    pub summary: u64,
    pub reserved: u64,
    /// End of the table's metadata (bitmap .. reserved bits).
    pub end: u64,
}

/// Pages of a table of `n` slots.
pub fn slot_pages(n: u64) -> u64 {
    (n * SLOT_SIZE).div_ceil(PAGE)
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to).saturating_mul(to)
}

impl Layout {
    /// The layout of an arena in `extend` mode with a heap of `heap_size`
    /// bytes and caches for `cache_cpus` cpus (at most
    /// [`MAX_CACHE_CPUS`]: more are taken as that many, which no header of
    /// ours records, so `open` refuses the file).
    pub fn new(extend: bool, heap_size: u64, cache_cpus: u32) -> Layout {
        let shift = if extend {
            IPCMNI_EXTEND_SHIFT
        } else {
            IPCMNI_SHIFT
        };
        let ipc_mni = 1u32 << shift;
        let n = u64::from(ipc_mni);
        let mut at = HEADER_SIZE;
        let mut tables = [Table {
            slots: 0,
            bitmap: 0,
            summary: 0,
            reserved: 0,
            end: 0,
        }; 3];
        for t in &mut tables {
            t.slots = at;
            at = round_up(at + n * SLOT_SIZE, PAGE);
            t.bitmap = at;
            at = round_up(at + n / 8, 64);
            t.summary = at;
            at = round_up(at + (n / 64).div_ceil(8).max(8), 64);
            t.reserved = at;
            at = round_up(at + slot_pages(n).div_ceil(64) * 8, 64);
            t.end = at;
            at = round_up(at, PAGE);
        }
        let caches = at;
        let cache_cpus = cache_cpus.min(MAX_CACHE_CPUS);
        at = round_up(at + u64::from(cache_cpus) * CPU_CACHE_SIZE, PAGE);
        let heap_off = at;
        Layout {
            extend,
            ipc_mni,
            shift,
            tables,
            caches,
            cache_cpus,
            heap_off,
            size: heap_off.saturating_add(round_up(heap_size, PAGE)),
        }
    }

    pub fn table(&self, m: Mech) -> &Table {
        &self.tables[m as usize]
    }

    /// The slot of index `idx` of mechanism `m`.
    pub fn slot_off(&self, m: Mech, idx: u32) -> u64 {
        self.table(m).slots + u64::from(idx) * SLOT_SIZE
    }

    /// `ipcid_seq_max()`: sequence numbers run below this.
    pub fn seq_max(&self) -> u32 {
        (i32::MAX >> self.shift) as u32
    }

    /// `ipc_min_cycle`: 64 (RADIX_TREE_MAP_SIZE) or 4096 in extend mode.
    pub fn min_cycle(&self) -> u32 {
        if self.extend { 4096 } else { 64 }
    }

    /// `ipcid_to_idx`.
    pub fn idx_of(&self, id: i32) -> u32 {
        (id as u32) & (self.ipc_mni - 1)
    }

    /// `ipcid_to_seqx`.
    pub fn seq_of(&self, id: i32) -> u32 {
        (id as u32) >> self.shift
    }

    /// `(seq << shift) + idx`.
    pub fn make_id(&self, seq: u32, idx: u32) -> i32 {
        // Masked: a sequence number or index read from a corrupt arena
        // still makes an id (a wrong one), never an overflow.
        (((seq & self.seq_max()) << self.shift) | (idx & (self.ipc_mni - 1))) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        let l = Layout::new(false, 1 << 30, 0);
        assert_eq!(l.ipc_mni, 32768);
        assert_eq!(l.seq_max(), 65535);
        assert_eq!(l.make_id(1, 0), 32768);
        assert_eq!(l.idx_of(32770), 2);
        assert_eq!(l.seq_of(32770), 1);
        assert!(l.tables[1].slots >= l.tables[0].summary);
        let e = Layout::new(true, 1 << 30, 0);
        assert_eq!(e.ipc_mni, 1 << 24);
        assert_eq!(e.seq_max(), 127);
        assert_eq!(e.min_cycle(), 4096);
        // Caches for 4 cpus between the tables and the heap, page aligned.
        let c = Layout::new(false, 1 << 30, 4);
        assert_eq!(c.caches, l.heap_off);
        assert_eq!(c.heap_off, l.heap_off + 4096 * 2);
        assert_eq!(c.size - c.heap_off, l.size - l.heap_off);
        assert_eq!(
            Layout::new(false, 1 << 30, u32::MAX).cache_cpus,
            MAX_CACHE_CPUS
        );
    }
}
