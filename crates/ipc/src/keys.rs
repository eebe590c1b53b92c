//! The key table of one mechanism: an open-addressing hash table from key
//! to index in the heap (seeds 001, 002: a lookup is a hash, not a scan).
//! `IPC_PRIVATE` is never entered. Linear probing with backward-shift
//! deletion (no tombstones), grown by doubling to stay at most half full.
//!
//! Lock state: every function expects the registry lock held and leaves it
//! held. After a holder's death the table is rebuilt from the objects.

use crate::arena::header::Registry;
use crate::errno::Errno;
use crate::hash::home;
use crate::session::Session;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

const MIN_CAP: u32 = 64;

/// Tables never hold more than this many entries (4 x the largest ipc_mni).
const MAX_CAP: u32 = 1 << 26;

fn entry(key: i32, idx: u32) -> u64 {
    (u64::from(key as u32) << 32) | (u64::from(idx) + 1)
}

fn entry_key(e: u64) -> i32 {
    (e >> 32) as u32 as i32
}

/// The index of an entry, `None` for a junk entry (index 0 encoded).
fn entry_idx(e: u64) -> Option<u32> {
    (e as u32).checked_sub(1)
}

/// The table, checked: a power-of-two capacity inside the heap's handed-out
/// part. `Ok(None)`: no table yet. EUCLEAN: the registry's table fields
/// are corrupt (the caller rebuilds the table from the objects).
fn table<'a>(a: &'a Session, reg: &Registry) -> Result<Option<&'a [AtomicU64]>, Errno> {
    let off = reg.keys_off.load(Relaxed);
    let cap = reg.keys_cap.load(Relaxed);
    if off == 0 && cap == 0 {
        return Ok(None);
    }
    if !cap.is_power_of_two()
        || !(MIN_CAP..=MAX_CAP).contains(&cap)
        || !a.in_heap(off, u64::from(cap) * 8)
    {
        return Err(Errno::EUCLEAN);
    }
    Ok(Some(a.view_slice(off, cap as usize)?))
}

/// The index of the object with `key`. EUCLEAN for a corrupt table (a
/// probe run with no end, an entry with no index).
pub fn get(a: &Session, reg: &Registry, key: i32) -> Result<Option<u32>, Errno> {
    let Some(t) = table(a, reg)? else {
        return Ok(None);
    };
    let cap = t.len() as u32;
    let mut i = home(key, cap);
    for _ in 0..cap {
        let e = t[(i & (cap - 1)) as usize].load(Relaxed);
        if e == 0 {
            return Ok(None);
        }
        if entry_key(e) == key {
            return entry_idx(e).map(Some).ok_or(Errno::EUCLEAN);
        }
        i = (i + 1) & (cap - 1);
    }
    Err(Errno::EUCLEAN)
}

fn place(t: &[AtomicU64], key: i32, idx: u32) -> Result<(), Errno> {
    let cap = t.len() as u32;
    let mut i = home(key, cap);
    for _ in 0..cap {
        let slot = &t[(i & (cap - 1)) as usize];
        if slot.load(Relaxed) == 0 {
            slot.store(entry(key, idx), Relaxed);
            return Ok(());
        }
        i = (i + 1) & (cap - 1);
    }
    Err(Errno::EUCLEAN)
}

/// Enters `key -> idx` (the key must not be present). ENOMEM if the table
/// cannot grow; EUCLEAN if it is corrupt.
pub fn insert(a: &Session, reg: &Registry, key: i32, idx: u32) -> Result<(), Errno> {
    let len = reg.keys_len.load(Relaxed);
    if u64::from(len) * 2 + 2 > u64::from(reg.keys_cap.load(Relaxed)) {
        let entries: Vec<(i32, u32)> = match table(a, reg)? {
            Some(t) => t
                .iter()
                .map(|e| e.load(Relaxed))
                .filter(|&e| e != 0)
                .filter_map(|e| Some((entry_key(e), entry_idx(e)?)))
                .collect(),
            None => Vec::new(),
        };
        rebuild(a, reg, entries.into_iter())?;
    }
    let t = table(a, reg)?.ok_or(Errno::ENOMEM)?;
    place(t, key, idx)?;
    reg.keys_len.store(len.saturating_add(1), Relaxed);
    Ok(())
}

/// Removes `key` if present.
pub fn remove(a: &Session, reg: &Registry, key: i32) -> Result<(), Errno> {
    let Some(t) = table(a, reg)? else {
        return Ok(());
    };
    let cap = t.len() as u32;
    let mask = cap - 1;
    let mut i = home(key, cap);
    let mut found = false;
    for _ in 0..cap {
        let e = t[i as usize].load(Relaxed);
        if e == 0 {
            return Ok(());
        }
        if entry_key(e) == key {
            found = true;
            break;
        }
        i = (i + 1) & mask;
    }
    if !found {
        return Err(Errno::EUCLEAN);
    }
    // Backward shift: move later members of the probe run into the hole
    // when their home position allows it.
    let mut hole = i;
    let mut j = (i + 1) & mask;
    for _ in 0..cap {
        let e = t[j as usize].load(Relaxed);
        if e == 0 {
            break;
        }
        let h = home(entry_key(e), cap);
        // Can `e` (home h) move to `hole`? Yes unless h lies cyclically in (hole, j].
        let between = if hole <= j {
            hole < h && h <= j
        } else {
            hole < h || h <= j
        };
        if !between {
            t[hole as usize].store(e, Relaxed);
            hole = j;
        }
        j = (j + 1) & mask;
    }
    t[hole as usize].store(0, Relaxed);
    reg.keys_len
        .store(reg.keys_len.load(Relaxed).saturating_sub(1), Relaxed);
    Ok(())
}

/// Makes the table hold exactly `entries`: in place when the table is sound
/// and large enough (no memory needed: what a repair does), else in a new
/// table sized for them (the old one freed if it was sound).
pub fn rebuild(
    a: &Session,
    reg: &Registry,
    entries: impl ExactSizeIterator<Item = (i32, u32)>,
) -> Result<(), Errno> {
    let n = entries.len() as u32;
    let cap = ((n + 1) * 2).next_power_of_two().max(MIN_CAP);
    let old = table(a, reg).ok().flatten();
    if let Some(t) = old
        && t.len() >= cap as usize
    {
        for e in t {
            e.store(0, Relaxed);
        }
        for (k, i) in entries {
            place(t, k, i)?;
        }
        reg.keys_len.store(n, Relaxed);
        return Ok(());
    }
    let off = a.alloc(u64::from(cap) * 8)?;
    let t: &[AtomicU64] = a.view_slice(off, cap as usize)?;
    for (k, i) in entries {
        place(t, k, i)?;
    }
    let (old_off, old_cap) = (reg.keys_off.load(Relaxed), reg.keys_cap.load(Relaxed));
    reg.keys_off.store(off, Relaxed);
    reg.keys_cap.store(cap, Relaxed);
    reg.keys_len.store(n, Relaxed);
    if old.is_some() {
        a.free(old_off, u64::from(old_cap) * 8)?;
    }
    Ok(())
}
