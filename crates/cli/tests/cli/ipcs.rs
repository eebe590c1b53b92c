//! `ipcns ipcs` against util-linux `ipcs` on the kernel: the same objects
//! (explicit keys, so the same ids) made in both, then every deterministic
//! option combination compared byte for byte.

use crate::kernel::{Ns, both, in_fresh_ipc_ns, now_secs, same_second};
use ipcns::abi::{
    IPC_CREAT, IPC_RMID, IPC_SET, IPC_STAT, SETVAL, SHM_LOCK, msqid64_ds, semid64_ds, shmid64_ds,
};
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Errno};
use ipcns_oracle::sysv::{self, SysV};

/// Ids of what [`populate`] made.
pub struct Made {
    pub sems: Vec<i32>,
    pub msgs: Vec<i32>,
    pub shms: Vec<i32>,
}

fn set_sem(s: &dyn SysV, id: i32, f: impl Fn(&mut semid64_ds)) -> Result<i32, Errno> {
    let (_, mut ds) = sysv::sem_stat(s, id, IPC_STAT)?;
    f(&mut ds);
    s.semctl(id, 0, IPC_SET, SemArg::Ds(&mut ds))
}

fn set_msg(s: &dyn SysV, id: i32, f: impl Fn(&mut msqid64_ds)) -> Result<i32, Errno> {
    let (_, mut ds) = sysv::msg_stat(s, id, IPC_STAT)?;
    f(&mut ds);
    s.msgctl(id, IPC_SET, MsgArg::Ds(&mut ds))
}

fn set_shm(s: &dyn SysV, id: i32, f: impl Fn(&mut shmid64_ds)) -> Result<i32, Errno> {
    let (_, mut ds) = sysv::shm_stat(s, id, IPC_STAT)?;
    f(&mut ds);
    s.shmctl(id, IPC_SET, ShmArg::Ds(&mut ds))
}

/// Sets, queues and segments with explicit and private keys, a negative
/// key, a removed index reused with a new sequence number, changed owners
/// (named, unnamed, long names), modes, a semaphore value, a smaller
/// qbytes and a locked segment; the same calls on the kernel and on `ns`.
pub fn populate(ns: &Ns) -> Made {
    let c = IPC_CREAT;
    let ok = |r: Result<i32, Errno>| r.expect("the setup call");
    let s0 = ok(both(ns, "semget", |s| s.semget(0x1234, 3, 0o600 | c)));
    let s1 = ok(both(ns, "semget", |s| s.semget(0x2345, 1, 0o644 | c)));
    let s2 = ok(both(ns, "semget", |s| s.semget(0, 2, 0o666 | c)));
    ok(both(ns, "semctl(IPC_RMID)", |s| {
        s.semctl(s1, 0, IPC_RMID, SemArg::None)
    }));
    let s3 = ok(both(ns, "semget", |s| s.semget(-1, 4, 0o640 | c)));
    ok(both(ns, "semctl(SETVAL)", |s| {
        s.semctl(s0, 1, SETVAL, SemArg::Val(5))
    }));
    ok(both(ns, "semctl(IPC_SET)", |s| {
        set_sem(s, s3, |d| {
            d.sem_perm.uid = 12345;
            d.sem_perm.gid = 54321;
            d.sem_perm.mode = 0o604;
        })
    }));
    let m0 = ok(both(ns, "msgget", |s| s.msgget(0x3456, 0o666 | c)));
    let m1 = ok(both(ns, "msgget", |s| s.msgget(0x7fff_fff0, 0o640 | c)));
    ok(both(ns, "msgctl(IPC_SET)", |s| {
        set_msg(s, m1, |d| {
            d.msg_qbytes = 1000;
            d.msg_perm.uid = 1;
            d.msg_perm.gid = 2;
        })
    }));
    let h0 = ok(both(ns, "shmget", |s| s.shmget(0x5678, 4096, 0o600 | c)));
    let h1 = ok(both(ns, "shmget", |s| {
        s.shmget(0x6789, 1_000_000, 0o644 | c)
    }));
    let h2 = ok(both(ns, "shmget", |s| s.shmget(0, 1 << 20, 0o640 | c)));
    let _ = both(ns, "shmctl(SHM_LOCK)", |s| {
        s.shmctl(h1, SHM_LOCK, ShmArg::None)
    });
    ok(both(ns, "shmctl(IPC_SET)", |s| {
        set_shm(s, h2, |d| {
            // The longest name in /etc/passwd, where there is one.
            d.shm_perm.uid = long_named_uid().unwrap_or(4242);
            d.shm_perm.gid = 12345;
        })
    }));
    Made {
        sems: vec![s0, s2, s3],
        msgs: vec![m0, m1],
        shms: vec![h0, h1, h2],
    }
}

/// A uid whose name is longer than ipcs's 10 columns, if any.
fn long_named_uid() -> Option<u32> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let uid = f.nth(1)?.parse().ok()?;
        (name.len() > 10).then_some(uid)
    })
}

/// Every listing form: resources, formats, units, and their mixtures
/// (the last format and unit given win).
const LISTINGS: &[&[&str]] = &[
    &[],
    &["-a"],
    &["-m"],
    &["-q"],
    &["-s"],
    &["-mqs"],
    &["-t"],
    &["-p"],
    &["-c"],
    &["-l"],
    &["-u"],
    &["-b"],
    &["--human"],
    &["-m", "-b"],
    &["-q", "--human"],
    &["-m", "--human"],
    &["-l", "-b"],
    &["-l", "--human"],
    &["-u", "-b"],
    &["-u", "--human"],
    &["-m", "-t"],
    &["-s", "-t"],
    &["-q", "-t"],
    &["-q", "-p"],
    &["-m", "-p"],
    &["-s", "-p"],
    &["-m", "-c"],
    &["--semaphores", "--queues", "--creator"],
    &["--shmems", "--time"],
    &["--all", "--pid"],
    &["--limits", "--bytes"],
    &["--summary"],
    &["-t", "-c"],
    &["-c", "-u", "-l"],
    &["--human", "-b"],
    &["ignored", "-s"],
];

/// Command-line errors and missing objects.
const ERRORS: &[&[&str]] = &[
    &["-i", "999999", "-m"],
    &["-i", "999999", "-q"],
    &["-i", "999999", "-s"],
    &["-i", "0"],
    &["-i", "0", "-a"],
    &["-i", "0", "-m", "-q"],
    &["-i", "abc", "-q"],
    &["-i", "0x10", "-q"],
    &["-i", "99999999999", "-q"],
    &["-i", ""],
    &["-i"],
    &["--id"],
    &["--foo"],
    &["--foo=3"],
    &["--time=3"],
    &["--h"],
    &["--s"],
    &["-x"],
    &["-qx"],
    &["-q", "-i", "-1"],
    &["-m", "-i", "-1"],
];

#[test]
fn ipcs_matches_util_linux() {
    same_second("ipcs_matches_util_linux", || {
        let ns = Ns::new();
        let t0 = crate::kernel::settled_second();
        let made = populate(&ns);
        if now_secs() != t0 {
            return false;
        }
        for args in LISTINGS {
            ns.check("ipcs", args);
        }
        for args in ERRORS {
            ns.check("ipcs", args);
        }
        for (flag, ids) in [("-m", &made.shms), ("-q", &made.msgs), ("-s", &made.sems)] {
            for id in ids {
                let id = id.to_string();
                ns.check("ipcs", &[flag, "-i", &id]);
                ns.check("ipcs", &["-i", &id, flag, "--human"]);
                ns.check("ipcs", &[&format!("{flag}i{id}"), "-b", "-t"]);
            }
        }
        // Local time: a POSIX TZ string (no zoneinfo needed), and none.
        for tz in ["IST-5:30", "EST5EDT,M3.2.0,M11.1.0", ""] {
            ns.check_tz(tz, "ipcs", &["-t"]);
            ns.check_tz(tz, "ipcs", &["-s", "-i", &made.sems[0].to_string()]);
        }
        ns.check("ipcs", &["--id", &made.shms[0].to_string(), "--shmems"]);
        ns.check("ipcs", &["--queues", &format!("--id={}", made.msgs[1])]);
        true
    });
}

/// Limits after sysctl writes (including values that overflow the
/// kilobyte and byte arithmetic) and summaries.
#[test]
fn ipcs_limits_follow_sysctls() {
    in_fresh_ipc_ns("ipcs_limits_follow_sysctls", || {
        let ns = Ns::new();
        for (name, value) in [
            ("msgmni", "100"),
            ("msgmax", "4000"),
            ("msgmnb", "5000"),
            ("shmmax", "1234567"),
            ("shmall", "4611686018427387904"),
            ("shmmni", "77"),
            ("sem", "250 32000 32 128"),
        ] {
            both(&ns, name, |s| s.sysctl_write(name, value)).expect("sysctl write");
            for args in [&["-l"][..], &["-l", "-b"], &["-l", "--human"]] {
                ns.check("ipcs", args);
            }
        }
        for args in [&["-u"][..], &["-u", "-b"], &["-u", "--human"]] {
            ns.check("ipcs", args);
        }
    });
}

/// Ids in the extend mode's layout (`ipcmni_extend`) are not comparable
/// with this kernel's, but the listing must still read them back.
#[test]
fn ipcs_reads_extend_mode_namespaces() {
    let ns = Ns::with(CreateOptions {
        extend: true,
        ..CreateOptions::default()
    });
    let c = ns.caller();
    let id = c.semget(0x99, 2, 0o600 | IPC_CREAT).unwrap();
    let out = ns.ours("ipcs", &["-s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("0x00000099 {id:<10} ")), "{text}");
}
