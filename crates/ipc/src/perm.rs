//! Permission checks, as ipc/util.c does them.

use crate::creds::Cred;
use crate::errno::Errno;
use crate::object::Head;
use core::sync::atomic::Ordering::Relaxed;

/// `ipcperms(ns, ipcp, flag)`: the requested bits `(flag >> 6) | (flag >> 3)
/// | flag` against the owner bits when euid is uid or cuid, else the group
/// bits when the caller is in group gid or cgid, else the other bits;
/// CAP_IPC_OWNER in the namespace's user namespace overrides. EACCES
/// otherwise.
pub fn ipcperms(cred: &Cred, h: &Head, flag: i32) -> Result<(), Errno> {
    let requested = (flag >> 6) | (flag >> 3) | flag;
    let mut granted = h.mode.load(Relaxed) as i32;
    if cred.euid == h.cuid.load(Relaxed) || cred.euid == h.uid.load(Relaxed) {
        granted >>= 6;
    } else if cred.in_group(h.cgid.load(Relaxed)) || cred.in_group(h.gid.load(Relaxed)) {
        granted >>= 3;
    }
    // "is there some bit set in requested_mode but not in granted_mode?"
    if requested & !granted & 0o007 != 0 && !cred.cap_ipc_owner {
        return Err(Errno::EACCES);
    }
    Ok(())
}

/// The owner check of `ipcctl_obtain_check` (IPC_SET, IPC_RMID): euid is
/// cuid or uid, or CAP_SYS_ADMIN; else EPERM.
pub fn owner_or_admin(cred: &Cred, h: &Head) -> Result<(), Errno> {
    if cred.euid == h.cuid.load(Relaxed) || cred.euid == h.uid.load(Relaxed) || cred.cap_sys_admin {
        Ok(())
    } else {
        Err(Errno::EPERM)
    }
}

/// S_IRUGO, S_IWUGO: the read and write bits `ipcperms` is asked for.
pub const S_IRUGO: i32 = 0o444;
pub const S_IWUGO: i32 = 0o222;
/// S_IRWXUGO: the mode bits an object keeps.
pub const S_IRWXUGO: u32 = 0o777;
