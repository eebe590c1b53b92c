//! The text of /proc/sysvipc/{sem,msg,shm}, exactly as Linux prints it
//! (ipc/{sem,msg,shm}.c `sysvipc_*_proc_show`): a header, then one row per
//! object in ascending index order, ids shown through the reader's user
//! namespace.

use crate::arena::layout::Mech;
use crate::creds::Cred;
use crate::errno::SysResult;
use crate::msg::MsgKind;
use crate::namespace::Namespace;
use crate::object::{LIVE, Slot};
use crate::registry::{self, Kind, Reg, lock_object};
use crate::sem::SemKind;
use crate::shm::ShmKind;
use core::fmt::Write;
use core::sync::atomic::Ordering::{Acquire, Relaxed};

const SEM_HEADER: &str =
    "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n";
const MSG_HEADER: &str = "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n";
const SHM_HEADER: &str = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n";

/// The `uid gid cuid cgid` columns (`%5u` each), as the reader sees them.
fn owners(c: &Cred, h: &crate::object::Head) -> String {
    format!(
        "{:>5} {:>5} {:>5} {:>5}",
        c.show_uid(h.uid.load(Relaxed)),
        c.show_gid(h.gid.load(Relaxed)),
        c.show_uid(h.cuid.load(Relaxed)),
        c.show_gid(h.cgid.load(Relaxed))
    )
}

impl Namespace {
    /// The text of `/proc/sysvipc/sem`, `msg` or `shm` for this namespace.
    pub fn proc_text(&self, cred: &Cred, m: Mech) -> SysResult<String> {
        match m {
            Mech::Sem => self.rows::<SemKind>(cred, SEM_HEADER, |out, id, s, c| {
                let h = &s.head;
                let _ = writeln!(
                    out,
                    "{:>10} {:>10}  {:>4o} {:>10} {} {:>10} {:>10}",
                    h.key.load(Relaxed),
                    id,
                    h.mode.load(Relaxed),
                    s.nsems.load(Relaxed),
                    owners(c, h),
                    s.otime.load(Relaxed) as u64,
                    h.ctime.load(Relaxed) as u64,
                );
            }),
            Mech::Msg => self.rows::<MsgKind>(cred, MSG_HEADER, |out, id, s, c| {
                let h = &s.head;
                let _ = writeln!(
                    out,
                    "{:>10} {:>10}  {:>4o}  {:>10} {:>10} {:>5} {:>5} {} {:>10} {:>10} {:>10}",
                    h.key.load(Relaxed),
                    id,
                    h.mode.load(Relaxed),
                    s.cbytes.load(Relaxed),
                    s.qnum.load(Relaxed),
                    s.lspid.load(Relaxed) as u32,
                    s.lrpid.load(Relaxed) as u32,
                    owners(c, h),
                    s.stime.load(Relaxed) as u64,
                    s.rtime.load(Relaxed) as u64,
                    h.ctime.load(Relaxed) as u64,
                );
            }),
            Mech::Shm => {
                let a = self.arena();
                crate::shm::reap_if_forced(a)?;
                self.rows::<ShmKind>(cred, SHM_HEADER, |out, id, s, c| {
                    let h = &s.head;
                    let rss = crate::shm::rss_bytes(a, s);
                    let _ = writeln!(
                        out,
                        "{:>10} {:>10}  {:>4o} {:>21} {:>5} {:>5}  {:>5} {} {:>10} {:>10} {:>10} {:>21} {:>21}",
                        h.key.load(Relaxed),
                        id,
                        h.mode.load(Relaxed),
                        s.size.load(Relaxed),
                        s.cpid.load(Relaxed) as u32,
                        s.lpid.load(Relaxed) as u32,
                        s.nattch.load(Relaxed),
                        owners(c, h),
                        s.atime.load(Relaxed) as u64,
                        s.dtime.load(Relaxed) as u64,
                        h.ctime.load(Relaxed) as u64,
                        rss,
                        0,
                    );
                })
            }
        }
    }

    fn rows<K: Kind>(
        &self,
        cred: &Cred,
        header: &str,
        row: impl Fn(&mut String, i32, &K::Slot, &Cred),
    ) -> SysResult<String> {
        let mut out = String::from(header);
        self.each_live::<K>(|id, s| row(&mut out, id, s, cred))?;
        Ok(out)
    }

    /// Calls `visit(id, slot)` for every live object of kind `K`, in
    /// ascending index order: under the mechanism's registry lock, each
    /// object under its own lock (so what `visit` reads is one moment of
    /// its object, repaired first if its last holder died). The walk of
    /// these files and of `activity.rs`.
    ///
    /// Locks: none held on entry; the registry lock and one object lock at
    /// a time while walking; none on exit.
    pub(super) fn each_live<K: Kind>(&self, mut visit: impl FnMut(i32, &K::Slot)) -> SysResult<()> {
        let a = self.arena();
        let reg = Reg::lock::<K>(a)?;
        for idx in reg.bm().iter() {
            let s = registry::slot::<K>(a, idx)?;
            let _g = locked!(lock_object::<K>(a, s));
            let h = s.head();
            if h.state.load(Acquire) != LIVE {
                continue;
            }
            visit(a.layout().make_id(h.seq.load(Relaxed), idx), s);
        }
        Ok(())
    }
}
