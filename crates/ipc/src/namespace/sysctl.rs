//! The namespace's sysctls, read and written as `/proc/sys/kernel/*`
//! (ipc/ipc_sysctl.c): the same names, text, ranges and errnos.

use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::errno::{Errno, SysResult};
use crate::namespace::Namespace;
use crate::registry::Reg;
use crate::sem::SemKind;
use core::sync::atomic::Ordering::Relaxed;

/// Every sysctl ipcns keeps, in /proc/sys/kernel's order.
pub const NAMES: [&str; 12] = [
    "auto_msgmni",
    "msg_next_id",
    "msgmax",
    "msgmnb",
    "msgmni",
    "sem",
    "sem_next_id",
    "shm_next_id",
    "shm_rmid_forced",
    "shmall",
    "shmmax",
    "shmmni",
];

/// The numbers of a `proc_dointvec` / `proc_doulongvec` write: white
/// space separated, each an optional minus then digits in the base C's
/// `strtoul(.., 0)` picks (kernel/sysctl.c proc_get_long ->
/// strtoul_lenient, lib/kstrtox.c _parse_integer_fixup_radix: `0x` and a
/// hex digit is hexadecimal, a leading `0` octal, else decimal; a
/// character that is not a digit of that base before the separator is
/// EINVAL); `None` if malformed.
fn numbers(text: &str) -> Option<Vec<i128>> {
    let mut v = Vec::new();
    for w in text.split_whitespace() {
        let (neg, digits) = match w.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, w),
        };
        let b = digits.as_bytes();
        let (radix, digits) =
            if b.len() > 2 && b[0] == b'0' && (b[1] | 0x20) == b'x' && b[2].is_ascii_hexdigit() {
                (16, &digits[2..])
            } else if b.first() == Some(&b'0') {
                (8, digits)
            } else {
                (10, digits)
            };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) || digits.len() > 30 {
            return None;
        }
        let n = i128::from_str_radix(digits, radix).ok()?;
        v.push(if neg { -n } else { n });
    }
    (!v.is_empty()).then_some(v)
}

impl Namespace {
    /// The text of `/proc/sys/kernel/NAME`; ENOENT for an unknown name.
    pub fn sysctl_read(&self, name: &str) -> SysResult<String> {
        let a = self.arena();
        let l = &a.header().limits;
        let regs = &a.header().registries;
        let int = |v: i32| format!("{v}\n");
        Ok(match name {
            "sem" => format!(
                "{}\t{}\t{}\t{}\n",
                l.semmsl.load(Relaxed),
                l.semmns.load(Relaxed),
                l.semopm.load(Relaxed),
                l.semmni.load(Relaxed)
            ),
            "msgmni" => int(l.msgmni.load(Relaxed)),
            "msgmax" => int(l.msgmax.load(Relaxed)),
            "msgmnb" => int(l.msgmnb.load(Relaxed)),
            "shmmni" => int(l.shmmni.load(Relaxed)),
            "shmmax" => format!("{}\n", l.shmmax.load(Relaxed)),
            "shmall" => format!("{}\n", l.shmall.load(Relaxed)),
            "shm_rmid_forced" => int(l.shm_rmid_forced.load(Relaxed)),
            "auto_msgmni" => int(0),
            "sem_next_id" => int(regs[Mech::Sem as usize].next_id.load(Relaxed)),
            "msg_next_id" => int(regs[Mech::Msg as usize].next_id.load(Relaxed)),
            "shm_next_id" => int(regs[Mech::Shm as usize].next_id.load(Relaxed)),
            _ => return Err(Errno::ENOENT),
        })
    }

    /// Writes `text` to `/proc/sys/kernel/NAME` with Linux's rules: out of
    /// range is EINVAL and changes nothing, except `sem`, which stores its
    /// values positionally and then refuses (ERANGE) a semmni outside
    /// `0..=ipc_mni`, restoring only semmni. Only root (or CAP_SYS_ADMIN)
    /// may write, as the files are root's 0644 (EACCES otherwise).
    /// The namespace's root for its sysctl files: the uid that gets the
    /// files' owner bits (ipc/ipc_sysctl.c `ipc_set_ownership`, the uid
    /// the owning user namespace maps to 0): the one who made the
    /// namespace, the arena file's owner. It and root may write them.
    #[doc(hidden)]
    pub fn sysctl_root_uid(&self) -> u32 {
        self.arena().arena().id().uid
    }

    pub fn sysctl_write(&self, cred: &Cred, name: &str, text: &str) -> SysResult<()> {
        let a = self.arena();
        let l = &a.header().limits;
        let regs = &a.header().registries;
        if !NAMES.contains(&name) {
            return Err(Errno::ENOENT);
        }
        // ipc/ipc_sysctl.c ipc_permissions: the files are 0644, and the
        // owner's bits go to the namespace's root, the uid its user
        // namespace maps to 0 (`ipc_set_ownership`): the one who made the
        // namespace. Here that is the arena file's owner; root and
        // CAP_SYS_ADMIN (tools, and tests that tune another's namespace)
        // may too.
        if cred.euid != 0 && !cred.cap_sys_admin && cred.euid != self.sysctl_root_uid() {
            return Err(Errno::EACCES);
        }
        let v = numbers(text).ok_or(Errno::EINVAL)?;
        let first = v[0];
        let mni = i128::from(a.layout().ipc_mni);
        let in_range = |lo: i128, hi: i128| {
            if (lo..=hi).contains(&first) {
                Ok(first)
            } else {
                Err(Errno::EINVAL)
            }
        };
        let int_max = i128::from(i32::MAX);
        // Writes serialise on the sem registry lock.
        let _reg = Reg::lock::<SemKind>(a)?;
        match name {
            "sem" => {
                if v.iter().any(|&x| x < i128::from(i32::MIN) || x > int_max) {
                    return Err(Errno::EINVAL);
                }
                let fields = [&l.semmsl, &l.semmns, &l.semopm, &l.semmni];
                let old_mni = l.semmni.load(Relaxed);
                for (f, &x) in fields.iter().zip(&v) {
                    f.store(x as i32, Relaxed);
                }
                let semmni = i128::from(l.semmni.load(Relaxed));
                if semmni < 0 || semmni > mni {
                    l.semmni.store(old_mni, Relaxed);
                    return Err(Errno::ERANGE);
                }
            }
            "msgmni" => l.msgmni.store(in_range(0, mni)? as i32, Relaxed),
            "shmmni" => l.shmmni.store(in_range(0, mni)? as i32, Relaxed),
            "msgmax" => l.msgmax.store(in_range(0, int_max)? as i32, Relaxed),
            "msgmnb" => l.msgmnb.store(in_range(0, int_max)? as i32, Relaxed),
            "shmmax" => l
                .shmmax
                .store(in_range(0, i128::from(u64::MAX))? as u64, Relaxed),
            "shmall" => l
                .shmall
                .store(in_range(0, i128::from(u64::MAX))? as u64, Relaxed),
            "shm_rmid_forced" => {
                l.shm_rmid_forced.store(in_range(0, 1)? as i32, Relaxed);
                // shm_destroy_orphaned, at once.
                drop(_reg);
                crate::shm::reap_if_forced(a)?;
            }
            "auto_msgmni" => {
                in_range(0, 1)?;
            }
            _ => {
                // *_next_id: 0..=INT_MAX; only a creation resets it to -1.
                let m = match name {
                    "sem_next_id" => Mech::Sem,
                    "msg_next_id" => Mech::Msg,
                    _ => Mech::Shm,
                };
                let x = in_range(0, int_max)? as i32;
                // Each registry's own lock guards its next_id.
                match m {
                    Mech::Sem => regs[m as usize].next_id.store(x, Relaxed),
                    Mech::Msg => {
                        let _g = Reg::lock::<crate::msg::MsgKind>(a)?;
                        regs[m as usize].next_id.store(x, Relaxed);
                    }
                    Mech::Shm => {
                        let _g = Reg::lock::<crate::shm::ShmKind>(a)?;
                        regs[m as usize].next_id.store(x, Relaxed);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::numbers;

    /// The bases of the kernel's `strtoul(.., 0)`, as a write on the
    /// kernel's /proc/sys/kernel/sem takes them (checked there: "250 32000
    /// 32 0x10" sets semmni 16).
    #[test]
    fn bases_as_strtoul() {
        assert_eq!(numbers("0x10"), Some(vec![16]));
        assert_eq!(numbers("0X1f\n"), Some(vec![31]));
        assert_eq!(numbers("010"), Some(vec![8]));
        assert_eq!(numbers("0"), Some(vec![0]));
        assert_eq!(numbers("-0x10 12\t3"), Some(vec![-16, 12, 3]));
        assert_eq!(numbers("09"), None);
        assert_eq!(numbers("0x"), None);
        assert_eq!(numbers("0xg"), None);
        assert_eq!(numbers("12a"), None);
        assert_eq!(numbers(" \n"), None);
    }
}
