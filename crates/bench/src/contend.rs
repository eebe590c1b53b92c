//! `ipcns bench contend`: several processes on one object, as applications
//! meet contention, ipcns beside the kernel in the same run.
//!
//! - One semaphore used as a lock: each process takes it (`semtimedop`
//!   -1 with SEM_UNDO and a 1 s timeout) and gives it back (`semop` +1
//!   with SEM_UNDO), again and again: stress-ng's `--sem-sysv` stressor,
//!   Apache's `Mutex sysvsem`, Perl's IPC::Shareable. 1, 2, 4 and 8
//!   processes; pairs (take + give) per second.
//! - One queue with P producers and P consumers of 8-byte messages
//!   (`msgsnd`, `msgrcv` of any type, both blocking). 1, 2 and 4 pairs;
//!   messages received per second.
//!
//! The processes are not bound to cpus: the scheduler places them on
//! every cpu the benchmark may use, as it places an application's. Each
//! measurement forks its processes, lets them go together, stops them
//! after a fixed time and sums what each did before the stop (a shared
//! page holds the start and stop words and the counts). The kernel runs
//! in a fresh IPC namespace made by a child of this program (root only:
//! otherwise its columns say why they are empty). Medians of [`ROUNDS`]
//! rounds; each round measures ipcns and the kernel in turn, alternating
//! which goes first.
//!
//! The goals are issue 15's: P processes on one semaphore (or P pairs on
//! one queue) keep at least the kernel's throughput in the same run, and
//! at least 80% of what one process (one pair) does alone.
//! `IPCNS_BENCH_QUICK=1` runs 20 ms rounds (for the tests).

use crate::TempNs;
use crate::progress::{self, Progress};
use crate::stats::{Goal, Spread, cpu_line, cpu_model, goal, json_num, json_str, quick, ratio};
use crate::sys::{KernelMsgBuf, SharedPage, fork};
use anyhow::{Context, bail, ensure};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use ipcns::abi::{IPC_CREAT, IPC_RMID, SEM_UNDO, SETVAL, sembuf};
use ipcns::sem::SemArg;
use ipcns::{Cred, Namespace};
use ipcns_oracle::Host;
use ipcns_oracle::sysv::SysV;
use std::cell::RefCell;
use std::time::Duration;

/// The hidden first argument of the kernel half (a child of this program,
/// in a fresh IPC namespace).
pub const KERNEL_CHILD: &str = "__contend-kernel-child";

/// Processes on the lock, per row.
const LOCK_PROCS: [usize; 4] = [1, 2, 4, 8];
/// Producer and consumer pairs on the queue, per row.
const QUEUE_PAIRS: [usize; 3] = [1, 2, 4];
const ROUNDS: usize = 3;
/// The length of one measurement.
fn round_ms() -> u64 {
    if quick() { 20 } else { 500 }
}

/// The text of every message.
const TEXT: [u8; 8] = *b"contend!";

/// The shared page's words: the start and stop flags, failures, then one
/// count per process.
const START: usize = 0;
const STOP: usize = 1;
const FAILED: usize = 2;
const COUNTS: usize = 8;

/// What is measured.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `n` processes on one semaphore used as a lock.
    Lock(usize),
    /// `n` producers and `n` consumers on one queue.
    Queue(usize),
}

impl Shape {
    fn procs(self) -> usize {
        match self {
            Shape::Lock(n) => n,
            Shape::Queue(n) => 2 * n,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Shape::Lock(_) => "lock",
            Shape::Queue(_) => "queue",
        }
    }

    fn n(self) -> usize {
        match self {
            Shape::Lock(n) | Shape::Queue(n) => n,
        }
    }

    /// What is measured, for the progress line.
    fn label(self) -> String {
        match self {
            Shape::Lock(1) => "1 process on one semaphore".to_string(),
            Shape::Lock(n) => format!("{n} processes on one semaphore"),
            Shape::Queue(1) => "1 producer/consumer pair on one queue".to_string(),
            Shape::Queue(n) => format!("{n} producer/consumer pairs on one queue"),
        }
    }
}

/// One implementation's side of a measurement: the semaphore (value 1)
/// and the queue, as one process sees them.
trait Side {
    fn take(&self) -> Result<(), i32>;
    fn give(&self) -> Result<(), i32>;
    fn send(&self) -> Result<(), i32>;
    fn receive(&self) -> Result<(), i32>;
    /// Removes the queue: every producer and consumer still blocked ends
    /// (EIDRM).
    fn remove_queue(&self);
}

const TAKE: sembuf = sembuf {
    sem_num: 0,
    sem_op: -1,
    sem_flg: SEM_UNDO,
};
const GIVE: sembuf = sembuf {
    sem_num: 0,
    sem_op: 1,
    sem_flg: SEM_UNDO,
};
const TIMEOUT: libc::timespec = libc::timespec {
    tv_sec: 1,
    tv_nsec: 0,
};

struct IpcnsSide<'a> {
    ns: &'a Namespace,
    cred: Cred,
    sem: i32,
    msq: i32,
}

impl Side for IpcnsSide<'_> {
    fn take(&self) -> Result<(), i32> {
        self.ns
            .semtimedop(&self.cred, self.sem, &[TAKE], Some(&TIMEOUT))
            .map(drop)
            .map_err(|e| e.0)
    }

    fn give(&self) -> Result<(), i32> {
        self.ns
            .semop(&self.cred, self.sem, &[GIVE])
            .map(drop)
            .map_err(|e| e.0)
    }

    fn send(&self) -> Result<(), i32> {
        self.ns
            .msgsnd(&self.cred, self.msq, 1, &TEXT, 0)
            .map(drop)
            .map_err(|e| e.0)
    }

    fn receive(&self) -> Result<(), i32> {
        let mut buf = [0u8; TEXT.len()];
        self.ns
            .msgrcv(&self.cred, self.msq, &mut buf, 0, 0)
            .map(drop)
            .map_err(|e| e.0)
    }

    fn remove_queue(&self) {
        let _ = self
            .ns
            .msgctl(&self.cred, self.msq, IPC_RMID, ipcns::msg::MsgArg::None);
    }
}

struct KernelSide {
    sem: i32,
    msq: i32,
    buf: RefCell<KernelMsgBuf>,
}

impl Side for KernelSide {
    fn take(&self) -> Result<(), i32> {
        Host.semtimedop(self.sem, &[TAKE], Some(&TIMEOUT))
            .map(drop)
            .map_err(|e| e.0)
    }

    fn give(&self) -> Result<(), i32> {
        Host.semop(self.sem, &[GIVE]).map(drop).map_err(|e| e.0)
    }

    fn send(&self) -> Result<(), i32> {
        self.buf
            .borrow_mut()
            .send(self.msq, 1, TEXT.len(), 0)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }

    fn receive(&self) -> Result<(), i32> {
        self.buf
            .borrow_mut()
            .receive(self.msq, TEXT.len(), 0, 0)
            .map(drop)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
    }

    fn remove_queue(&self) {
        let _ = Host.msgctl(self.msq, IPC_RMID, ipcns::msg::MsgArg::None);
    }
}

/// One process's loop: its operations until the stop word is set, the
/// ones completed before it counted. An error other than the queue's
/// removal after the stop is a failure.
fn work(side: &impl Side, shape: Shape, me: usize, page: &SharedPage) -> bool {
    let w = page.words();
    while w[START].load(Acquire) == 0 {
        core::hint::spin_loop();
    }
    let mut count = 0u64;
    let done = |r: Result<(), i32>| match r {
        Ok(()) => Ok(w[STOP].load(Acquire) == 0),
        Err(_) if w[STOP].load(Acquire) != 0 => Ok(false),
        Err(e) => Err(e),
    };
    let r = loop {
        let step = match shape {
            Shape::Lock(_) => side.take().and_then(|()| side.give()),
            // The first half of the processes produce, the rest consume.
            Shape::Queue(n) if me < n => side.send(),
            Shape::Queue(_) => side.receive(),
        };
        match done(step) {
            Ok(true) => count += 1,
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    w[COUNTS + me].store(count, Release);
    if let Err(e) = r {
        eprintln!(
            "ipcns: bench contend: {} {}: {}",
            shape.word(),
            shape.n(),
            ipcns::Errno(e)
        );
        w[FAILED].fetch_add(1, Relaxed);
        return false;
    }
    true
}

/// One measurement: the shape's processes forked (each making its side
/// with `side`), let go together, stopped after [`round_ms`]; operations
/// per second. `parent` is this process's side, which removes the queue
/// at the stop (so that blocked producers and consumers end).
fn measure<S: Side>(
    shape: Shape,
    parent: &S,
    side: impl Fn() -> anyhow::Result<S>,
) -> anyhow::Result<f64> {
    let page = SharedPage::new().context("a shared page")?;
    let mut children = Vec::new();
    for me in 0..shape.procs() {
        let child = fork(|| side().is_ok_and(|s| work(&s, shape, me, &page))).context("fork")?;
        let Some(child) = child else {
            bail!("fork refused: this process has other threads");
        };
        children.push(child);
    }
    let w = page.words();
    w[START].store(1, Release);
    std::thread::sleep(Duration::from_millis(round_ms()));
    w[STOP].store(1, Release);
    if let Shape::Queue(_) = shape {
        parent.remove_queue();
    }
    let mut ok = true;
    for c in children {
        ok &= c.wait().context("waitpid")?;
    }
    ensure!(
        ok && w[FAILED].load(Acquire) == 0,
        "a process failed (its error above)"
    );
    let total: u64 = (0..shape.procs())
        .map(|i| w[COUNTS + i].load(Acquire))
        .sum();
    Ok(total as f64 * 1000.0 / round_ms() as f64)
}

/// Every shape in turn, in table order.
fn shapes() -> Vec<Shape> {
    LOCK_PROCS
        .iter()
        .map(|&n| Shape::Lock(n))
        .chain(QUEUE_PAIRS.iter().map(|&n| Shape::Queue(n)))
        .collect()
}

/// ipcns, one shape: a semaphore at 1 and a queue in a throwaway
/// namespace, each process with its own credentials.
fn ipcns_one(shape: Shape) -> anyhow::Result<f64> {
    let t = TempNs::new("contend", 64 << 20, false)?;
    let cred = t.cred()?;
    let sem = t.ns.semget(&cred, 0, 1, IPC_CREAT | 0o600)?;
    t.ns.semctl(&cred, sem, 0, SETVAL, SemArg::Val(1))?;
    let msq = t.ns.msgget(&cred, 0, IPC_CREAT | 0o600)?;
    let make = || {
        Ok(IpcnsSide {
            ns: &t.ns,
            cred: t.cred()?,
            sem,
            msq,
        })
    };
    let parent = make()?;
    measure(shape, &parent, make)
}

/// The kernel, one shape, in the current IPC namespace (the kernel
/// child's fresh one).
fn kernel_one(shape: Shape) -> anyhow::Result<f64> {
    let sem = Host.semget(0, 1, IPC_CREAT | 0o600)?;
    Host.semctl(sem, 0, SETVAL, SemArg::Val(1))?;
    let msq = Host.msgget(0, IPC_CREAT | 0o600)?;
    let make = || {
        Ok(KernelSide {
            sem,
            msq,
            buf: RefCell::new(KernelMsgBuf::new(TEXT.len())),
        })
    };
    let parent = make()?;
    let r = measure(shape, &parent, make);
    let _ = Host.semctl(sem, 0, IPC_RMID, SemArg::None);
    let _ = Host.msgctl(msq, IPC_RMID, ipcns::msg::MsgArg::None);
    r
}

/// The kernel half: `lock N` or `queue N` in a fresh IPC namespace;
/// prints operations per second.
pub fn kernel_child(args: &[String]) -> anyhow::Result<()> {
    let shape = match args {
        [what, n] if what == "lock" => Shape::Lock(n.parse()?),
        [what, n] if what == "queue" => Shape::Queue(n.parse()?),
        _ => bail!("usage: ipcns bench {KERNEL_CHILD} lock N | queue N"),
    };
    crate::fresh::enter()?;
    println!("{}", kernel_one(shape)?);
    Ok(())
}

/// Runs the kernel half for `shape`.
fn kernel_run(shape: Shape) -> anyhow::Result<f64> {
    let args = [shape.word().to_string(), shape.n().to_string()];
    let words = crate::kernel_child_words(KERNEL_CHILD, &args)?;
    let [w] = &words[..] else {
        bail!("kernel child said {words:?}");
    };
    Ok(w.parse()?)
}

/// One row's throughputs per second: median and spread of the rounds.
struct Row {
    shape: Shape,
    ipcns: Spread,
    kernel: Option<Spread>,
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let shapes = shapes();
    let mut ours = vec![Vec::new(); shapes.len()];
    let mut theirs = vec![Vec::new(); shapes.len()];
    let mut missing: Option<String> = None;
    let mut progress = Progress::new("contend", ROUNDS * shapes.len());
    for round in 0..ROUNDS {
        for (i, &shape) in shapes.iter().enumerate() {
            progress.step(
                round * shapes.len() + i,
                &format!("{}, {}", progress::round(round, ROUNDS), shape.label()),
            );
            let kernel_first = (round + i) % 2 == 1;
            let mut kernel = || {
                if missing.is_none() {
                    match kernel_run(shape) {
                        Ok(x) => theirs[i].push(x),
                        Err(e) => missing = Some(format!("{e:#}")),
                    }
                }
            };
            if kernel_first {
                kernel();
            }
            ours[i].push(
                ipcns_one(shape)
                    .with_context(|| format!("ipcns {} {}", shape.word(), shape.n()))?,
            );
            if !kernel_first {
                kernel();
            }
        }
    }
    let rows: Vec<Row> = shapes
        .iter()
        .zip(ours.iter_mut().zip(theirs.iter_mut()))
        .map(|(&shape, (o, t))| Row {
            shape,
            ipcns: Spread::of(o),
            kernel: (t.len() == ROUNDS).then(|| Spread::of(t)),
        })
        .collect();
    progress.clear();
    let goals = goals(&rows);
    let cpu = cpu_model();
    let usable = crate::sys::allowed_cpus()?.len();
    if opts.json {
        println!(
            "{}",
            to_json(&rows, &goals, &cpu, usable, missing.as_deref())
        );
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        print!("{}", table(&rows, goals, &cpu, usable, missing.as_deref()));
    }
    Ok(())
}

/// One process's (one pair's) throughput for `shape`'s kind.
fn alone(rows: &[Row], shape: Shape) -> f64 {
    rows.iter()
        .find(|r| r.shape.word() == shape.word() && r.shape.n() == 1)
        .map_or(f64::NAN, |r| r.ipcns.median)
}

fn goals(rows: &[Row]) -> Vec<Goal> {
    let mut g = Vec::new();
    for r in rows.iter().filter(|r| r.shape.n() > 1) {
        let what = match r.shape {
            Shape::Lock(n) => format!("{n} processes on one semaphore"),
            Shape::Queue(n) => format!("{n} producers and {n} consumers on one queue"),
        };
        if let Some(k) = r.kernel {
            let x = ratio(r.ipcns.median, k.median);
            g.push(goal(
                &format!("{what}: at least the kernel's throughput"),
                x,
                x >= 1.0,
            ));
        }
        let share = r.ipcns.median / alone(rows, r.shape);
        g.push(goal(
            &format!("{what}: at least 80% of one's throughput (as a fraction)"),
            share,
            share >= 0.8,
        ));
    }
    g
}

fn table(rows: &[Row], goals: &[Goal], cpu: &str, usable: usize, missing: Option<&str>) -> String {
    let mut s = format!(
        "ipcns bench contend: several processes on one object, ipcns beside the kernel; medians of {ROUNDS} rounds of {} ms (slowest-fastest)\n{}\n",
        round_ms(),
        cpu_line(cpu, usable)
    );
    for (kind, head, unit) in [
        (
            "lock",
            "one semaphore as a lock (SEM_UNDO take with a 1 s timeout, give)",
            "pairs/s",
        ),
        (
            "queue",
            "one queue, P producers and P consumers, 8-byte messages",
            "msgs/s",
        ),
    ] {
        s.push_str(&format!(
            "\n{head}\n{:<10} {:>26} {:>26} {:>8} {:>10}\n",
            if kind == "lock" { "procs" } else { "pairs" },
            format!("ipcns {unit}"),
            format!("kernel {unit}"),
            "i/k",
            "vs one"
        ));
        for r in rows.iter().filter(|r| r.shape.word() == kind) {
            let (k, ik) = match r.kernel {
                Some(k) => (
                    k.cell(0),
                    format!("{:.2}x", ratio(r.ipcns.median, k.median)),
                ),
                None => ("-".to_string(), "-".to_string()),
            };
            s.push_str(&format!(
                "{:<10} {:>26} {:>26} {:>8} {:>9.0}%\n",
                r.shape.n(),
                r.ipcns.cell(0),
                k,
                ik,
                100.0 * r.ipcns.median / alone(rows, r.shape)
            ));
        }
    }
    s.push_str("  (processes not bound to cpus; a fresh namespace per measurement; the kernel in a fresh IPC namespace)\n");
    if let Some(why) = missing {
        s.push_str(&format!("  kernel: {why}\n"));
    }
    if !goals.is_empty() {
        s.push('\n');
    }
    for g in goals {
        s.push_str(&g.line());
        s.push('\n');
    }
    s
}

fn to_json(
    rows: &[Row],
    goals: &[Goal],
    cpu: &str,
    usable: usize,
    missing: Option<&str>,
) -> String {
    let row = |r: &Row| {
        format!(
            "{{\"shape\":\"{}\",\"n\":{},{},{},\"ipcns_over_kernel\":{},\"ipcns_over_one\":{}}}",
            r.shape.word(),
            r.shape.n(),
            r.ipcns.json_fields("ipcns_per_s"),
            r.kernel.map_or("\"kernel_per_s\":null".to_string(), |k| {
                k.json_fields("kernel_per_s")
            }),
            r.kernel.map_or("null".to_string(), |k| {
                json_num(ratio(r.ipcns.median, k.median))
            }),
            json_num(r.ipcns.median / alone(rows, r.shape))
        )
    };
    format!(
        "{{\"bench\":\"contend\",\"cpu\":{},\"cpus_usable\":{usable},\"rounds\":{ROUNDS},\"round_ms\":{},\"rows\":[{}],\"kernel_missing\":{},\"goals\":[{}]}}",
        json_str(cpu),
        round_ms(),
        rows.iter().map(row).collect::<Vec<_>>().join(","),
        missing.map_or("null".to_string(), json_str),
        goals.iter().map(Goal::json).collect::<Vec<_>>().join(",")
    )
}
