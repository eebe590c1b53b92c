//! `ipcs`: util-linux 2.38.1's sys-utils/ipcs.c over a [`SysV`]. Lists
//! come from the /proc/sysvipc text, limits from /proc/sys/kernel, the
//! summaries from `SHM_INFO`, `SEM_INFO` and `MSG_INFO`; every header,
//! column width and `printf` conversion is the original's.

use super::getopt::{self, HasArg, Item, Long};
use super::host::page_size;
use super::rows;
use super::size::{self, Unit};
use super::text::{id_owner, pad, print_perms, short_time, time_text};
use super::{Exit, Tool, cnum, details};
use ipcns::abi;
use ipcns_oracle::sysv::{self, SysV};
use std::io::Write;

pub const USAGE: &str = "
Usage:
 ipcs [resource-option...] [output-option]
 ipcs -m|-q|-s -i <id>

Show information on IPC facilities (of an ipcns namespace: --ns NAME).

Options:
 -i, --id <id>  print details on resource identified by <id>
 -h, --help     display this help
 -V, --version  display version

Resource options:
 -m, --shmems      shared memory segments
 -q, --queues      message queues
 -s, --semaphores  semaphores
 -a, --all         all (default)

Output options:
 -t, --time        show attach, detach and change times
 -p, --pid         show PIDs of creator and last operator
 -c, --creator     show creator and owner
 -l, --limits      show resource limits
 -u, --summary     show status summary
     --human       show sizes in human-readable format
 -b, --bytes       show sizes in bytes

For more details see ipcs(1).
";

const OPT_HUMAN: u32 = 256;

const LONGS: &[Long] = &[
    Long {
        name: "id",
        has_arg: HasArg::Required,
        val: 'i' as u32,
    },
    Long {
        name: "queues",
        has_arg: HasArg::No,
        val: 'q' as u32,
    },
    Long {
        name: "shmems",
        has_arg: HasArg::No,
        val: 'm' as u32,
    },
    Long {
        name: "semaphores",
        has_arg: HasArg::No,
        val: 's' as u32,
    },
    Long {
        name: "all",
        has_arg: HasArg::No,
        val: 'a' as u32,
    },
    Long {
        name: "time",
        has_arg: HasArg::No,
        val: 't' as u32,
    },
    Long {
        name: "pid",
        has_arg: HasArg::No,
        val: 'p' as u32,
    },
    Long {
        name: "creator",
        has_arg: HasArg::No,
        val: 'c' as u32,
    },
    Long {
        name: "limits",
        has_arg: HasArg::No,
        val: 'l' as u32,
    },
    Long {
        name: "summary",
        has_arg: HasArg::No,
        val: 'u' as u32,
    },
    Long {
        name: "human",
        has_arg: HasArg::No,
        val: OPT_HUMAN,
    },
    Long {
        name: "bytes",
        has_arg: HasArg::No,
        val: 'b' as u32,
    },
    Long {
        name: "version",
        has_arg: HasArg::No,
        val: 'V' as u32,
    },
    Long {
        name: "help",
        has_arg: HasArg::No,
        val: 'h' as u32,
    },
];

/// `enum output_formats`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    NotSpecified,
    Limits,
    Status,
    Creator,
    Time,
    Pid,
}

/// What the command line asks for.
pub struct Opts {
    msg: bool,
    shm: bool,
    sem: bool,
    /// `-i ID`, when given.
    id: Option<i32>,
    format: Format,
    unit: Unit,
}

/// Reads the command line as ipcs.c's `main` does before it touches IPC.
/// `Err` ends the tool there: help (on stdout) and `-V` with 0, a bad
/// option or argument with its message and 1.
pub fn parse(t: &mut Tool, args: &[Vec<u8>]) -> Result<Opts, Exit> {
    let (mut msg, mut shm, mut sem) = (false, false, false);
    let mut id = None;
    let mut format = Format::NotSpecified;
    let mut unit = Unit::Default;
    let parsed = getopt::parse("ipcs", args, "i:qmsatpclubVh", LONGS);
    for item in parsed.items {
        let (opt, arg) = match item {
            Item::Opt(o, a) => (o, a),
            Item::Bad(m) => {
                t.stderr(&m);
                return Err(t.errtryhelp());
            }
        };
        match char::from_u32(opt).unwrap_or('\0') {
            'i' => {
                let a = arg.unwrap_or_default();
                id = Some(
                    cnum::strtos32(&a)
                        .map_err(|e| t.num_err(e, "failed to parse id argument", &a))?,
                );
            }
            'a' => (msg, shm, sem) = (true, true, true),
            'q' => msg = true,
            'm' => shm = true,
            's' => sem = true,
            't' => format = Format::Time,
            'c' => format = Format::Creator,
            'p' => format = Format::Pid,
            'l' => format = Format::Limits,
            'u' => format = Format::Status,
            'b' => unit = Unit::Bytes,
            'h' => {
                t.out.extend_from_slice(USAGE.as_bytes());
                return Err(Exit(0));
            }
            'V' => return Err(t.version()),
            _ if opt == OPT_HUMAN => unit = Unit::Human,
            _ => return Err(t.errtryhelp()),
        }
    }
    if id.is_some() && (usize::from(msg) + usize::from(shm) + usize::from(sem) != 1) {
        return Err(t.errx("when using an ID, a single resource must be specified"));
    }
    Ok(Opts {
        msg,
        shm,
        sem,
        id,
        format,
        unit,
    })
}

/// Prints what `o` asks for: one object's details, or the lists.
pub fn show(t: &mut Tool, sys: &dyn SysV, o: &Opts) -> Result<(), Exit> {
    let (mut msg, mut shm, mut sem) = (o.msg, o.shm, o.sem);
    let (format, unit) = (o.format, o.unit);
    if let Some(id) = o.id {
        if msg {
            details::print_msg(t, sys, id, unit);
        }
        if shm {
            details::print_shm(t, sys, id, unit);
        }
        if sem {
            details::print_sem(t, sys, id)?;
        }
    } else {
        if !msg && !shm && !sem {
            (msg, shm, sem) = (true, true, true);
        }
        t.out.push(b'\n');
        if msg {
            do_msg(t, sys, format, unit);
            t.out.push(b'\n');
        }
        if shm {
            do_shm(t, sys, format, unit);
            t.out.push(b'\n');
        }
        if sem {
            do_sem(t, sys, format);
            t.out.push(b'\n');
        }
    }
    Ok(())
}

fn do_shm(t: &mut Tool, sys: &dyn SysV, format: Format, unit: Unit) {
    let out = &mut t.out;
    match format {
        Format::Limits => {
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
            return;
        }
        Format::Status => {
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
            return;
        }
        Format::Creator => {
            let _ = writeln!(out, "------ Shared Memory Segment Creators/Owners --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10} {:<10} {:<10}",
                "shmid", "perms", "cuid", "cgid", "uid", "gid"
            );
        }
        Format::Time => {
            let _ = writeln!(
                out,
                "------ Shared Memory Attach/Detach/Change Times --------"
            );
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<20} {:<20} {:<20}",
                "shmid", "owner", "attached", "detached", "changed"
            );
        }
        Format::Pid => {
            let _ = writeln!(out, "------ Shared Memory Creator/Last-op PIDs --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10}",
                "shmid", "owner", "cpid", "lpid"
            );
        }
        Format::NotSpecified => {
            let _ = writeln!(out, "------ Shared Memory Segments --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10} {:<10} {:<10} {:<12}",
                "key",
                "shmid",
                "owner",
                "perms",
                if unit == Unit::Human { "size" } else { "bytes" },
                "nattch",
                "status"
            );
        }
    }
    for s in rows::shms(sys) {
        let p = &s.perm;
        match format {
            Format::Creator => print_perms(out, p),
            Format::Time => {
                id_owner(out, p.id, 10, p.uid);
                short_time(out, s.atime);
                short_time(out, s.dtime);
                short_time(out, s.ctime);
                out.push(b'\n');
            }
            Format::Pid => {
                id_owner(out, p.id, 10, p.uid);
                let _ = writeln!(out, " {:<10} {:<10}", s.cprid, s.lprid);
            }
            _ => {
                let _ = write!(out, "0x{:08x} ", p.key as u32);
                id_owner(out, p.id, 10, p.uid);
                let _ = write!(out, " {:<10o} ", p.mode & 0o777);
                if unit == Unit::Human {
                    size::print(out, unit, None, s.segsz, "    ", 6);
                } else {
                    size::print(out, unit, None, s.segsz, "", -10);
                }
                let _ = writeln!(
                    out,
                    " {:<10} {:<6} {:<6}",
                    s.nattch,
                    if p.mode & abi::SHM_DEST != 0 {
                        "dest"
                    } else {
                        " "
                    },
                    if p.mode & abi::SHM_LOCKED != 0 {
                        "locked"
                    } else {
                        " "
                    }
                );
            }
        }
    }
}

fn do_sem(t: &mut Tool, sys: &dyn SysV, format: Format) {
    let out = &mut t.out;
    match format {
        Format::Limits => {
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
            return;
        }
        Format::Status => {
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
            return;
        }
        Format::Creator => {
            let _ = writeln!(out, "------ Semaphore Arrays Creators/Owners --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10} {:<10} {:<10}",
                "semid", "perms", "cuid", "cgid", "uid", "gid"
            );
        }
        Format::Time => {
            let _ = writeln!(out, "------ Semaphore Operation/Change Times --------");
            let _ = writeln!(
                out,
                "{:<8} {:<10} {:<26} {:<26}",
                "semid", "owner", "last-op", "last-changed"
            );
        }
        Format::Pid => {}
        Format::NotSpecified => {
            let _ = writeln!(out, "------ Semaphore Arrays --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10} {:<10}",
                "key", "semid", "owner", "perms", "nsems"
            );
        }
    }
    for s in rows::sems(sys) {
        let p = &s.perm;
        match format {
            Format::Creator => print_perms(out, p),
            Format::Time => {
                id_owner(out, p.id, 8, p.uid);
                out.extend_from_slice(b"  ");
                pad(out, &time_text(s.otime, true), 26, Some(24));
                out.push(b' ');
                pad(out, &time_text(s.ctime, true), 26, Some(24));
                out.push(b'\n');
            }
            Format::Pid => {}
            _ => {
                let _ = write!(out, "0x{:08x} ", p.key as u32);
                id_owner(out, p.id, 10, p.uid);
                let _ = writeln!(out, " {:<10o} {:<10}", p.mode & 0o777, s.nsems);
            }
        }
    }
}

fn do_msg(t: &mut Tool, sys: &dyn SysV, format: Format, unit: Unit) {
    let out = &mut t.out;
    match format {
        Format::Limits => {
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
            return;
        }
        Format::Status => {
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
            return;
        }
        Format::Creator => {
            let _ = writeln!(out, "------ Message Queues Creators/Owners --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10} {:<10} {:<10}",
                "msqid", "perms", "cuid", "cgid", "uid", "gid"
            );
        }
        Format::Time => {
            let _ = writeln!(out, "------ Message Queues Send/Recv/Change Times --------");
            let _ = writeln!(
                out,
                "{:<8} {:<10} {:<20} {:<20} {:<20}",
                "msqid", "owner", "send", "recv", "change"
            );
        }
        Format::Pid => {
            let _ = writeln!(out, "------ Message Queues PIDs --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10}",
                "msqid", "owner", "lspid", "lrpid"
            );
        }
        Format::NotSpecified => {
            let _ = writeln!(out, "------ Message Queues --------");
            let _ = writeln!(
                out,
                "{:<10} {:<10} {:<10} {:<10} {:<12} {:<12}",
                "key",
                "msqid",
                "owner",
                "perms",
                if unit == Unit::Human {
                    "size"
                } else {
                    "used-bytes"
                },
                "messages"
            );
        }
    }
    for m in rows::msgs(sys) {
        let p = &m.perm;
        match format {
            Format::Creator => print_perms(out, p),
            Format::Time => {
                id_owner(out, p.id, 8, p.uid);
                short_time(out, m.stime);
                short_time(out, m.rtime);
                short_time(out, m.ctime);
                out.push(b'\n');
            }
            Format::Pid => {
                id_owner(out, p.id, 8, p.uid);
                let _ = writeln!(out, "  {:>5}     {:>5}", m.lspid, m.lrpid);
            }
            _ => {
                let _ = write!(out, "0x{:08x} ", p.key as u32);
                id_owner(out, p.id, 10, p.uid);
                let _ = write!(out, " {:<10o} ", p.mode & 0o777);
                if unit == Unit::Human {
                    size::print(out, unit, None, m.cbytes, "      ", 6);
                } else {
                    size::print(out, unit, None, m.cbytes, "", -12);
                }
                let _ = writeln!(out, " {:<12}", m.qnum);
            }
        }
    }
}
