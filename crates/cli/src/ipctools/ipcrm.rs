//! `ipcrm`: util-linux 2.38.1's sys-utils/ipcrm.c over a [`SysV`]: removal
//! by id or key, `-a` by category, and the old `ipcrm shm|msg|sem ID...`.
//! Options are acted on in order; any failure makes the exit status 1.

use super::getopt::{self, HasArg, Item, Long};
use super::{Exit, Tool, cnum};
use ipcns::abi;
use ipcns_oracle::sysv::{self, SysV};
use std::io::Write;

const USAGE: &str = "
Usage:
 ipcrm [options]
 ipcrm shm|msg|sem <id>...

Remove certain IPC resources (of an ipcns namespace: --ns NAME).

Options:
 -m, --shmem-id <id>        remove shared memory segment by id
 -M, --shmem-key <key>      remove shared memory segment by key
 -q, --queue-id <id>        remove message queue by id
 -Q, --queue-key <key>      remove message queue by key
 -s, --semaphore-id <id>    remove semaphore by id
 -S, --semaphore-key <key>  remove semaphore by key
 -a, --all[=shm|msg|sem]    remove all (in the specified category)
 -v, --verbose              explain what is being done

 -h, --help                 display this help
 -V, --version              display version

For more details see ipcrm(1).
";

const LONGS: &[Long] = &[
    Long {
        name: "shmem-id",
        has_arg: HasArg::Required,
        val: 'm' as u32,
    },
    Long {
        name: "shmem-key",
        has_arg: HasArg::Required,
        val: 'M' as u32,
    },
    Long {
        name: "queue-id",
        has_arg: HasArg::Required,
        val: 'q' as u32,
    },
    Long {
        name: "queue-key",
        has_arg: HasArg::Required,
        val: 'Q' as u32,
    },
    Long {
        name: "semaphore-id",
        has_arg: HasArg::Required,
        val: 's' as u32,
    },
    Long {
        name: "semaphore-key",
        has_arg: HasArg::Required,
        val: 'S' as u32,
    },
    Long {
        name: "all",
        has_arg: HasArg::Optional,
        val: 'a' as u32,
    },
    Long {
        name: "verbose",
        has_arg: HasArg::No,
        val: 'v' as u32,
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

/// `type_id`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Shm,
    Sem,
    Msg,
    All,
}

struct Rm<'a> {
    sys: &'a dyn SysV,
    verbose: bool,
}

impl Rm<'_> {
    /// `remove_id`: `*ctl(id, IPC_RMID)`; false (after a warning) on
    /// failure; an errno outside the expected ones ends the program.
    fn remove_id(&self, t: &mut Tool, ty: Type, iskey: bool, id: i32) -> Result<bool, Exit> {
        let r = match ty {
            Type::Shm => {
                if self.verbose {
                    let _ = writeln!(t.out, "removing shared memory segment id `{id}'");
                }
                self.sys.shmctl(id, abi::IPC_RMID, ipcns::shm::ShmArg::None)
            }
            Type::Msg => {
                if self.verbose {
                    let _ = writeln!(t.out, "removing message queue id `{id}'");
                }
                self.sys.msgctl(id, abi::IPC_RMID, ipcns::msg::MsgArg::None)
            }
            Type::Sem => {
                if self.verbose {
                    let _ = writeln!(t.out, "removing semaphore id `{id}'");
                }
                self.sys
                    .semctl(id, 0, abi::IPC_RMID, ipcns::sem::SemArg::Val(0))
            }
            Type::All => return Err(t.errx("impossible occurred")),
        };
        let Err(e) = r else {
            return Ok(true);
        };
        let what = if iskey { "key" } else { "id" };
        let msg = match e.raw() {
            libc::EACCES | libc::EPERM => format!("permission denied for {what}"),
            libc::EINVAL => format!("invalid {what}"),
            libc::EIDRM => format!("already removed {what}"),
            n => return Err(t.err(n, &format!("{what} failed"))),
        };
        t.warnx(&format!("{msg} ({id})"));
        Ok(false)
    }

    /// `key_to_id`: the id under a key (hex or decimal), or `None` after a
    /// warning.
    fn key_to_id(&self, t: &mut Tool, ty: Type, s: &str) -> Result<Option<i32>, Exit> {
        let r = cnum::strtoul(s, 0);
        if s.is_empty() || r.erange || r.end == 0 || r.end != s.len() {
            let m = format!("failed to parse argument: '{s}'");
            return Err(if r.erange {
                t.err(libc::ERANGE, &m)
            } else {
                t.errx(&m)
            });
        }
        let key = r.value as i32;
        if key == 0 {
            t.warnx(&format!("illegal key ({s})"));
            return Ok(None);
        }
        let got = match ty {
            Type::Shm => self.sys.shmget(key, 0, 0),
            Type::Msg => self.sys.msgget(key, 0),
            _ => self.sys.semget(key, 0, 0),
        };
        match got {
            Ok(id) => Ok(Some(id)),
            Err(e) => {
                let msg = match e.raw() {
                    libc::EACCES => "permission denied for key",
                    libc::EIDRM => "already removed key",
                    libc::ENOENT => "invalid key",
                    n => return Err(t.err(n, "key failed")),
                };
                t.warnx(&format!("{msg} ({s})"));
                Ok(None)
            }
        }
    }

    /// `remove_all`: every object of the category readable with `*_STAT`
    /// (indexes 0 to the `*_INFO` maximum), segments, then sets, then queues.
    fn remove_all(&self, t: &mut Tool, ty: Type) -> Result<bool, Exit> {
        let mut ok = true;
        if ty == Type::Shm || ty == Type::All {
            let Ok((maxid, _)) = sysv::shm_shm_info(self.sys) else {
                return Err(t.errx("kernel not configured for shared memory"));
            };
            for idx in 0..=maxid {
                if let Ok((id, _)) = sysv::shm_stat(self.sys, idx, abi::SHM_STAT) {
                    ok &= self.remove_id(t, Type::Shm, false, id)?;
                }
            }
        }
        if ty == Type::Sem || ty == Type::All {
            let Ok((maxid, _)) = sysv::sem_info(self.sys, abi::SEM_INFO) else {
                return Err(t.errx("kernel not configured for semaphores"));
            };
            for idx in 0..=maxid {
                if let Ok((id, _)) = sysv::sem_stat(self.sys, idx, abi::SEM_STAT) {
                    ok &= self.remove_id(t, Type::Sem, false, id)?;
                }
            }
        }
        if ty == Type::Msg || ty == Type::All {
            let Ok((maxid, _)) = sysv::msg_info(self.sys, abi::MSG_INFO) else {
                return Err(t.errx("kernel not configured for message queues"));
            };
            for idx in 0..=maxid {
                if let Ok((id, _)) = sysv::msg_stat(self.sys, idx, abi::MSG_STAT) {
                    ok &= self.remove_id(t, Type::Msg, false, id)?;
                }
            }
        }
        Ok(ok)
    }
}

/// `deprecated_main`: `ipcrm shm|msg|sem ID...`; `None` when argv[1] is
/// not one of those words.
fn deprecated(t: &mut Tool, rm: &Rm<'_>, args: &[String]) -> Option<Result<(), Exit>> {
    let ty = match args.first()?.as_str() {
        "shm" => Type::Shm,
        "msg" => Type::Msg,
        "sem" => Type::Sem,
        _ => return None,
    };
    Some((|| {
        if args.len() < 2 {
            t.warnx("not enough arguments");
            return Err(t.errtryhelp());
        }
        let mut errors = 0;
        for a in &args[1..] {
            // strtoul(argv, &end, 10), taken as an int.
            let r = cnum::strtoul(a, 10);
            if r.erange || r.end != a.len() {
                t.warnx(&format!("invalid id: {a}"));
                errors += 1;
            } else if !rm.remove_id(t, ty, false, r.value as i32)? {
                errors += 1;
            }
        }
        if errors != 0 {
            return Err(super::FAILURE);
        }
        let _ = writeln!(t.out, "resource(s) deleted");
        Ok(())
    })())
}

pub fn main(t: &mut Tool, sys: &dyn SysV, args: &[String]) -> Result<(), Exit> {
    let mut rm = Rm {
        sys,
        verbose: false,
    };
    // Without arguments, nothing to do.
    if args.is_empty() {
        return Ok(());
    }
    if let Some(r) = deprecated(t, &rm, args) {
        return r;
    }
    let mut ret = 0;
    let mut rm_all = false;
    let mut what_all = Type::All;
    let parsed = getopt::parse("ipcrm", args, "q:m:s:Q:M:S:a::vhV", LONGS);
    for item in parsed.items {
        let (opt, arg) = match item {
            Item::Opt(o, a) => (o, a),
            Item::Bad(m) => {
                let _ = std::io::stderr().write_all(m.as_bytes());
                return Err(t.errtryhelp());
            }
        };
        let c = char::from_u32(opt).unwrap_or('\0');
        match c {
            'M' | 'Q' | 'S' | 'm' | 'q' | 's' => {
                let a = arg.unwrap_or_default();
                let ty = match c.to_ascii_lowercase() {
                    'm' => Type::Shm,
                    'q' => Type::Msg,
                    _ => Type::Sem,
                };
                let iskey = c.is_ascii_uppercase();
                let id = if iskey {
                    match rm.key_to_id(t, ty, &a)? {
                        Some(id) => id,
                        None => {
                            ret += 1;
                            continue;
                        }
                    }
                } else {
                    cnum::strtos32(&a).map_err(|e| t.num_err(e, "failed to parse argument", &a))?
                };
                if !rm.remove_id(t, ty, iskey, id)? {
                    ret += 1;
                }
            }
            'a' => {
                rm_all = true;
                what_all = match arg.as_deref() {
                    None => Type::All,
                    Some("shm") => Type::Shm,
                    Some("msg") => Type::Msg,
                    Some("sem") => Type::Sem,
                    Some(other) => return Err(t.errx(&format!("unknown argument: {other}"))),
                };
            }
            'v' => rm.verbose = true,
            'h' => {
                t.out.extend_from_slice(USAGE.as_bytes());
                return Ok(());
            }
            'V' => return Err(t.version()),
            _ => return Err(t.errtryhelp()),
        }
    }
    if rm_all && !rm.remove_all(t, what_all)? {
        ret += 1;
    }
    if let Some(extra) = parsed.operands.first() {
        t.warnx(&format!("unknown argument: {extra}"));
        return Err(t.errtryhelp());
    }
    if ret == 0 {
        Ok(())
    } else {
        Err(super::FAILURE)
    }
}
