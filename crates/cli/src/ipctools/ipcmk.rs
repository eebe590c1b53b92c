//! `ipcmk`: util-linux 2.38.1's sys-utils/ipcmk.c over a [`SysV`]: a
//! segment, a queue and/or a set under a random key, in that order,
//! stopping at the first failure.

use super::getopt::{self, HasArg, Item, Long};
use super::{Exit, Tool, cnum};
use ipcns::abi::IPC_CREAT;
use ipcns_oracle::sysv::SysV;
use std::io::{Read, Write};

const USAGE: &str = "
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

pub fn main(t: &mut Tool, sys: &dyn SysV, args: &[String]) -> Result<(), Exit> {
    let mut permission: i32 = 0o644;
    let mut size: u64 = 0;
    let mut nsems: i32 = 0;
    let (mut ask_shm, mut ask_msg, mut ask_sem) = (false, false, false);
    let parsed = getopt::parse("ipcmk", args, "hM:QS:p:Vh", LONGS);
    for item in parsed.items {
        let (opt, arg) = match item {
            Item::Opt(o, a) => (o, a.unwrap_or_default()),
            Item::Bad(m) => {
                let _ = std::io::stderr().write_all(m.as_bytes());
                return Err(t.errtryhelp());
            }
        };
        match char::from_u32(opt).unwrap_or('\0') {
            'M' => {
                // strtosize_or_err: parse_size sets errno for every failure.
                size = cnum::parse_size(&arg).map_err(|e| {
                    let e = match e {
                        cnum::NumError::Invalid => cnum::NumError::Errno(libc::EINVAL),
                        e => e,
                    };
                    t.num_err(e, "failed to parse size", &arg)
                })?;
                ask_shm = true;
            }
            'Q' => ask_msg = true,
            'S' => {
                nsems = cnum::strtos32(&arg)
                    .map_err(|e| t.num_err(e, "failed to parse elements", &arg))?;
                ask_sem = true;
            }
            'p' => {
                // strtoul(optarg, &end, 8), then `err` (errno may be 0).
                let r = cnum::strtoul(&arg, 8);
                if r.erange || r.end == 0 || r.end != arg.len() {
                    let errno = if r.erange { libc::ERANGE } else { 0 };
                    return Err(t.err(errno, "failed to parse mode"));
                }
                permission = r.value as i32;
            }
            'h' => {
                t.out.extend_from_slice(USAGE.as_bytes());
                return Ok(());
            }
            'V' => return Err(t.version()),
            _ => return Err(t.errtryhelp()),
        }
    }
    if !ask_shm && !ask_msg && !ask_sem {
        t.warnx("bad usage");
        return Err(t.errtryhelp());
    }
    if ask_shm {
        let id = sys
            .shmget(random_key(), size, permission | IPC_CREAT)
            .map_err(|e| t.err(e.raw(), "create share memory failed"))?;
        let _ = writeln!(t.out, "Shared memory id: {id}");
    }
    if ask_msg {
        let id = sys
            .msgget(random_key(), permission | IPC_CREAT)
            .map_err(|e| t.err(e.raw(), "create message queue failed"))?;
        let _ = writeln!(t.out, "Message queue id: {id}");
    }
    if ask_sem {
        let id = sys
            .semget(random_key(), nsems, permission | IPC_CREAT)
            .map_err(|e| t.err(e.raw(), "create semaphore failed"))?;
        let _ = writeln!(t.out, "Semaphore id: {id}");
    }
    Ok(())
}
