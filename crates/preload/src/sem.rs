//! semget, semop, semtimedop and semctl as the system calls take them:
//! the caller's memory copied in and out where, and in the order, ipc/sem.c
//! copies it, so that EFAULT comes exactly where the kernel gives it.

use crate::cred::with_caller;
use crate::state::namespace;
use crate::user;
use ipcns_core::abi::sembuf;
use ipcns_core::intr::Mark;
use ipcns_core::usercopy;
use ipcns_core::{Errno, Namespace, SysResult};

/// `semget(key, nsems, semflg)`. ipc/sem.c `ksys_semget`.
pub fn semget(key: i32, nsems: i32, semflg: i32) -> SysResult<i64> {
    let ns = namespace()?;
    with_caller(ns, |c| ns.semget(c, key, nsems, semflg)).map(i64::from)
}

/// Operations decoded on the stack up to this many (the kernel's
/// SEMOPM_FAST is 64; fewer here, since the array is set up per call).
const FAST_SOPS: usize = 8;

/// `semtimedop(semid, sops, nsops, timeout)` (and `semop`: no timeout);
/// `nsops` as the system call's `unsigned int`.
///
/// ipc/sem.c `ksys_semtimedop`: the timeout copied in first (EFAULT);
/// `do_semtimedop`: "if (nsops > ns->sc_semopm) return -E2BIG;", "if
/// (nsops < 1) return -EINVAL;", then `copy_from_user(sops, tsops,
/// nsops * sizeof(*tsops))` (EFAULT), then `__do_semtimedop`, whose own checks
/// the core makes in that order. When the operations can be read in place
/// (a few, on the stack or in the program's image, no timeout) the copy
/// cannot fail, so the core's checks alone give the kernel's answer.
#[inline(always)]
pub fn semtimedop(semid: i32, sops: usize, nsops: u32, timeout: usize) -> SysResult<i64> {
    // The program's call starts here, before any of our own work: a
    // signal handler that runs from now on ends its sleep with EINTR.
    let mark = Mark::now();
    let ns = namespace()?;
    let n = nsops as usize;
    if timeout == 0 && n == 1 {
        // The common case, without an array to clear.
        let op = match user::with_direct(sops, 6, one) {
            Some(op) => Some(op),
            // Off the stack and image: copied by the copy that may fault
            // (a fault goes the long way, for the kernel's order of errors).
            None => {
                let mut b = [0u8; 6];
                matches!(user::read_faulting(sops, &mut b), Some(Ok(()))).then(|| one(&b))
            }
        };
        if let Some(op) = op {
            return with_caller(ns, |c| ns.semtimedop_since(mark, c, semid, &[op], None))
                .map(i64::from);
        }
    } else if timeout == 0 && (2..=FAST_SOPS).contains(&n) {
        let mut ops = [sembuf::default(); FAST_SOPS];
        let copied = user::with_direct(sops, n * 6, |raw| decode(raw, &mut ops[..n])).is_some()
            || {
                let mut b = [0u8; FAST_SOPS * 6];
                let ok = matches!(user::read_faulting(sops, &mut b[..n * 6]), Some(Ok(())));
                if ok {
                    decode(&b[..n * 6], &mut ops[..n]);
                }
                ok
            };
        if copied {
            return with_caller(ns, |c| ns.semtimedop_since(mark, c, semid, &ops[..n], None))
                .map(i64::from);
        }
    }
    semtimedop_copied(mark, ns, semid, sops, nsops, timeout)
}

/// [`semtimedop`] with the caller's timeout and operations copied in, in
/// the kernel's order.
#[inline(never)]
fn semtimedop_copied(
    mark: Mark,
    ns: &Namespace,
    semid: i32,
    sops: usize,
    nsops: u32,
    timeout: usize,
) -> SysResult<i64> {
    let ts = if timeout == 0 {
        None
    } else {
        let mut b = [0u8; 16];
        user::read(timeout, &mut b)?;
        let (s, n) = b.split_at(8);
        Some(libc::timespec {
            tv_sec: i64::from_ne_bytes(s.try_into().map_err(|_| Errno::EFAULT)?),
            tv_nsec: i64::from_ne_bytes(n.try_into().map_err(|_| Errno::EFAULT)?),
        })
    };
    // An unsigned compare: a negative semopm sets no limit.
    if u64::from(nsops) > u64::from(ns.semopm() as u32) {
        return Err(Errno::E2BIG);
    }
    if nsops < 1 {
        return Err(Errno::EINVAL);
    }
    let n = nsops as usize;
    let run = |ops: &[sembuf]| {
        with_caller(ns, |c| {
            ns.semtimedop_since(mark, c, semid, ops, ts.as_ref())
        })
    };
    // The operations' bytes: in place on the direct path, else copied in
    // by the kernel (EFAULT first).
    user::with_bytes(sops, n * 6, |raw| {
        if n <= FAST_SOPS {
            let mut ops = [sembuf::default(); FAST_SOPS];
            decode(raw, &mut ops[..n]);
            return run(&ops[..n]);
        }
        let mut ops = Vec::new();
        ops.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        ops.resize(n, sembuf::default());
        decode(raw, &mut ops);
        run(&ops)
    })?
    .map(i64::from)
}

/// `struct sembuf`s from their bytes: `unsigned short sem_num; short
/// sem_op; short sem_flg;`.
#[inline(always)]
fn decode(raw: &[u8], ops: &mut [sembuf]) {
    for (o, b) in ops.iter_mut().zip(raw.chunks_exact(6)) {
        *o = one(b);
    }
}

/// One `struct sembuf` from the first 6 of `b` (a zero one if fewer).
#[inline(always)]
fn one(b: &[u8]) -> sembuf {
    match *b {
        [n0, n1, o0, o1, f0, f1, ..] => sembuf {
            sem_num: u16::from_ne_bytes([n0, n1]),
            sem_op: i16::from_ne_bytes([o0, o1]),
            sem_flg: i16::from_ne_bytes([f0, f1]),
        },
        _ => sembuf::default(),
    }
}

/// `semctl(semid, semnum, cmd, arg)`, `arg` the `union semun` as the
/// machine word it is passed in (its `val` is the low 32 bits, as
/// `ksys_semctl` takes it on a little-endian 64-bit machine).
///
/// The argument's copies in and out are `ipcns_core::usercopy`'s (the
/// kernel's order of copies, shared with `ipcns run`'s supervisor).
pub fn semctl(semid: i32, semnum: i32, cmd: i32, arg: usize) -> SysResult<i64> {
    let ns = namespace()?;
    usercopy::semctl(&user::Own, semid, cmd, arg as u64, |a| {
        with_caller(ns, |c| ns.semctl(c, semid, semnum, cmd, a))
    })
}
