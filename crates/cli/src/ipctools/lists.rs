//! `ipcs` without `-i`: ipcs.c's `do_shm`, `do_msg` and `do_sem` as one
//! frame, [`print`], over the three kinds of object ([`Kind`], implemented
//! by each kind's /proc/sysvipc row).
//!
//! The frame follows ipcs.c: `-l` and `-u` are each kind's own text; the
//! four lists print a banner and a column line, then one row per object.
//! The creators list (`-c`) and the start of the plain list's row (key,
//! id, owner, perms) are the same for all three; the rest of the plain
//! row, and the `-t` and `-p` rows, are the kind's.

use super::host::page_size;
use super::rows::{self, Msg, Perm, Sem, Shm};
use super::size::{self, Unit};
use super::text::{id_owner, pad, print_perms, short_time, time_text};
use ipcns::abi;
use ipcns::sysv::{self, SysV};
use std::io::Write;

/// `enum output_formats`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Format {
    NotSpecified,
    Limits,
    Status,
    Creator,
    Time,
    Pid,
}

/// A column's heading and width: `%-W s`.
type Column = (&'static str, usize);

/// A list's banner (`------ BANNER --------`) and its column line.
struct Heading {
    banner: &'static str,
    columns: &'static [Column],
}

/// What one kind of object brings to [`print`].
trait Kind: Sized {
    /// The id column's heading: `shmid`, `msqid` or `semid`.
    const ID: &'static str;
    /// The banner of the creators list (`-c`).
    const CREATORS: &'static str;
    /// The times list (`-t`).
    const TIMES: Heading;
    /// The pids list (`-p`); `None` where ipcs.c prints none (`-s -p`
    /// prints nothing at all).
    const PIDS: Option<Heading>;
    /// The banner of the plain list.
    const LIST: &'static str;
    /// The plain list's columns after key, id, owner and perms; the size
    /// column is named as `--human` (`human`) shows it.
    fn list_columns(human: bool) -> &'static [Column];

    /// `-l`: the limits.
    fn limits(out: &mut Vec<u8>, sys: &dyn SysV, unit: Unit);
    /// `-u`: the status summary.
    fn status(out: &mut Vec<u8>, sys: &dyn SysV, unit: Unit);
    /// The objects, as /proc/sysvipc lists them.
    fn rows(sys: &dyn SysV) -> Vec<Self>;
    fn perm(&self) -> &Perm;
    /// A row of the times list.
    fn time_row(&self, out: &mut Vec<u8>);
    /// A row of the pids list.
    fn pid_row(&self, out: &mut Vec<u8>);
    /// The plain list's row after its perms column.
    fn list_row_end(&self, out: &mut Vec<u8>, unit: Unit);
}

/// `do_shm`, `do_msg` or `do_sem` for kind `K`.
fn print<K: Kind>(out: &mut Vec<u8>, sys: &dyn SysV, format: Format, unit: Unit) {
    let human = unit == Unit::Human;
    match format {
        Format::Limits => return K::limits(out, sys, unit),
        Format::Status => return K::status(out, sys, unit),
        Format::Creator => {
            let columns = [K::ID, "perms", "cuid", "cgid", "uid", "gid"].map(|c| (c, 10));
            heading(out, K::CREATORS, &columns);
        }
        Format::Time => heading(out, K::TIMES.banner, K::TIMES.columns),
        Format::Pid => {
            if let Some(h) = K::PIDS {
                heading(out, h.banner, h.columns);
            }
        }
        Format::NotSpecified => {
            let first = [("key", 10), (K::ID, 10), ("owner", 10), ("perms", 10)];
            let columns: Vec<Column> = first
                .into_iter()
                .chain(K::list_columns(human).iter().copied())
                .collect();
            heading(out, K::LIST, &columns);
        }
    }
    for r in K::rows(sys) {
        let p = r.perm();
        match format {
            Format::Creator => print_perms(out, p),
            Format::Time => r.time_row(out),
            Format::Pid => r.pid_row(out),
            _ => {
                let _ = write!(out, "0x{:08x} ", p.key as u32);
                id_owner(out, p.id, 10, p.uid);
                let _ = write!(out, " {:<10o}", p.mode & 0o777);
                r.list_row_end(out, unit);
            }
        }
    }
}

/// `do_shm`.
pub(super) fn shm(out: &mut Vec<u8>, sys: &dyn SysV, format: Format, unit: Unit) {
    print::<Shm>(out, sys, format, unit);
}

/// `do_msg`.
pub(super) fn msg(out: &mut Vec<u8>, sys: &dyn SysV, format: Format, unit: Unit) {
    print::<Msg>(out, sys, format, unit);
}

/// `do_sem` (which shows no size, and so takes no unit).
pub(super) fn sem(out: &mut Vec<u8>, sys: &dyn SysV, format: Format) {
    print::<Sem>(out, sys, format, Unit::Default);
}

/// The banner line and the column line of a list.
fn heading(out: &mut Vec<u8>, banner: &str, columns: &[Column]) {
    let _ = writeln!(out, "------ {banner} --------");
    for (i, (name, width)) in columns.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        let _ = write!(out, "{name:<width$}");
    }
    out.push(b'\n');
}

impl Kind for Shm {
    const ID: &'static str = "shmid";
    const CREATORS: &'static str = "Shared Memory Segment Creators/Owners";
    const TIMES: Heading = Heading {
        banner: "Shared Memory Attach/Detach/Change Times",
        columns: &[
            ("shmid", 10),
            ("owner", 10),
            ("attached", 20),
            ("detached", 20),
            ("changed", 20),
        ],
    };
    const PIDS: Option<Heading> = Some(Heading {
        banner: "Shared Memory Creator/Last-op PIDs",
        columns: &[("shmid", 10), ("owner", 10), ("cpid", 10), ("lpid", 10)],
    });
    const LIST: &'static str = "Shared Memory Segments";

    fn list_columns(human: bool) -> &'static [Column] {
        if human {
            &[("size", 10), ("nattch", 10), ("status", 12)]
        } else {
            &[("bytes", 10), ("nattch", 10), ("status", 12)]
        }
    }

    fn limits(out: &mut Vec<u8>, sys: &dyn SysV, unit: Unit) {
        let lim = rows::shm_limits(sys);
        let pgsz = page_size();
        let _ = writeln!(out, "------ Shared Memory Limits --------");
        let _ = writeln!(out, "max number of segments = {}", lim.shmmni);
        let u = if unit == Unit::Default {
            Unit::Kb
        } else {
            unit
        };
        size::print(out, u, Some("max seg size"), lim.shmmax, "\n", 0);
        if unit == Unit::Kb || unit == Unit::Default {
            let k = pgsz / 1024;
            let mut tmp = lim.shmall.wrapping_mul(k);
            if lim.shmall != 0 && tmp / lim.shmall != k {
                tmp = u64::MAX - (u64::MAX % k);
            }
            size::print(
                out,
                Unit::Default,
                Some("max total shared memory (kbytes)"),
                tmp,
                "\n",
                0,
            );
        } else {
            let mut tmp = lim.shmall.wrapping_mul(pgsz);
            if lim.shmall != 0 && tmp / lim.shmall != pgsz {
                tmp = u64::MAX - (u64::MAX % pgsz);
            }
            size::print(out, unit, Some("max total shared memory"), tmp, "\n", 0);
        }
        let u = if unit == Unit::Default {
            Unit::Bytes
        } else {
            unit
        };
        size::print(out, u, Some("min seg size"), lim.shmmin, "\n", 0);
    }

    fn status(out: &mut Vec<u8>, sys: &dyn SysV, _unit: Unit) {
        let Ok((_, i)) = sysv::shm_shm_info(sys) else {
            let _ = writeln!(out, "kernel not configured for shared memory");
            return;
        };
        let _ = write!(
            out,
            "------ Shared Memory Status --------\n\
             segments allocated {}\n\
             pages allocated {}\n\
             pages resident  {}\n\
             pages swapped   {}\n\
             Swap performance: {} attempts\t {} successes\n",
            i.used_ids,
            i.shm_tot as i64,
            i.shm_rss as i64,
            i.shm_swp as i64,
            i.swap_attempts as i64,
            i.swap_successes as i64
        );
    }

    fn rows(sys: &dyn SysV) -> Vec<Shm> {
        rows::shms(sys)
    }

    fn perm(&self) -> &Perm {
        &self.perm
    }

    fn time_row(&self, out: &mut Vec<u8>) {
        id_owner(out, self.perm.id, 10, self.perm.uid);
        short_time(out, self.atime);
        short_time(out, self.dtime);
        short_time(out, self.ctime);
        out.push(b'\n');
    }

    fn pid_row(&self, out: &mut Vec<u8>) {
        id_owner(out, self.perm.id, 10, self.perm.uid);
        let _ = writeln!(out, " {:<10} {:<10}", self.cprid, self.lprid);
    }

    fn list_row_end(&self, out: &mut Vec<u8>, unit: Unit) {
        out.push(b' ');
        if unit == Unit::Human {
            size::print(out, unit, None, self.segsz, "    ", 6);
        } else {
            size::print(out, unit, None, self.segsz, "", -10);
        }
        let mode = self.perm.mode;
        let _ = writeln!(
            out,
            " {:<10} {:<6} {:<6}",
            self.nattch,
            if mode & abi::SHM_DEST != 0 {
                "dest"
            } else {
                " "
            },
            if mode & abi::SHM_LOCKED != 0 {
                "locked"
            } else {
                " "
            }
        );
    }
}

impl Kind for Msg {
    const ID: &'static str = "msqid";
    const CREATORS: &'static str = "Message Queues Creators/Owners";
    const TIMES: Heading = Heading {
        banner: "Message Queues Send/Recv/Change Times",
        columns: &[
            ("msqid", 8),
            ("owner", 10),
            ("send", 20),
            ("recv", 20),
            ("change", 20),
        ],
    };
    const PIDS: Option<Heading> = Some(Heading {
        banner: "Message Queues PIDs",
        columns: &[("msqid", 10), ("owner", 10), ("lspid", 10), ("lrpid", 10)],
    });
    const LIST: &'static str = "Message Queues";

    fn list_columns(human: bool) -> &'static [Column] {
        if human {
            &[("size", 12), ("messages", 12)]
        } else {
            &[("used-bytes", 12), ("messages", 12)]
        }
    }

    fn limits(out: &mut Vec<u8>, sys: &dyn SysV, unit: Unit) {
        let Some(lim) = rows::msg_limits(sys) else {
            let _ = writeln!(out, "unable to fetch message limits");
            return;
        };
        let _ = writeln!(out, "------ Messages Limits --------");
        let _ = writeln!(out, "max queues system wide = {}", lim.msgmni);
        let u = if unit == Unit::Default {
            Unit::Bytes
        } else {
            unit
        };
        size::print(out, u, Some("max size of message"), lim.msgmax, "\n", 0);
        size::print(
            out,
            u,
            Some("default max size of queue"),
            lim.msgmnb as i64 as u64,
            "\n",
            0,
        );
    }

    fn status(out: &mut Vec<u8>, sys: &dyn SysV, unit: Unit) {
        let Ok((_, i)) = sysv::msg_info(sys, abi::MSG_INFO) else {
            let _ = writeln!(out, "kernel not configured for message queues");
            return;
        };
        let _ = writeln!(out, "------ Messages Status --------");
        let _ = writeln!(out, "allocated queues = {}", i.msgpool);
        let _ = writeln!(out, "used headers = {}", i.msgmap);
        let end = if unit == Unit::Default {
            " bytes\n"
        } else {
            "\n"
        };
        size::print(
            out,
            unit,
            Some("used space"),
            i.msgtql as i64 as u64,
            end,
            0,
        );
    }

    fn rows(sys: &dyn SysV) -> Vec<Msg> {
        rows::msgs(sys)
    }

    fn perm(&self) -> &Perm {
        &self.perm
    }

    fn time_row(&self, out: &mut Vec<u8>) {
        id_owner(out, self.perm.id, 8, self.perm.uid);
        short_time(out, self.stime);
        short_time(out, self.rtime);
        short_time(out, self.ctime);
        out.push(b'\n');
    }

    fn pid_row(&self, out: &mut Vec<u8>) {
        id_owner(out, self.perm.id, 8, self.perm.uid);
        let _ = writeln!(out, "  {:>5}     {:>5}", self.lspid, self.lrpid);
    }

    fn list_row_end(&self, out: &mut Vec<u8>, unit: Unit) {
        out.push(b' ');
        if unit == Unit::Human {
            size::print(out, unit, None, self.cbytes, "      ", 6);
        } else {
            size::print(out, unit, None, self.cbytes, "", -12);
        }
        let _ = writeln!(out, " {:<12}", self.qnum);
    }
}

impl Kind for Sem {
    const ID: &'static str = "semid";
    const CREATORS: &'static str = "Semaphore Arrays Creators/Owners";
    const TIMES: Heading = Heading {
        banner: "Semaphore Operation/Change Times",
        columns: &[
            ("semid", 8),
            ("owner", 10),
            ("last-op", 26),
            ("last-changed", 26),
        ],
    };
    const PIDS: Option<Heading> = None;
    const LIST: &'static str = "Semaphore Arrays";

    fn list_columns(_human: bool) -> &'static [Column] {
        &[("nsems", 10)]
    }

    fn limits(out: &mut Vec<u8>, sys: &dyn SysV, _unit: Unit) {
        let Some(lim) = rows::sem_limits(sys) else {
            let _ = writeln!(out, "unable to fetch semaphore limits");
            return;
        };
        let _ = write!(
            out,
            "------ Semaphore Limits --------\n\
             max number of arrays = {}\n\
             max semaphores per array = {}\n\
             max semaphores system wide = {}\n\
             max ops per semop call = {}\n\
             semaphore max value = {}\n",
            lim.semmni, lim.semmsl, lim.semmns, lim.semopm, lim.semvmx
        );
    }

    fn status(out: &mut Vec<u8>, sys: &dyn SysV, _unit: Unit) {
        let Ok((_, i)) = sysv::sem_info(sys, abi::SEM_INFO) else {
            let _ = writeln!(out, "kernel not configured for semaphores");
            return;
        };
        let _ = write!(
            out,
            "------ Semaphore Status --------\n\
             used arrays = {}\n\
             allocated semaphores = {}\n",
            i.semusz, i.semaem
        );
    }

    fn rows(sys: &dyn SysV) -> Vec<Sem> {
        rows::sems(sys)
    }

    fn perm(&self) -> &Perm {
        &self.perm
    }

    fn time_row(&self, out: &mut Vec<u8>) {
        id_owner(out, self.perm.id, 8, self.perm.uid);
        out.extend_from_slice(b"  ");
        pad(out, &time_text(self.otime, true), 26, Some(24));
        out.push(b' ');
        pad(out, &time_text(self.ctime, true), 26, Some(24));
        out.push(b'\n');
    }

    /// ipcs.c lists no pids of semaphore sets (but reads the sets all
    /// the same).
    fn pid_row(&self, _out: &mut Vec<u8>) {}

    fn list_row_end(&self, out: &mut Vec<u8>, _unit: Unit) {
        let _ = writeln!(out, " {:<10}", self.nsems);
    }
}
