//! `ipcns bench stress`: stress-ng's System V stressors, unmodified, on the
//! kernel and under `ipcns run` in the same run.
//!
//! - `--sem-sysv N`: processes taking and giving one semaphore set's
//!   semaphores (SEM_UNDO, timeouts);
//! - `--switch N --switch-method sem-sysv`: context switches, a sender and
//!   a receiver woken through a System V semaphore (said as unavailable
//!   when the installed stress-ng has no such method);
//! - `--msg N`: a sender and a receiver on one queue;
//! - `--shm-sysv N`: shmget, shmat, a write of every page, shmdt, IPC_RMID.
//!
//! N is 1 and 2 workers; each run is `stress-ng STRESSOR N --timeout Ss
//! --metrics-brief` (S: `$IPCNS_BENCH_STRESS_SECS`, default 5) and the
//! figure is its metrics line's bogo ops/s (real time), which stress-ng
//! logs on its standard error (both streams are read). The kernel runs in a
//! fresh IPC namespace (`unshare --ipc`: root), else on the host's (the
//! header says so and why); ipcns as `ipcns run --private -- stress-ng ...`,
//! with the `ipcns` beside this program. [`RUNS`] runs of each, ipcns and
//! the kernel in turn, alternating which goes first; per side the median
//! and the spread (min-max), and the median of the runs' ratios (each
//! ipcns run over the kernel run beside it).
//!
//! The goals: one worker at least 3x the kernel's bogo ops/s, two at least
//! the kernel's. Without stress-ng on PATH the benchmark says it is skipped
//! and how to install it, and exits 0 (so that scripts running every
//! benchmark go on). A run that fails (stress-ng's exit status, no metrics
//! line, or no end within three times its length plus 30 s) is shown with
//! its output; the table and goals are printed, then the benchmark fails.

use super::progress::{self, Progress};
use crate::stats::{Goal, cpu_line, cpu_model, goal, json_num, json_str, median, ratio};
use anyhow::{Context, bail, ensure};
use std::fs::File;
use std::io::{Read, Seek};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What the benchmark says without stress-ng (after `ipcns bench stress: `).
pub const SKIPPED: &str = "skipped: stress-ng not installed (apt-get install stress-ng)";
/// Runs of each stressor and worker count, per side.
const RUNS: usize = 3;
/// Workers (stress-ng instances) per row.
const WORKERS: [usize; 2] = [1, 2];
/// The length of one run unless `$IPCNS_BENCH_STRESS_SECS` says otherwise.
const DEFAULT_SECS: u64 = 5;
/// The variable that sets it.
const SECS_VAR: &str = "IPCNS_BENCH_STRESS_SECS";
/// At most this many lines of a failed run's output are shown.
const SHOWN_LINES: usize = 12;

/// One stress-ng stressor.
#[derive(Clone, Copy)]
struct Stressor {
    /// The row's name.
    label: &'static str,
    /// The name on its metrics line.
    metric: &'static str,
    /// Its option (the worker count follows) and the options after it.
    option: &'static str,
    extra: &'static [&'static str],
}

const STRESSORS: [Stressor; 4] = [
    Stressor {
        label: "sem-sysv",
        metric: "sem-sysv",
        option: "--sem-sysv",
        extra: &[],
    },
    Stressor {
        label: "switch sem-sysv",
        metric: "switch",
        option: "--switch",
        extra: &["--switch-method", "sem-sysv"],
    },
    Stressor {
        label: "msg",
        metric: "msg",
        option: "--msg",
        extra: &[],
    },
    Stressor {
        label: "shm-sysv",
        metric: "shm-sysv",
        option: "--shm-sysv",
        extra: &[],
    },
];

impl Stressor {
    /// Its stress-ng options for `workers` workers (without the timeout
    /// and metrics options).
    fn args(&self, workers: usize) -> Vec<String> {
        let mut v = vec![self.option.to_string(), workers.to_string()];
        v.extend(self.extra.iter().map(|s| s.to_string()));
        v
    }
}

/// The bogo ops/s (real time) of `stressor`'s line in stress-ng's
/// `--metrics-brief` table (`stress-ng: metrc: [PID] sem-sysv 1596997 2.00
/// 0.13 1.65 797790.36 899064.73`: bogo ops, real, user and system
/// seconds, bogo ops/s in real time, then in user+system time; later
/// versions add columns after these). The table's two head lines and the
/// "miscellaneous metrics" lines (a name and one figure, then words) are
/// not rows. None if `text` has no row for `stressor`.
pub fn bogo_ops_per_s(text: &str, stressor: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (_, rest) = line.split_once("metrc:")?;
        // `[PID]`, then the row.
        let rest = rest.trim_start().strip_prefix('[')?;
        let (pid, row) = rest.split_once(']')?;
        pid.parse::<u32>().ok()?;
        let mut words = row.split_whitespace();
        if words.next()? != stressor {
            return None;
        }
        let figures: Vec<f64> = words
            .take(6)
            .map(|w| w.parse::<f64>().ok().filter(|x| x.is_finite()))
            .collect::<Option<_>>()?;
        (figures.len() == 6 && figures[0].fract() == 0.0).then(|| figures[4])
    })
}

/// The lines of a run's output that say something (what a failed run
/// shows): not the metrics table, not stress-ng's routine start and end.
pub fn notable_lines(text: &str) -> Vec<&str> {
    const ROUTINE: [&str; 4] = [
        "setting to a",
        "dispatching hogs:",
        "successful run completed",
        "defaulting to a",
    ];
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.contains("metrc:"))
        .filter(|l| !ROUTINE.iter().any(|r| l.contains(r)))
        .collect()
}

/// The version in `stress-ng --version`'s text (`stress-ng, version
/// 0.15.06 (gcc ...)`).
pub fn version(text: &str) -> Option<&str> {
    let mut w = text.split_whitespace();
    w.find(|&x| x == "version")?;
    w.next()
}

/// Whether `stress-ng --switch-method which`'s text (`switch-method must
/// be one of: mq pipe sem-sysv`) lists sem-sysv.
pub fn has_switch_sem_sysv(text: &str) -> bool {
    text.lines().any(|l| {
        l.split_once("one of:")
            .is_some_and(|(_, methods)| methods.split_whitespace().any(|m| m == "sem-sysv"))
    })
}

/// `stress-ng` on PATH.
fn find_stress_ng() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("stress-ng"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The `ipcns` beside this program, which `ipcns run` is.
fn ipcns_path() -> anyhow::Result<PathBuf> {
    crate::preload::beside_exe(
        "ipcns",
        "build it: cargo build --release -p ipcns-cli -p ipcns-preload",
    )
}

/// The length of one run.
fn secs() -> anyhow::Result<u64> {
    match std::env::var(SECS_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_SECS),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if (1..=3600).contains(&n) => Ok(n),
            _ => bail!("{SECS_VAR} must be a whole number of seconds from 1 to 3600 (it is {v:?})"),
        },
        Err(e) => bail!("{SECS_VAR}: {e}"),
    }
}

/// Everything a program said on both streams, with its status: `cmd` run
/// in a process group of its own; after `limit` the group is sent SIGTERM,
/// 5 s later SIGKILL (the bool says so).
fn run_captured(mut cmd: Command, limit: Duration) -> anyhow::Result<(ExitStatus, bool, String)> {
    // An unlinked file for both streams: no pipe to drain while waiting.
    let path = std::env::temp_dir().join(format!(
        "ipcns-bench-stress-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    ));
    let mut file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("create {}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file.try_clone()?)
        .process_group(0)
        .spawn()
        .with_context(|| format!("run {:?}", cmd.get_program()))?;
    let group = -(child.id() as i32);
    let start = Instant::now();
    let mut killed = false;
    let mut signalled = None;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        let now = start.elapsed();
        match signalled {
            None if now >= limit => {
                let _ = ipcns_sys::process::kill(group, libc::SIGTERM);
                signalled = Some(now);
                killed = true;
            }
            Some(t) if now >= t + Duration::from_secs(5) => {
                let _ = ipcns_sys::process::kill(group, libc::SIGKILL);
                break child.wait()?;
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    file.rewind()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok((status, killed, String::from_utf8_lossy(&bytes).into_owned()))
}

/// Where the kernel runs: `unshare --ipc` if it works here, else the
/// host's namespace and why.
enum Place {
    Fresh,
    Host(String),
}

fn kernel_place() -> Place {
    match Command::new("unshare")
        .args(["--ipc", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
    {
        Ok(o) if o.status.success() => Place::Fresh,
        Ok(o) => Place::Host(format!(
            "unshare --ipc failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Place::Host(format!("cannot run unshare: {e}")),
    }
}

/// The two sides.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Ipcns,
    Kernel,
}

impl Side {
    fn word(self) -> &'static str {
        match self {
            Side::Ipcns => "ipcns",
            Side::Kernel => "kernel",
        }
    }
}

/// How the runs are made.
struct Setup {
    stress_ng: PathBuf,
    ipcns: PathBuf,
    place: Place,
    secs: u64,
}

impl Setup {
    /// One run of `s` with `workers` workers on `side`: its bogo ops/s,
    /// or what went wrong.
    fn run(&self, side: Side, s: &Stressor, workers: usize) -> Result<f64, Failure> {
        let mut cmd = match (side, &self.place) {
            (Side::Ipcns, _) => {
                let mut c = Command::new(&self.ipcns);
                c.args(["run", "--private", "--"]);
                c.arg(&self.stress_ng);
                c
            }
            (Side::Kernel, Place::Fresh) => {
                let mut c = Command::new("unshare");
                c.args(["--ipc", "--"]).arg(&self.stress_ng);
                c
            }
            (Side::Kernel, Place::Host(_)) => Command::new(&self.stress_ng),
        };
        cmd.args(s.args(workers)).args([
            "--timeout",
            &format!("{}s", self.secs),
            "--metrics-brief",
        ]);
        let limit = Duration::from_secs(3 * self.secs + 30);
        let (status, killed, text) = run_captured(cmd, limit).map_err(|e| Failure {
            what: format!("cannot run: {e:#}"),
            said: Vec::new(),
        })?;
        let got = bogo_ops_per_s(&text, s.metric);
        let what = if killed {
            format!(
                "did not end within {} s: sent SIGTERM, then SIGKILL",
                limit.as_secs()
            )
        } else {
            match (status.code(), got) {
                (Some(0), Some(x)) => return Ok(x),
                (Some(0), None) => format!("exited 0 without a metrics line for {}", s.metric),
                (Some(c), _) => format!("exited with status {c}"),
                (None, _) => format!("killed by signal {}", status.signal().unwrap_or(0)),
            }
        };
        Err(Failure {
            what,
            said: notable_lines(&text)
                .into_iter()
                .map(str::to_string)
                .collect(),
        })
    }
}

/// A failed run: what went wrong, and what it said (its notable lines).
struct Failure {
    what: String,
    said: Vec<String>,
}

impl Failure {
    /// Its lines under the table: what went wrong, then at most
    /// [`SHOWN_LINES`] of what it said, indented.
    fn text(&self) -> String {
        let mut s = self.what.clone();
        if self.said.is_empty() {
            s.push_str(" (it said nothing else)");
            return s;
        }
        s.push_str("; it said:");
        for l in self.said.iter().take(SHOWN_LINES) {
            s.push_str("\n      ");
            s.push_str(l);
        }
        if self.said.len() > SHOWN_LINES {
            s.push_str(&format!(
                "\n      ({} more lines)",
                self.said.len() - SHOWN_LINES
            ));
        }
        s
    }
}

/// One row: a stressor with a worker count, and every run of each side
/// (None: that run failed).
struct Row {
    stressor: Stressor,
    workers: usize,
    /// Why the row was not run (the stressor is not available).
    unavailable: Option<String>,
    ipcns: Vec<Option<f64>>,
    kernel: Vec<Option<f64>>,
    /// The failed runs: side, run (from 1), what went wrong.
    failures: Vec<(Side, usize, Failure)>,
}

/// Median, min and max of a side's successful runs.
fn spread(v: &[Option<f64>]) -> Option<(f64, f64, f64)> {
    let mut ok: Vec<f64> = v.iter().flatten().copied().collect();
    if ok.is_empty() {
        return None;
    }
    let m = median(&mut ok);
    Some((m, ok[0], ok[ok.len() - 1]))
}

impl Row {
    /// The median of the runs' ratios, ipcns over the kernel run beside it.
    fn ratio(&self) -> Option<f64> {
        let mut r: Vec<f64> = self
            .ipcns
            .iter()
            .zip(&self.kernel)
            .filter_map(|(i, k)| Some(ratio((*i)?, (*k)?)))
            .filter(|x| x.is_finite())
            .collect();
        (!r.is_empty()).then(|| median(&mut r))
    }

    fn name(&self) -> String {
        format!("{} {}", self.stressor.label, self.workers)
    }
}

/// The goals: one worker at least 3x the kernel, two at least 1x.
struct Check {
    text: String,
    /// The ratio that meets it.
    at_least: f64,
    value: Option<f64>,
    why_not: String,
}

impl Check {
    fn line(&self) -> String {
        match self.value {
            Some(x) => self.goal(x).line(),
            None => format!("goal: {}: NOT MEASURED ({})", self.text, self.why_not),
        }
    }

    fn json(&self) -> String {
        match self.value {
            Some(x) => self.goal(x).json(),
            None => format!(
                "{{\"goal\":{},\"value\":null,\"met\":null}}",
                json_str(&self.text)
            ),
        }
    }

    fn goal(&self, x: f64) -> Goal {
        goal(&self.text, x, x >= self.at_least)
    }
}

fn checks(rows: &[Row]) -> Vec<Check> {
    rows.iter()
        .map(|r| {
            let (text, at_least) = match r.workers {
                1 => (
                    format!(
                        "{}, 1 worker: at least 3x the kernel's bogo ops/s",
                        r.stressor.label
                    ),
                    3.0,
                ),
                n => (
                    format!(
                        "{}, {n} workers: at least the kernel's bogo ops/s",
                        r.stressor.label
                    ),
                    1.0,
                ),
            };
            let why_not = match &r.unavailable {
                Some(why) => why.clone(),
                None => "no run of both sides succeeded".to_string(),
            };
            Check {
                text,
                at_least,
                value: r.ratio(),
                why_not,
            }
        })
        .collect()
}

/// What the header says of the installed stress-ng.
struct Installed {
    path: PathBuf,
    version: String,
    /// Why `--switch-method sem-sysv` cannot be run, if it cannot.
    no_switch: Option<String>,
}

fn installed(path: &Path) -> Installed {
    let said = |args: &[&str]| {
        Command::new(path)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    };
    let version = version(&said(&["--version"]))
        .unwrap_or("(unknown version)")
        .to_string();
    let which = said(&["--switch-method", "which"]);
    let no_switch = (!has_switch_sem_sysv(&which)).then(|| {
        format!(
            "stress-ng {version} has no --switch-method sem-sysv (`stress-ng --switch-method which` said: {})",
            which.trim()
        )
    });
    Installed {
        path: path.to_path_buf(),
        version,
        no_switch,
    }
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let json = opts.json;
    let Some(stress_ng) = find_stress_ng() else {
        if json {
            println!(
                "{{\"bench\":\"stress\",\"skipped\":{}}}",
                json_str("stress-ng not installed (apt-get install stress-ng)")
            );
        } else {
            println!("ipcns bench stress: {SKIPPED}");
        }
        return Ok(());
    };
    crate::stats::warn_if_busy();
    let secs = secs()?;
    let setup = Setup {
        stress_ng,
        ipcns: ipcns_path()?,
        place: kernel_place(),
        secs,
    };
    let inst = installed(&setup.stress_ng);
    let mut rows: Vec<Row> = STRESSORS
        .iter()
        .flat_map(|s| WORKERS.map(|n| (*s, n)))
        .map(|(stressor, workers)| Row {
            stressor,
            workers,
            unavailable: (stressor.metric == "switch")
                .then(|| inst.no_switch.clone())
                .flatten(),
            ipcns: Vec::new(),
            kernel: Vec::new(),
            failures: Vec::new(),
        })
        .collect();
    let runs = rows.iter().filter(|r| r.unavailable.is_none()).count() * RUNS * 2;
    eprintln!(
        "ipcns bench stress: {runs} runs of {secs} s (about {} min)",
        (runs as u64 * secs).div_ceil(60)
    );
    let mut progress = Progress::new("stress", runs);
    let mut done = 0;
    for round in 0..RUNS {
        for (i, row) in rows.iter_mut().enumerate() {
            if row.unavailable.is_some() {
                continue;
            }
            let sides = if (round + i) % 2 == 0 {
                [Side::Kernel, Side::Ipcns]
            } else {
                [Side::Ipcns, Side::Kernel]
            };
            for side in sides {
                progress.step(
                    done,
                    &format!(
                        "{}, {} {}, {}",
                        progress::round(round, RUNS),
                        row.name(),
                        if row.workers == 1 {
                            "worker"
                        } else {
                            "workers"
                        },
                        side.word()
                    ),
                );
                done += 1;
                let r = setup.run(side, &row.stressor, row.workers);
                let got = match r {
                    Ok(x) => Some(x),
                    Err(e) => {
                        row.failures.push((side, round + 1, e));
                        None
                    }
                };
                match side {
                    Side::Ipcns => row.ipcns.push(got),
                    Side::Kernel => row.kernel.push(got),
                }
            }
        }
    }
    progress.clear();
    let checks = checks(&rows);
    let cpu = cpu_model();
    let usable = crate::sys::allowed_cpus()?.len();
    if json {
        println!("{}", to_json(&rows, &checks, &cpu, usable, &inst, &setup));
    } else {
        let checks = if opts.goals { &checks[..] } else { &[] };
        print!("{}", table(&rows, checks, &cpu, usable, &inst, &setup));
    }
    let failed: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            r.failures
                .iter()
                .map(move |(side, run, _)| format!("{} {} run {run}", r.name(), side.word()))
        })
        .collect();
    ensure!(
        failed.is_empty(),
        "{} of {runs} runs failed (their output above): {}",
        failed.len(),
        failed.join(", ")
    );
    Ok(())
}

fn place_text(place: &Place) -> String {
    match place {
        Place::Fresh => "a fresh IPC namespace per run (unshare --ipc)".to_string(),
        Place::Host(why) => format!("the host's IPC namespace ({why})"),
    }
}

/// `median (min-max)`, or `-`.
fn cell(v: &[Option<f64>]) -> (String, String) {
    match spread(v) {
        Some((m, lo, hi)) => (format!("{m:.0}"), format!("({lo:.0}-{hi:.0})")),
        None => ("-".to_string(), String::new()),
    }
}

fn table(
    rows: &[Row],
    checks: &[Check],
    cpu: &str,
    usable: usize,
    inst: &Installed,
    setup: &Setup,
) -> String {
    let mut s = format!(
        "ipcns bench stress: stress-ng {}'s System V stressors on the kernel and under ipcns run; bogo ops/s (real time), medians of {RUNS} runs of {} s\n{}\nstress-ng: {}\nkernel: {}\nipcns: {} run --private (a fresh namespace per run)\n",
        inst.version,
        setup.secs,
        cpu_line(cpu, usable),
        inst.path.display(),
        place_text(&setup.place),
        setup.ipcns.display(),
    );
    s.push_str(&format!(
        "\n{:<16} {:>7} {:>12} {:<19} {:>12} {:<19} {:>7}\n",
        "stressor", "workers", "ipcns", "(min-max)", "kernel", "(min-max)", "i/k"
    ));
    for r in rows {
        if let Some(why) = &r.unavailable {
            s.push_str(&format!(
                "{:<16} {:>7} not available: {why}\n",
                r.stressor.label, r.workers
            ));
            continue;
        }
        let (i, ispread) = cell(&r.ipcns);
        let (k, kspread) = cell(&r.kernel);
        let ik = r.ratio().map_or("-".to_string(), |x| format!("{x:.2}x"));
        s.push_str(&format!(
            "{:<16} {:>7} {:>12} {:<19} {:>12} {:<19} {:>7}\n",
            r.stressor.label, r.workers, i, ispread, k, kspread, ik
        ));
    }
    s.push_str(&format!(
        "  (each run: stress-ng STRESSOR N --timeout {}s --metrics-brief, the switch row with --switch-method sem-sysv;\n   ipcns and the kernel in turn, alternating which goes first; i/k: the median of the runs' ratios,\n   each ipcns run over the kernel run beside it)\n",
        setup.secs
    ));
    for r in rows {
        for (side, run, f) in &r.failures {
            s.push_str(&format!(
                "  {} {}, run {run}: {}\n",
                r.name(),
                side.word(),
                f.text()
            ));
        }
    }
    if !checks.is_empty() {
        s.push('\n');
    }
    for c in checks {
        s.push_str(&c.line());
        s.push('\n');
    }
    s
}

fn to_json(
    rows: &[Row],
    checks: &[Check],
    cpu: &str,
    usable: usize,
    inst: &Installed,
    setup: &Setup,
) -> String {
    let runs = |v: &[Option<f64>]| {
        v.iter()
            .map(|x| x.map_or("null".to_string(), json_num))
            .collect::<Vec<_>>()
            .join(",")
    };
    let side = |v: &[Option<f64>]| match spread(v) {
        Some((m, lo, hi)) => format!(
            "{{\"median\":{},\"min\":{},\"max\":{},\"runs\":[{}]}}",
            json_num(m),
            json_num(lo),
            json_num(hi),
            runs(v)
        ),
        None => format!(
            "{{\"median\":null,\"min\":null,\"max\":null,\"runs\":[{}]}}",
            runs(v)
        ),
    };
    let row = |r: &Row| {
        let failures = r
            .failures
            .iter()
            .map(|(sd, run, f)| {
                format!(
                    "{{\"side\":\"{}\",\"run\":{run},\"error\":{},\"output\":[{}]}}",
                    sd.word(),
                    json_str(&f.what),
                    f.said
                        .iter()
                        .map(|l| json_str(l))
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "{{\"stressor\":{},\"args\":{},\"workers\":{},\"unavailable\":{},\"ipcns_ops_per_s\":{},\"kernel_ops_per_s\":{},\"ipcns_over_kernel\":{},\"failures\":[{failures}]}}",
            json_str(r.stressor.label),
            json_str(&r.stressor.args(r.workers).join(" ")),
            r.workers,
            r.unavailable
                .as_deref()
                .map_or("null".to_string(), json_str),
            side(&r.ipcns),
            side(&r.kernel),
            r.ratio().map_or("null".to_string(), json_num),
        )
    };
    let (place, why) = match &setup.place {
        Place::Fresh => ("fresh", None),
        Place::Host(why) => ("host", Some(why.as_str())),
    };
    format!(
        "{{\"bench\":\"stress\",\"cpu\":{},\"cpus_usable\":{usable},\"stress_ng\":{},\"stress_ng_version\":{},\"kernel_namespace\":\"{place}\",\"kernel_namespace_why\":{},\"ipcns\":{},\"runs\":{RUNS},\"secs\":{},\"rows\":[{}],\"goals\":[{}]}}",
        json_str(cpu),
        json_str(&inst.path.display().to_string()),
        json_str(&inst.version),
        why.map_or("null".to_string(), json_str),
        json_str(&setup.ipcns.display().to_string()),
        setup.secs,
        rows.iter().map(row).collect::<Vec<_>>().join(","),
        checks.iter().map(Check::json).collect::<Vec<_>>().join(",")
    )
}

/// The parsers on stress-ng 0.15.06's own output (Debian bookworm's),
/// captured on the kernel and under `ipcns run`: crates/bench/tests/stress-ng.
#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL_SEM_2: &str = include_str!("../tests/stress-ng/kernel-sem-sysv-2.txt");
    const IPCNS_SWITCH_2: &str = include_str!("../tests/stress-ng/ipcns-switch-2.txt");
    const IPCNS_SHM_2: &str = include_str!("../tests/stress-ng/ipcns-shm-sysv-2.txt");
    const MSGMNI_0: &str = include_str!("../tests/stress-ng/kernel-msg-1-msgmni-0.txt");
    const WHICH: &str = include_str!("../tests/stress-ng/switch-method-which.txt");
    const VERSION: &str = include_str!("../tests/stress-ng/version.txt");

    #[test]
    fn the_real_time_column_of_the_stressors_row() {
        assert_eq!(bogo_ops_per_s(KERNEL_SEM_2, "sem-sysv"), Some(269058.63));
        assert_eq!(bogo_ops_per_s(IPCNS_SWITCH_2, "switch"), Some(71374.20));
        assert_eq!(bogo_ops_per_s(IPCNS_SHM_2, "shm-sysv"), Some(138.43));
    }

    #[test]
    fn head_lines_miscellaneous_metrics_and_other_stressors_are_not_rows() {
        // The switch and shm-sysv outputs end with "miscellaneous metrics"
        // lines under the same names (`switch 14014.64 nanosecs per ...`).
        for text in [IPCNS_SWITCH_2, IPCNS_SHM_2] {
            let misc: Vec<&str> = text
                .lines()
                .filter(|l| l.contains("nanosecs per"))
                .collect();
            assert!(!misc.is_empty());
            for l in misc {
                assert_eq!(bogo_ops_per_s(l, "switch"), None, "{l}");
                assert_eq!(bogo_ops_per_s(l, "shm-sysv"), None, "{l}");
            }
        }
        assert_eq!(bogo_ops_per_s(KERNEL_SEM_2, "stressor"), None);
        assert_eq!(bogo_ops_per_s(KERNEL_SEM_2, "msg"), None);
        assert_eq!(bogo_ops_per_s(KERNEL_SEM_2, "sem"), None);
        // A stressor that skipped itself: the head lines, no row.
        assert_eq!(bogo_ops_per_s(MSGMNI_0, "msg"), None);
        assert_eq!(bogo_ops_per_s("", "msg"), None);
        // A row cut short is not a row.
        assert_eq!(
            bogo_ops_per_s("stress-ng: metrc: [1] msg 1111318 2.01 0.18 2.07", "msg"),
            None
        );
    }

    #[test]
    fn later_versions_extra_columns_are_ignored() {
        let row = "stress-ng: metrc: [42] sem-sysv  1596997  2.00  0.13  1.65  797790.36  899064.73  91.25  2048";
        assert_eq!(bogo_ops_per_s(row, "sem-sysv"), Some(797790.36));
    }

    #[test]
    fn a_failed_run_shows_what_it_said() {
        assert_eq!(
            notable_lines(MSGMNI_0),
            [
                "stress-ng: info:  [12360] msg: msgget out of resources or not implemented, skipping stessor",
                "stress-ng: warn:  [12359] process [12360] (msg) aborted early, out of system resources",
            ]
        );
        assert!(notable_lines(KERNEL_SEM_2).is_empty());
        assert!(notable_lines(IPCNS_SHM_2).is_empty());
    }

    #[test]
    fn version_and_switch_methods() {
        assert_eq!(version(VERSION), Some("0.15.06"));
        assert_eq!(version("stress-ng: unrecognized option"), None);
        assert!(has_switch_sem_sysv(WHICH));
        assert!(!has_switch_sem_sysv(
            "switch-method must be one of: mq pipe"
        ));
        assert!(!has_switch_sem_sysv(
            "stress-ng: unrecognized option '--switch-method'"
        ));
    }
}
