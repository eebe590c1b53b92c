//! `ipcs`: util-linux 2.38.1's sys-utils/ipcs.c over a [`SysV`]: its
//! command line, and what it shows (the lists in [`lists`], one object's
//! details in [`details`]). Lists come from the /proc/sysvipc text, limits
//! from /proc/sys/kernel, the summaries from `SHM_INFO`, `SEM_INFO` and
//! `MSG_INFO`; every header, column width and `printf` conversion is the
//! original's.

use super::getopt::{self, HasArg, Item, Long};
use super::lists::{self, Format};
use super::size::Unit;
use super::{Exit, Tool, cnum, details};
use ipcns::sysv::SysV;

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
            lists::msg(&mut t.out, sys, format, unit);
            t.out.push(b'\n');
        }
        if shm {
            lists::shm(&mut t.out, sys, format, unit);
            t.out.push(b'\n');
        }
        if sem {
            lists::sem(&mut t.out, sys, format);
            t.out.push(b'\n');
        }
    }
    Ok(())
}
