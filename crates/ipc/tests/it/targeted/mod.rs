//! The targeted fuzzer: one field of a LIVE object changed to an extreme
//! or self-referencing value while a victim process works on it, under a
//! watchdog.
//!
//! Each case has three processes. The builder (build.rs) creates the
//! arena, fills it with objects of every kind and stays alive mapping it.
//! The victim (victim.rs) attaches, makes undo entries on the three sets,
//! attaches both segments and leaves sleepers on a set and two queues,
//! then says it is ready. The test process, the hostile participant,
//! follows the links in its own mapping of the file to the live objects
//! (known.rs), makes the case's stores (targets.rs: every field
//! the threat model names, each with its values: 0, 1, extremes, itself,
//! two-entry cycles, garbage, another object, a live thread's identity in
//! a lock word), and lets the victim go on: every call on the corrupted
//! objects, copies through guarded buffers (guard.rs), RLIMIT_AS at 2 GiB
//! above what it maps, each bounded call timed, then removal, its
//! sleepers joined, exit.
//!
//! A case fails on: a fatal signal (a fault in a guard page is an overrun,
//! past or before a caller's buffer), a panic, a slack byte before a
//! buffer changed (underrun), a bounded call past its bound (a
//! semtimedop's 10 ms timeout + 1.5 s, IPC_NOWAIT 1.5 s, the victim's lock
//! limit (100 ms) + 0.6 s where a live participant keeps a lock; the time
//! the victim's thread waited for a cpu is not counted), a sleeper not
//! ended by its timeout or its queue's removal, a victim still running
//! after the deadline, an abnormal exit, or, in a case whose stores only
//! make lists loop back on themselves, a heap the library left unsound
//! (a block freed twice: `Namespace::problems` after the victim's exit). Errors are the expected
//! answers: their errnos are counted per target.
//!
//! Cases run in round-robin order over the targets (each target's first
//! value, then each one's second...), for IPCNS_TARGETED_SECS (default
//! 50) seconds; a long run goes through the whole list, then random cases
//! (random targets and seeds) until the time is up.
//!
//! Environment: IPCNS_TARGETED_SECS, IPCNS_TARGETED_CASES (at most this
//! many cases), IPCNS_TARGETED_JOBS (cases at once, default 2: a case
//! mostly waits), IPCNS_TARGETED_SEED (the random values; fixed by
//! default), IPCNS_TARGETED_CASE=N (only case N, as a failure names it),
//! IPCNS_TARGETED_FILTER=TEXT|TEXT... (only targets whose name contains
//! one of them),
//! IPCNS_TARGETED_MAX_FAILURES (distinct failures, default 30: the run
//! stops there), IPCNS_TARGETED_TIMEOUT_MS (the victim's deadline,
//! default 40000; a victim past it has its stacks taken with gdb, if
//! installed, unless IPCNS_TARGETED_GDB=0), IPCNS_TARGETED_VERBOSE=1
//! (every line each victim wrote).

mod build;
mod guard;
mod ident;
mod known;
mod map;
mod targets;
mod victim;

use crate::corrupt::{Rng, case_rng, env_u64};
use crate::support;
use ident::{Stranger, TID_MASK};
use known::{Idents, Known};
use map::ArenaMap;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};
use targets::{Case, Race};

/// The default seed ("ipcns_tg").
const DEFAULT_SEED: u64 = 0x6970_636e_735f_7467;

/// What the whole run found.
#[derive(Default)]
struct Tally {
    cases: u64,
    skipped: u64,
    writes: u64,
    victims: u64,
    faults: u64,
    overruns: u64,
    overlong: u64,
    hangs: u64,
    panics: u64,
    /// Cases whose stores left the heap sound and the library broke it.
    heap_broken: u64,
    calls: u64,
    unended: u64,
    /// Per target: errno (or "ok") -> calls.
    errnos: BTreeMap<String, BTreeMap<String, u64>>,
    /// Distinct failures (by case and what went wrong, numbers aside):
    /// the first report and how many cases repeated it.
    failures: Vec<(String, String, u64)>,
    /// Untimed calls that took over [`SLOW`] (not failures: noted).
    slow: BTreeMap<String, (String, u64)>,
    /// The slowest cases.
    durations: Vec<(f64, String)>,
}

/// An untimed call this long is noted.
const SLOW: u64 = 2_000_000;

impl Tally {
    fn merge(&mut self, o: Tally) {
        self.cases += o.cases;
        self.skipped += o.skipped;
        self.writes += o.writes;
        self.victims += o.victims;
        self.faults += o.faults;
        self.overruns += o.overruns;
        self.overlong += o.overlong;
        self.hangs += o.hangs;
        self.panics += o.panics;
        self.heap_broken += o.heap_broken;
        self.calls += o.calls;
        self.unended += o.unended;
        for (target, e) in o.errnos {
            let mine = self.errnos.entry(target).or_default();
            for (k, n) in e {
                *mine.entry(k).or_default() += n;
            }
        }
        for (key, report, n) in o.failures {
            match self.failures.iter_mut().find(|f| f.0 == key) {
                Some(f) => f.2 += n,
                None => self.failures.push((key, report, n)),
            }
        }
        for (key, (report, n)) in o.slow {
            self.slow.entry(key).or_insert_with(|| (report, 0)).1 += n;
        }
        self.durations.extend(o.durations);
    }

    fn fail(&mut self, key: String, report: String) {
        match self.failures.iter_mut().find(|f| f.0 == key) {
            Some(f) => f.2 += 1,
            None => self.failures.push((key, report, 1)),
        }
    }
}

/// `s` without its digits: what stays the same when a case repeats.
fn shape(s: &str) -> String {
    s.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// The lines a victim wrote, read by a thread of ours until it closes.
fn reader(sock: UnixStream) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(sock).lines() {
            let Ok(l) = line else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn arena_path(n: usize) -> PathBuf {
    PathBuf::from("/dev/shm").join(format!(
        "ipcns-test-targeted-{}-{n}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

/// Removes a case's arena and segments when dropped, and ends its
/// builder.
struct CaseFiles {
    path: PathBuf,
    builder: Option<i32>,
}

impl Drop for CaseFiles {
    fn drop(&mut self) {
        if let Some(pid) = self.builder.take() {
            support::kill(pid);
            support::wait_child(pid);
        }
        let _ = ipcns::Namespace::remove_at(&self.path);
    }
}

/// Case `n`: of the list, or past its end a random target and value
/// (the same for the same `n` and seed).
fn case_at(n: usize, list: &[Case], groups: &[Vec<Case>], seed: u64) -> Case {
    if let Some(c) = list.get(n) {
        return c.clone();
    }
    let mut r = case_rng(seed ^ 0x5eed, n as u64);
    let g = &groups[r.below(groups.len() as u64) as usize];
    g[r.below(g.len() as u64) as usize].clone()
}

/// Runs case `n` and adds what it found to `t`.
fn run_case(n: usize, case: &Case, seed: u64, stranger: u64, timeout: Duration, t: &mut Tally) {
    let label = format!(
        "case {n} [{} = {}{}]",
        case.target,
        case.value,
        match case.race {
            Race::Once => "",
            Race::Repeat => ", again and again",
            Race::Toggle => ", in turn with the old value",
        }
    );
    let started = Instant::now();
    let path = arena_path(n);
    let mut files = CaseFiles {
        path: path.clone(),
        builder: None,
    };
    let (mine_b, theirs_b) = UnixStream::pair().expect("socketpair");
    let p = path.clone();
    let builder = support::fork_child(move || build::builder(&p, theirs_b));
    files.builder = Some(builder);
    let _ = mine_b.set_read_timeout(Some(Duration::from_secs(30)));
    let built = match build::read_built(&mine_b) {
        Ok(b) => b,
        Err(e) => {
            t.fail(label.clone(), format!("{label}: the builder failed: {e}"));
            return;
        }
    };
    let map = ArenaMap::open(&path).expect("map the case's arena");
    let Some(participant) = ident::identity(builder as u32) else {
        t.fail(
            label.clone(),
            format!("{label}: the builder's identity is unknown"),
        );
        return;
    };
    let held = case.held();
    let (mine_v, theirs_v) = UnixStream::pair().expect("socketpair");
    let (p, b) = (path.clone(), built.clone());
    let victim = support::fork_child(move || victim::victim(&p, &b, held, theirs_v));
    t.victims += 1;
    let lines = reader(mine_v.try_clone().expect("clone the victim's socket"));
    let mut seen = Vec::new();
    let t0 = Instant::now();
    let ready = loop {
        match lines.recv_timeout(Duration::from_secs(10).saturating_sub(t0.elapsed())) {
            Ok(l) if l == "ready" => break true,
            Ok(l) => seen.push(l),
            Err(_) => break false,
        }
    };
    if !ready {
        let status = support::wait_child_deadline(victim, Duration::from_millis(10));
        t.fail(
            format!("{label} not ready"),
            format!(
                "{label}: the victim never got ready ({status:?}): {}",
                seen.join(" | ")
            ),
        );
        return;
    }
    // The victim's sleepers, entries and attachments in place.
    let mut known = Known::discover(&map, &built, victim);
    let t0 = Instant::now();
    while !known.missing().is_empty() && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(1));
        known = Known::discover(&map, &built, victim);
    }
    // The identity formula of ident.rs against the library's own (W1's
    // sleeper wrote it).
    if let Some(w1) = known.off(targets::Obj::W1) {
        let who = map.get(w1 + 16, 8);
        let computed = ident::identity((who & TID_MASK) as u32);
        if computed != Some(who) {
            t.fail(
                "ident".to_string(),
                format!(
                    "{label}: ident.rs computes {computed:x?} for the sleeper the library names {who:#x}: \
                     the lock identity changed, update ident.rs"
                ),
            );
        }
    }
    let ids = Idents {
        stranger,
        participant,
    };
    let mut rng: Rng = case_rng(seed, n as u64);
    let writes = known::apply(case, &known, &map, &ids, &mut rng);
    let _ = (&mine_v).write_all(b"go\n");
    let done = match &writes {
        Ok(w) => {
            t.writes += w.len() as u64;
            w.iter()
                .map(|d| d.what.clone())
                .collect::<Vec<_>>()
                .join("; ")
        }
        Err(why) => {
            t.skipped += 1;
            format!("skipped: {why} (missing: {:?})", known.missing())
        }
    };
    // The stores again and again (or in turn with the old values) while
    // the victim makes its calls, if the case races.
    let stop = AtomicBool::new(false);
    let (status, raced) = std::thread::scope(|sc| {
        let racer = match (&writes, case.race) {
            (Ok(w), race) if race != Race::Once => {
                let (map, stop) = (&map, &stop);
                Some(sc.spawn(move || race_writes(map, w, race, stop)))
            }
            _ => None,
        };
        let status = wait_victim(victim, timeout);
        stop.store(true, Relaxed);
        (status, racer.map_or(0, |r| r.join().unwrap_or(0)))
    });
    t.writes += raced;
    // What is left to read: the victim's end is closed now.
    let t0 = Instant::now();
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(2).saturating_sub(t0.elapsed())) {
        seen.push(l);
    }
    drop(map);
    drop(files);
    if env_u64("IPCNS_TARGETED_VERBOSE", 0) != 0 {
        let _ = writeln!(
            std::io::stderr(),
            "{label}: {done}\n  {}",
            seen.join("\n  ")
        );
    }
    if writes.is_err() {
        return;
    }
    t.cases += 1;
    judge(&label, case, &done, &status, &seen, timeout, t);
    t.durations.push((started.elapsed().as_secs_f64(), label));
}

/// Makes the stores `w` again every 200 µs (`Race::Repeat`), or the new
/// and the old values in turn (`Race::Toggle`), until `stop`; how many.
fn race_writes(map: &ArenaMap, w: &[known::Done], race: Race, stop: &AtomicBool) -> u64 {
    let mut n = 0;
    let pause = || std::thread::sleep(Duration::from_micros(200));
    while !stop.load(Relaxed) {
        for d in w {
            map.set(d.at, d.width, d.new);
            n += 1;
        }
        pause();
        if race == Race::Toggle {
            for d in w {
                map.set(d.at, d.width, d.old);
            }
            pause();
        }
    }
    n
}

/// Waits for the victim at most `timeout`: its exit code (`-signal`), or
/// what it was doing when the time ran out (with its threads' stacks, if
/// gdb is at hand and IPCNS_TARGETED_GDB is not 0), after which it is
/// killed.
fn wait_victim(pid: i32, timeout: Duration) -> Result<i32, String> {
    let t0 = Instant::now();
    loop {
        if let Some(code) = support::try_wait_child(pid) {
            return Ok(code);
        }
        if t0.elapsed() >= timeout {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut doing = support::doing(pid);
    if env_u64("IPCNS_TARGETED_GDB", 1) != 0 {
        doing.push_str(&stacks(pid));
    }
    support::kill(pid);
    support::wait_child(pid);
    Err(doing)
}

/// The library's frames on each thread of `pid`, from gdb (empty without
/// it).
fn stacks(pid: i32) -> String {
    let out = std::process::Command::new("timeout")
        .args([
            "30",
            "gdb",
            "-p",
            &pid.to_string(),
            "-batch",
            "-nx",
            "-ex",
            "thread apply all bt",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Ok(out) = out else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut s = String::new();
    for l in text.lines() {
        if l.starts_with("Thread ") {
            s.push_str("\n      ");
            s.push_str(l.split(" (LWP").next().unwrap_or(l));
            s.push(':');
        } else if l.contains("ipcns::") && !l.contains("targeted::") {
            // "#3  0x... in ipcns::msg::recv::find_msg (...) at crates/...:95",
            // or "#4  ipcns::... (...) at ..." for an inlined frame.
            let f = match l.split_once(" in ") {
                Some((_, f)) => f,
                None => l.split_once("  ").map_or(l, |(_, f)| f),
            };
            let name = f.split(" (").next().unwrap_or(f);
            let at = l
                .rsplit(" at ")
                .next()
                .filter(|_| l.contains(" at "))
                .unwrap_or("");
            s.push_str(&format!("\n        {name} {at}"));
        }
    }
    s
}

/// Reads a victim's lines and status into the tally.
fn judge(
    label: &str,
    case: &Case,
    done: &str,
    status: &Result<i32, String>,
    seen: &[String],
    timeout: Duration,
    t: &mut Tally,
) {
    let mut problems = Vec::new();
    let mut last_call: Option<String> = None;
    let mut other = Vec::new();
    let mut ended = false;
    let mut slow = Vec::new();
    let errnos = t.errnos.entry(case.target.clone()).or_default();
    for l in seen {
        let w: Vec<&str> = l.splitn(6, ' ').collect();
        match w.as_slice() {
            ["call", name] => last_call = Some(name.to_string()),
            ["done", name, r, us, limit, runq] | ["sleeper", name, r, us, limit, runq] => {
                if w[0] == "done" {
                    last_call = None;
                }
                t.calls += 1;
                *errnos.entry(r.to_string()).or_default() += 1;
                let num = |x: &str| x.parse::<u64>().unwrap_or(0);
                let (us, limit, runq) = (num(us), num(limit), num(runq));
                // The time the call had: without its waits for a cpu.
                let had = us.saturating_sub(runq);
                if limit == 0 && had > SLOW {
                    slow.push(format!("{name} took {:.3} s ({r})", us as f64 / 1e6));
                }
                if limit > 0 && had > limit {
                    t.overlong += 1;
                    problems.push(format!(
                        "overlong wait: {name} took {:.3} s ({:.3} s of it waiting for a cpu), \
                         bound {:.3} s ({r})",
                        us as f64 / 1e6,
                        runq as f64 / 1e6,
                        limit as f64 / 1e6
                    ));
                }
            }
            ["stuck", ..] => {
                t.overlong += 1;
                problems.push(format!("overlong wait: sleeper {}", &l[6..]));
            }
            ["unended", ..] => t.unended += 1,
            ["underrun", ..] => {
                t.overruns += 1;
                problems.push(format!("write before a buffer: {}", &l[9..]));
            }
            ["fault", ..] => {
                if l.contains("guard page") {
                    t.overruns += 1;
                }
                problems.push(l.clone());
            }
            ["panic", ..] => {
                t.panics += 1;
                problems.push(l.clone());
            }
            ["end"] => ended = true,
            ["heap-audit", "ok"] => {}
            ["heap-audit", ..] => {
                if case.heap_kept() {
                    t.heap_broken += 1;
                    problems.push(format!("the heap broken by the library: {}", &l[11..]));
                }
            }
            ["rlimit", _] | ["refused", ..] | ["setup-failed", ..] => {}
            _ => other.push(l.clone()),
        }
    }
    let during = last_call.map_or(String::new(), |c| format!(" during {c}"));
    match status {
        Ok(0) if ended => {}
        Ok(0) => problems.push(format!("exited without finishing{during}")),
        Ok(s) if *s < 0 => {
            t.faults += 1;
            problems.push(format!("killed by signal {}{during}", -s));
        }
        Ok(101) => problems.push(format!("panicked{during}")),
        Ok(c) => problems.push(format!("exit {c}{during}")),
        Err(doing) => {
            t.hangs += 1;
            t.overlong += 1;
            problems.push(format!(
                "still running after {timeout:?}{during} ({doing}), killed"
            ));
        }
    }
    let what = format!("[{} = {}]", case.target, case.value);
    for s in slow {
        t.slow
            .entry(format!("{what} {}", shape(&s)))
            .or_insert_with(|| (format!("{label}: {s}"), 0))
            .1 += 1;
    }
    if !problems.is_empty() {
        let mut s = format!(
            "{label}\n    wrote: {done}\n    {}",
            problems.join("\n    ")
        );
        if !other.is_empty() {
            s.push_str(&format!("\n    stderr: {}", other.join(" | ")));
        }
        let key = format!("{what} {}", shape(&problems.join(" ")));
        t.fail(key, s);
    }
}

#[test]
fn hostile_writes_to_live_objects_give_errors_never_crashes() {
    let secs = env_u64("IPCNS_TARGETED_SECS", 50);
    let seed = env_u64("IPCNS_TARGETED_SEED", DEFAULT_SEED);
    let max_failures = env_u64("IPCNS_TARGETED_MAX_FAILURES", 30) as usize;
    let timeout = Duration::from_millis(env_u64("IPCNS_TARGETED_TIMEOUT_MS", 40_000));
    let filter = std::env::var("IPCNS_TARGETED_FILTER").unwrap_or_default();
    let cpus = ipcns_rseq::possible_cpus() as u32;
    let groups: Vec<Vec<Case>> = targets::all(cpus)
        .into_iter()
        .filter(|g| {
            g.first()
                .is_some_and(|c| filter.split('|').any(|f| c.target.contains(f)))
        })
        .collect();
    assert!(
        !groups.is_empty(),
        "no target matches IPCNS_TARGETED_FILTER={filter:?}"
    );
    let targets_n = groups.len();
    let list = targets::interleave(groups.clone());
    let only = std::env::var("IPCNS_TARGETED_CASE")
        .ok()
        .map(|_| env_u64("IPCNS_TARGETED_CASE", 0) as usize);
    let jobs = env_u64("IPCNS_TARGETED_JOBS", 2).max(1);
    let max_cases = env_u64("IPCNS_TARGETED_CASES", u64::MAX) as usize;
    let stranger = Stranger::start();
    let start = Instant::now();
    let budget = Duration::from_secs(secs);
    let next = AtomicUsize::new(only.unwrap_or(0));
    let total = Mutex::new(Tally::default());
    std::thread::scope(|sc| {
        for _ in 0..jobs {
            sc.spawn(|| {
                loop {
                    let n = next.fetch_add(1, Relaxed);
                    if only.is_some_and(|k| n > k)
                        || (only.is_none() && n >= max_cases)
                        || (only.is_none() && start.elapsed() >= budget)
                        || total.lock().unwrap().failures.len() >= max_failures
                    {
                        break;
                    }
                    let case = case_at(n, &list, &groups, seed);
                    let mut t = Tally::default();
                    run_case(n, &case, seed, stranger.who, timeout, &mut t);
                    total.lock().unwrap().merge(t);
                }
            });
        }
    });
    let mut t = total.into_inner().unwrap();
    let mut out = std::io::stderr().lock();
    let _ = writeln!(
        out,
        "targeted: {} cases run ({} listed over {targets_n} targets; {} skipped, an object missing), \
         {} hostile writes, {} victims, {} calls; faults {} ({} fatal signals, {} panics), \
         overruns {}, overlong waits {} ({} hangs), heaps broken {}; {} sleepers left waiting \
         where allowed; \
         {jobs} jobs, seed {seed:#x}, {:.1} s",
        t.cases,
        list.len(),
        t.skipped,
        t.writes,
        t.victims,
        t.calls,
        t.faults + t.panics,
        t.faults,
        t.panics,
        t.overruns,
        t.overlong,
        t.hangs,
        t.heap_broken,
        t.unended,
        start.elapsed().as_secs_f64()
    );
    let _ = writeln!(out, "errnos per target:");
    for (target, e) in &t.errnos {
        let v: Vec<String> = e.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(out, "  {target}: {}", v.join(", "));
    }
    if !t.slow.is_empty() {
        let _ = writeln!(
            out,
            "untimed calls over {} s (noted, not failures):",
            SLOW / 1_000_000
        );
        for (s, n) in t.slow.values() {
            let _ = writeln!(
                out,
                "  {s}{}",
                if *n > 1 {
                    format!(" (x{n})")
                } else {
                    String::new()
                }
            );
        }
    }
    t.durations.sort_by(|a, b| b.0.total_cmp(&a.0));
    let slowest: Vec<String> = t
        .durations
        .iter()
        .take(6)
        .map(|(d, l)| format!("{l} {d:.1} s"))
        .collect();
    let _ = writeln!(out, "slowest cases: {}", slowest.join("; "));
    drop(out);
    let failures: Vec<String> = t
        .failures
        .iter()
        .map(|(_, s, n)| {
            if *n > 1 {
                format!("{s}\n    (and {} more cases alike)", n - 1)
            } else {
                s.clone()
            }
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} distinct failures{}:\n{}",
        failures.len(),
        if failures.len() >= max_failures {
            " (stopped there)"
        } else {
            ""
        },
        failures.join("\n")
    );
}
