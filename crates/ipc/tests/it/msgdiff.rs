//! The differential test of msgsnd and msgrcv: random sequences of
//! msgget, msgsnd and msgrcv (IPC_NOWAIT, every search mode and flag,
//! buffers too small, full queues), IPC_SET of the queue size, IPC_STAT,
//! MSG_INFO, IPC_RMID and msgmax changes, run against the kernel in a
//! fresh IPC namespace and against ipcns: every return value, errno,
//! received type and text, and STAT field (times as set or not, pids by
//! role) must agree. Proptest shrinks a failing sequence.

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::{CreateOptions, Cred};
use ipcns_oracle::sysv::{NsCaller, SysV};
use proptest::prelude::*;
use std::io::{Read, Write};

#[derive(Debug, Clone)]
enum Op {
    Get {
        key: i32,
    },
    Snd {
        q: usize,
        mtype: i64,
        len: usize,
        flg: i32,
    },
    Rcv {
        q: usize,
        cap: usize,
        msgtyp: i64,
        flg: i32,
    },
    Stat {
        q: usize,
    },
    SetQbytes {
        q: usize,
        qbytes: u64,
    },
    Info,
    Rmid {
        q: usize,
    },
    Msgmax(&'static str),
}

fn op() -> impl Strategy<Value = Op> {
    let q = 0usize..3;
    prop_oneof![
        1 => prop::sample::select(vec![0, 0, 7]).prop_map(|key| Op::Get { key }),
        8 => (q.clone(), prop::sample::select(vec![1i64, 1, 2, 2, 3, 5, 0, -1, i64::MAX]),
              prop::sample::select(vec![0usize, 1, 7, 8, 9, 100, 4000, 8192, 8193]),
              prop::sample::select(vec![IPC_NOWAIT, IPC_NOWAIT, IPC_NOWAIT | MSG_NOERROR]))
            .prop_map(|(q, mtype, len, flg)| Op::Snd { q, mtype, len, flg }),
        8 => (q.clone(), prop::sample::select(vec![0usize, 1, 7, 8, 64, 4000, 8192, 10000]),
              prop::sample::select(vec![0i64, 0, 1, 2, 3, 4, -1, -2, -3, -6, i64::MIN]),
              prop::sample::select(vec![
                  IPC_NOWAIT, IPC_NOWAIT, IPC_NOWAIT | MSG_NOERROR, IPC_NOWAIT | MSG_EXCEPT,
                  IPC_NOWAIT | MSG_COPY, IPC_NOWAIT | MSG_COPY | MSG_NOERROR,
                  IPC_NOWAIT | MSG_COPY | MSG_EXCEPT, MSG_COPY,
                  IPC_NOWAIT | MSG_EXCEPT | MSG_NOERROR,
              ]))
            .prop_map(|(q, cap, msgtyp, flg)| Op::Rcv { q, cap, msgtyp, flg }),
        3 => q.clone().prop_map(|q| Op::Stat { q }),
        1 => (q.clone(), prop::sample::select(vec![0u64, 1, 3, 9, 100, 8192, 16384]))
            .prop_map(|(q, qbytes)| Op::SetQbytes { q, qbytes }),
        1 => Just(Op::Info),
        1 => q.prop_map(|q| Op::Rmid { q }),
        1 => prop::sample::select(vec!["100", "8192", "0"]).prop_map(Op::Msgmax),
    ]
}

fn seq() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..40)
}

/// The text of the message op `k` sends: `len` bytes that name it.
fn text(k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k * 31 + i * 7) as u8).collect()
}

fn t(x: i64) -> &'static str {
    if x > 0 { "T" } else { "0" }
}

/// Runs the sequence (three queues made first), one line per operation;
/// `runner` is the pid the calls are made as (pids print as roles).
fn exec(s: &dyn SysV, ops: &[Op], runner: i32) -> Vec<String> {
    let pid = |p: i32| match p {
        0 => "0".to_string(),
        p if p == runner => "R".to_string(),
        p => format!("?{p}"),
    };
    let mut ids: Vec<i32> = (0..3)
        .map(|_| s.msgget(0, IPC_CREAT | 0o600).unwrap_or(-1))
        .collect();
    let mut out = vec![format!("{ids:?}")];
    for (k, op) in ops.iter().enumerate() {
        let line = match *op {
            Op::Get { key } => {
                let r = s.msgget(key, IPC_CREAT | 0o600);
                if let Ok(id) = r {
                    ids.rotate_right(1);
                    ids[0] = id;
                }
                format!("get {r:?}")
            }
            Op::Snd { q, mtype, len, flg } => {
                format!("snd {:?}", s.msgsnd(ids[q], mtype, &text(k, len), flg))
            }
            Op::Rcv {
                q,
                cap,
                msgtyp,
                flg,
            } => {
                let mut buf = vec![0xeeu8; cap];
                match s.msgrcv(ids[q], &mut buf, msgtyp, flg) {
                    Ok((ty, n)) => {
                        // Bytes past the copy must be untouched.
                        let rest_clean = buf[n..].iter().all(|&b| b == 0xee);
                        format!(
                            "rcv type={ty} n={n} text={:?} clean={rest_clean}",
                            fnv(&buf[..n])
                        )
                    }
                    Err(e) => format!("rcv {e:?}"),
                }
            }
            Op::Stat { q } => {
                let mut ds = msqid64_ds::default();
                match s.msgctl(ids[q], IPC_STAT, MsgArg::Ds(&mut ds)) {
                    Ok(r) => format!(
                        "stat {r} s={} r={} c={} cb={} qn={} qb={} lspid={} lrpid={}",
                        t(ds.msg_stime),
                        t(ds.msg_rtime),
                        t(ds.msg_ctime),
                        ds.msg_cbytes,
                        ds.msg_qnum,
                        ds.msg_qbytes,
                        pid(ds.msg_lspid),
                        pid(ds.msg_lrpid)
                    ),
                    Err(e) => format!("stat {e:?}"),
                }
            }
            Op::SetQbytes { q, qbytes } => {
                let mut ds = msqid64_ds::default();
                let r = s
                    .msgctl(ids[q], IPC_STAT, MsgArg::Ds(&mut ds))
                    .and_then(|_| {
                        ds.msg_qbytes = qbytes;
                        s.msgctl(ids[q], IPC_SET, MsgArg::Ds(&mut ds))
                    });
                format!("set {r:?}")
            }
            Op::Info => {
                let mut i = msginfo::default();
                let r = s.msgctl(0, MSG_INFO, MsgArg::Info(&mut i));
                format!("info {r:?} {i:?}")
            }
            Op::Rmid { q } => format!("rmid {:?}", s.msgctl(ids[q], IPC_RMID, MsgArg::None)),
            Op::Msgmax(v) => format!("msgmax {:?}", s.sysctl_write("msgmax", v)),
        };
        out.push(line);
    }
    out
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The kernel side: a forked child in a fresh IPC namespace. Its pid and
/// lines.
fn run_kernel(ops: &[Op]) -> (i32, Vec<String>) {
    let (mut r, mut w) = std::io::pipe().unwrap();
    let ops2 = ops.to_vec();
    // The closure owns the write end: in the parent it is dropped when
    // fork_child returns, so the read below ends when the child exits.
    let pid = support::fork_child(move || {
        if ipcns_oracle::kernel::unshare_ipc().is_err() {
            return 3;
        }
        let me = std::process::id() as i32;
        let lines = exec(&ipcns_oracle::kernel::Host, &ops2, me);
        let _ = write!(w, "{me}\n{}", lines.join("\n"));
        0
    });
    let mut out = String::new();
    r.read_to_string(&mut out).unwrap();
    assert_eq!(support::wait_child(pid), 0, "kernel runner failed");
    let mut it = out.lines();
    let me = it.next().unwrap().parse().unwrap();
    (me, it.map(str::to_string).collect())
}

fn run_ipcns(ops: &[Op], runner: i32) -> Vec<String> {
    let t = TestNs::with(
        "msgdiff",
        CreateOptions {
            heap_size: 16 << 20,
            ..CreateOptions::default()
        },
    );
    let mut cred = Cred::read_current(0).expect("read our credentials");
    cred.pid = runner;
    let lines = exec(&NsCaller { ns: &t.ns, cred }, ops, runner);
    t.ns.check().unwrap();
    lines
}

#[test]
fn msg_sequences_match_the_kernel() {
    if !support::kernel_or_skip("msg_sequences_match_the_kernel") {
        return;
    }
    let cases = std::env::var("IPCNS_MSG_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let seed: u64 = std::env::var("IPCNS_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x3559_0005);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let rng = proptest::test_runner::TestRng::from_seed(
        proptest::test_runner::RngAlgorithm::ChaCha,
        &seed_bytes,
    );
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(config, rng);
    let result = runner.run(&seq(), |ops| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (pid, kernel) = run_kernel(&ops);
        let ours = run_ipcns(&ops, pid);
        for (k, (a, b)) in kernel.iter().zip(&ours).enumerate() {
            let what = if k == 0 { None } else { ops.get(k - 1) };
            prop_assert_eq!(a, b, "line {} ({:?}) of {:#?}", k, what, ops);
        }
        prop_assert_eq!(kernel.len(), ours.len());
        Ok(())
    });
    let n = counter.load(std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(
        std::io::stderr(),
        "msg differential: {n} sequences (seed {seed}) run against the kernel and ipcns"
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
