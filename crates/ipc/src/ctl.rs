//! What the three `*ctl` calls share: the STAT lookups, the IPC_SET /
//! IPC_RMID path (`ipcctl_obtain_check`), `ipc_update_perm`, and the perm
//! part of the `*_ds` structures.

use crate::abi;
use crate::creds::Cred;
use crate::errno::{Errno, SysResult};
use crate::lock::Guard;
use crate::object::{Head, Slot};
use crate::perm::{self, S_IRUGO, S_IRWXUGO};
use crate::registry::{self, Kind, Reg, lock_object, obtain, still_valid};
use crate::session::Session;
use core::sync::atomic::Ordering::{Relaxed, Release};
use core::sync::atomic::fence;

/// `kernel_to_ipc64_perm`, ids shown as the caller's namespace sees them.
pub fn perm_out(cred: &Cred, h: &Head) -> abi::ipc64_perm {
    abi::ipc64_perm {
        key: h.key.load(Relaxed),
        uid: cred.show_uid(h.uid.load(Relaxed)),
        gid: cred.show_gid(h.gid.load(Relaxed)),
        cuid: cred.show_uid(h.cuid.load(Relaxed)),
        cgid: cred.show_gid(h.cgid.load(Relaxed)),
        mode: h.mode.load(Relaxed),
        seq: h.seq.load(Relaxed) as u16,
        ..abi::ipc64_perm::default()
    }
}

/// The lookup, permission check and lock of `IPC_STAT`, `*_STAT` and
/// `*_STAT_ANY` (`stat_cmd`: the argument is an index; `any`: no read
/// permission needed). Returns the full id, the slot and its lock.
pub fn stat_lookup<'a, K: Kind>(
    a: &'a Session,
    cred: &Cred,
    id: i32,
    stat_cmd: bool,
    any: bool,
) -> SysResult<(i32, &'a K::Slot, Guard<'a>)> {
    let l = a.layout();
    let f = if stat_cmd {
        // ipc_obtain_object_idr: the index alone.
        registry::obtain_idx::<K>(a, l.idx_of(id))?
    } else {
        obtain::<K>(a, id)?
    };
    let s = f.slot;
    if !any {
        perm::ipcperms(cred, s.head(), S_IRUGO)?;
    }
    let g = locked!(lock_object::<K>(a, s));
    still_valid(&f)?;
    // The id as of the lock (the slot's sequence number cannot change while
    // the generation holds).
    let id = l.make_id(s.head().seq.load(Relaxed), f.idx);
    Ok((id, s, g))
}

/// The IPC_SET / IPC_RMID path: registry lock, `ipcctl_obtain_check`
/// (EINVAL, then EPERM unless owner, creator or CAP_SYS_ADMIN), object
/// lock, then `f`.
pub fn down<K: Kind, T>(
    a: &Session,
    cred: &Cred,
    id: i32,
    f: impl FnOnce(&Reg<'_>, u32, &K::Slot) -> SysResult<T>,
) -> SysResult<T> {
    let reg = Reg::lock::<K>(a)?;
    let found = obtain::<K>(a, id)?;
    perm::owner_or_admin(cred, found.slot.head())?;
    let _g = locked!(lock_object::<K>(a, found.slot));
    // Under the registry lock nothing can remove it; the check costs nothing.
    still_valid(&found)?;
    f(&reg, found.idx, found.slot)
}

/// `ipc_update_perm`: uid and gid must map into the arena's namespace
/// (EINVAL otherwise, nothing changed); only the permission bits of the
/// mode change.
pub fn update_perm(cred: &Cred, h: &Head, p: &abi::ipc64_perm) -> SysResult<()> {
    let (uid, gid) = match &cred.maps {
        None => (
            (p.uid != u32::MAX).then_some(p.uid),
            (p.gid != u32::MAX).then_some(p.gid),
        ),
        Some(m) => (m.0.map_down(p.uid), m.1.map_down(p.gid)),
    };
    let (Some(uid), Some(gid)) = (uid, gid) else {
        return Err(Errno::EINVAL);
    };
    // Odd while the three change (`Head::perm_seq`); `| 1` also mends
    // one left odd by a holder that died here.
    let ps = h.perm_seq.load(Relaxed) | 1;
    h.perm_seq.store(ps, Relaxed);
    fence(Release);
    h.uid.store(uid, Relaxed);
    h.gid.store(gid, Relaxed);
    let mode = h.mode.load(Relaxed);
    h.mode
        .store((mode & !S_IRWXUGO) | (p.mode & S_IRWXUGO), Relaxed);
    h.perm_seq.store(ps.wrapping_add(1), Release);
    Ok(())
}

/// Fills the owner fields of a new object from the caller
/// (`ipc_addid`: cuid = uid = euid, cgid = gid = egid) and its mode.
pub fn init_head(cred: &Cred, h: &Head, flg: i32, now: i64) {
    h.uid.store(cred.euid, Relaxed);
    h.cuid.store(cred.euid, Relaxed);
    h.gid.store(cred.egid, Relaxed);
    h.cgid.store(cred.egid, Relaxed);
    h.mode.store(flg as u32 & S_IRWXUGO, Relaxed);
    h.ctime.store(now, Relaxed);
}

/// `ipc_get_maxidx` as the INFO commands return it: the highest index in
/// use, 0 when none.
pub fn info_maxidx(reg: &Reg<'_>) -> i32 {
    // Bounded by the table, whatever the arena says: callers loop to it.
    reg.r
        .max_idx
        .load(Relaxed)
        .clamp(0, reg.bm().capacity() as i32 - 1)
}

/// What `ipcget_public` does for an existing key after EEXIST: the
/// mechanism's `more_checks`, then `ipcperms(flg)`; the id on success.
///
/// Lock state: the registry lock held. That is enough: the perm fields
/// change only under it (IPC_SET) and the sizes `more_checks` reads never
/// change, so the object lock is not taken.
///
/// The key is remembered for lookups without the lock (`recent.rs`).
pub fn existing<K: Kind>(
    a: &Session,
    cred: &Cred,
    key: i32,
    idx: u32,
    flg: i32,
    more_checks: impl FnOnce(&K::Slot) -> SysResult<()>,
) -> SysResult<i32> {
    // find_key checked the index is in use with a live object.
    let s = registry::slot::<K>(a, idx)?;
    a.recent()
        .remember(K::MECH, key, idx, s.head().generation.load(Relaxed));
    more_checks(s)?;
    perm::ipcperms(cred, s.head(), flg)?;
    Ok(a.layout().make_id(s.head().seq.load(Relaxed), idx))
}
