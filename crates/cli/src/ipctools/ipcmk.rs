//! `ipcmk`: util-linux 2.38.1's sys-utils/ipcmk.c over a [`SysV`]: a
//! segment, a queue and/or a set under a random key, in that order,
//! stopping at the first failure.

use super::getopt::{self, HasArg, Item, Long};
use super::{Exit, Tool, cnum};
use ipcns::abi::IPC_CREAT;
use ipcns::sysv::SysV;
use std::io::{Read, Write};

pub const USAGE: &str = "
Usage:
 ipcmk [options]

Create various IPC resources (in an ipcns namespace: --ns NAME).

Options:
 -M, --shmem <size>       create shared memory segment of size <size>
 -S, --semaphore <number> create semaphore array with <number> elements
 -Q, --queue              create message queue
 -p, --mode <mode>        permission for the resource (default is 0644)

 -h, --help               display this help
 -V, --version            display version

Arguments:
 <size> arguments may be followed by the suffixes for
   GiB, TiB, PiB, EiB, ZiB, and YiB (the \"iB\" is optional)

For more details see ipcmk(1).
";

const LONGS: &[Long] = &[
    Long {
        name: "shmem",
        has_arg: HasArg::Required,
        val: 'M' as u32,
    },
    Long {
        name: "semaphore",
        has_arg: HasArg::Required,
        val: 'S' as u32,
    },
    Long {
        name: "queue",
        has_arg: HasArg::No,
        val: 'Q' as u32,
    },
    Long {
        name: "mode",
        has_arg: HasArg::Required,
        val: 'p' as u32,
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

/// `random_get_bytes(&key, sizeof(key))`.
fn random_key() -> i32 {
    let mut b = [0u8; 4];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() ^ std::process::id());
        b = n.to_le_bytes();
    }
    i32::from_le_bytes(b)
}

/// What to make, read from the command line.
pub struct Opts {
    permission: i32,
    /// `-M SIZE`.
    shm: Option<u64>,
    /// `-Q`.
    msg: bool,
    /// `-S NSEMS`.
    sem: Option<i32>,
}

/// Reads the command line as ipcmk.c's `main` does before it makes
/// anything. `Err` ends the tool there: help (on stdout) and `-V` with 0,
/// a bad option or argument with its message and 1.
pub fn parse(t: &mut Tool, args: &[Vec<u8>]) -> Result<Opts, Exit> {
    let mut o = Opts {
        permission: 0o644,
        shm: None,
        msg: false,
        sem: None,
    };
    let parsed = getopt::parse("ipcmk", args, "hM:QS:p:Vh", LONGS);
    for item in parsed.items {
        let (opt, arg) = match item {
            Item::Opt(o, a) => (o, a.unwrap_or_default()),
            Item::Bad(m) => {
                t.stderr(&m);
                return Err(t.errtryhelp());
            }
        };
        match char::from_u32(opt).unwrap_or('\0') {
            'M' => {
                // strtosize_or_err: parse_size sets errno for every failure.
                let size = cnum::parse_size(&arg).map_err(|e| {
                    let e = match e {
                        cnum::NumError::Invalid => cnum::NumError::Errno(libc::EINVAL),
                        e => e,
                    };
                    t.num_err(e, "failed to parse size", &arg)
                })?;
                o.shm = Some(size);
            }
            'Q' => o.msg = true,
            'S' => {
                let n = cnum::strtos32(&arg)
                    .map_err(|e| t.num_err(e, "failed to parse elements", &arg))?;
                o.sem = Some(n);
            }
            'p' => {
                // strtoul(optarg, &end, 8), then `err` (errno may be 0).
                let r = cnum::strtoul(&arg, 8);
                if r.erange || r.end == 0 || r.end != arg.len() {
                    let errno = if r.erange { libc::ERANGE } else { 0 };
                    return Err(t.err(errno, "failed to parse mode"));
                }
                o.permission = r.value as i32;
            }
            'h' => {
                t.out.extend_from_slice(USAGE.as_bytes());
                return Err(Exit(0));
            }
            'V' => return Err(t.version()),
            _ => return Err(t.errtryhelp()),
        }
    }
    if o.shm.is_none() && !o.msg && o.sem.is_none() {
        t.warnx("bad usage");
        return Err(t.errtryhelp());
    }
    Ok(o)
}

/// Makes what `o` asks for: a segment, a queue, a set, in that order,
/// stopping at the first failure.
pub fn make(t: &mut Tool, sys: &dyn SysV, o: &Opts) -> Result<(), Exit> {
    let permission = o.permission;
    if let Some(size) = o.shm {
        let id = sys
            .shmget(random_key(), size, permission | IPC_CREAT)
            .map_err(|e| t.err(e.raw(), "create share memory failed"))?;
        let _ = writeln!(t.out, "Shared memory id: {id}");
    }
    if o.msg {
        let id = sys
            .msgget(random_key(), permission | IPC_CREAT)
            .map_err(|e| t.err(e.raw(), "create message queue failed"))?;
        let _ = writeln!(t.out, "Message queue id: {id}");
    }
    if let Some(nsems) = o.sem {
        let id = sys
            .semget(random_key(), nsems, permission | IPC_CREAT)
            .map_err(|e| t.err(e.raw(), "create semaphore failed"))?;
        let _ = writeln!(t.out, "Semaphore id: {id}");
    }
    Ok(())
}
