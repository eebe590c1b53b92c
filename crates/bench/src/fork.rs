//! `ipcns bench fork`: what `libipcns.so` adds to a process's life cycle.
//! A small C program (compiled here with `$CC`, else `cc`, into a
//! temporary directory) makes K cycles of one case and prints ns per
//! cycle:
//!
//! - fork + `_exit(0)` in the child + `waitpid` in the parent;
//! - fork + `execve` of a compiled `int main(void) { return 0; }` (with the
//!   parent's environment, so under the library the new image loads it
//!   too, as a program under `ipcns run` starts its children) + `waitpid`;
//! - the first, after the parent made one `semop` with SEM_UNDO on a
//!   private set (a process with undo state; the child inherits none, as
//!   on Linux);
//! - the first, with a 64 KiB segment (`shmget` + `shmat`, every page
//!   written) attached in the parent (the child's attachment is counted in
//!   `shm_nattch` from the fork on and dropped when it is reaped).
//!
//! Each case runs plain (no library: the kernel's System V IPC, in this
//! program's IPC namespace, on private objects removed at the end), under
//! an empty preloaded object (`LD_PRELOAD` of a shared object compiled
//! from one `int` and nothing else: what preloading any library costs, the
//! floor under the library's figure) and under the library
//! (`LD_PRELOAD=libipcns.so` with `IPCNS_DIR`/`IPCNS` naming a throwaway
//! namespace, as `bench preload` opens its library), the three taking
//! turns round after round (which goes first rotating), each round a new
//! process of the program: a few untimed cycles, then the
//! timed ones in chunks of CHUNK, the round's figure its median chunk's µs
//! per cycle (as the other benchmarks take medians of chunks: a chunk
//! during which another process had the cpu is an outlier). Figures: each
//! side's median over the rounds and its spread (the fastest and the
//! slowest round; in the JSON also (max - min) / median),
//! library / plain, library / plain of the rounds' means (every cycle
//! counted, outliers included; in the JSON with every round's figures),
//! and the empty object's share: empty / plain, and library / empty
//! (what the library adds above the floor).
//! After the cycles the program reads the semaphore's value (1: the
//! children's exits undid nothing of the parent's) and `shm_nattch` (1:
//! every child's attachment dropped when it was reaped); the table says
//! whether both sides saw that.
//!
//! Goals (the issue's): a fork+exit+waitpid cycle and a fork+exec+exit
//! cycle cost at most 10% more under the library than without it. The
//! other two rows are reported without a goal. `IPCNS_BENCH_QUICK=1` runs
//! a thousandth of the cycles (the numbers then mean nothing).

use super::preload::{Named, lib_path};
use super::progress::{self, Progress};
use super::stats::{Goal, cpu_line, cpu_model, goal, json_num, json_str, median, quick, ratio};
use super::sys::allowed_cpus;
use anyhow::{Context, bail, ensure};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ROUNDS: usize = 7;
/// Timed cycles per round (exec cases: EXEC_CYCLES), after WARM untimed.
const CYCLES: u64 = 2000;
const EXEC_CYCLES: u64 = 500;
const WARM: u64 = 100;
const EXEC_WARM: u64 = 20;
/// The issue's bound on library / plain.
const GOAL: f64 = 1.10;

/// Timed cycles per chunk: the program times its cycles CHUNK at a time.
const CHUNK: u64 = 10;

/// The program: `fork-bench CASE CYCLES WARM CHUNK TINY` prints `MEDIAN
/// MEAN CHECK`: ns per cycle of its median chunk (a chunk during which
/// another process had the cpu, the machine being shared, is an outlier,
/// not a share of the figure, as in the other benchmarks), ns per cycle
/// over all the timed cycles, and after them the semaphore's value
/// (semundo), the segment's `shm_nattch` (shm), or -1. Exit 2 with a
/// message on a failure (a child that did not exit 0 included).
const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
static int do_exec;
static const char *tiny;

static void die(const char *what) { perror(what); exit(2); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void cycle(void) {
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        if (do_exec) {
            char *argv[] = {(char *)tiny, NULL};
            execve(tiny, argv, environ);
            _exit(127);
        }
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) die("waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "a child ended with status %#x\n", st);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: fork-bench exit|exec|semundo|shm CYCLES WARM CHUNK TINY\n");
        return 2;
    }
    const char *c = argv[1];
    long cycles = atol(argv[2]), warm = atol(argv[3]), chunk = atol(argv[4]);
    tiny = argv[5];
    if (cycles < 1 || warm < 0 || chunk < 1) {
        fprintf(stderr, "bad counts\n");
        return 2;
    }
    if (chunk > cycles) chunk = cycles;
    long chunks = cycles / chunk;
    double *per = malloc(sizeof(double) * (size_t)chunks);
    if (!per) die("malloc");
    do_exec = !strcmp(c, "exec");
    int sem = -1, shm = -1;
    char *p = NULL;
    if (!strcmp(c, "semundo")) {
        struct sembuf op = {0, 1, SEM_UNDO};
        sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
        if (sem < 0) die("semget");
        if (semop(sem, &op, 1)) die("semop");
    } else if (!strcmp(c, "shm")) {
        shm = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600);
        if (shm < 0) die("shmget");
        p = shmat(shm, NULL, 0);
        if (p == (void *)-1) die("shmat");
        memset(p, 1, 65536);
    } else if (strcmp(c, "exit") && strcmp(c, "exec")) {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    for (long i = 0; i < warm; i++) cycle();
    double start = now();
    for (long k = 0; k < chunks; k++) {
        double t = now();
        for (long i = 0; i < chunk; i++) cycle();
        per[k] = (now() - t) / (double)chunk;
    }
    double mean = (now() - start) / (double)(chunks * chunk);
    qsort(per, (size_t)chunks, sizeof(double), by_value);
    double median = chunks % 2 ? per[chunks / 2] : (per[chunks / 2 - 1] + per[chunks / 2]) / 2;
    long check = -1;
    if (sem >= 0) {
        check = semctl(sem, 0, GETVAL);
        semctl(sem, 0, IPC_RMID);
    }
    if (shm >= 0) {
        struct shmid_ds ds;
        if (shmctl(shm, IPC_STAT, &ds) == 0) check = (long)ds.shm_nattch;
        shmdt(p);
        shmctl(shm, IPC_RMID, NULL);
    }
    printf("%.1f %.1f %ld\n", median, mean, check);
    return 0;
}
"#;

/// The program the exec case runs.
const TINY: &str = "int main(void) { return 0; }\n";

/// The empty preloaded object: one variable, no code of its own.
const EMPTY: &str = "int ipcns_bench_empty_object;\n";

/// One case: its argument to the program, its row's name, its goal.
struct Case {
    arg: &'static str,
    name: &'static str,
    exec: bool,
    /// The value CHECK must have, if any.
    check: Option<i64>,
    goal: Option<&'static str>,
}

const CASES: [Case; 4] = [
    Case {
        arg: "exit",
        name: "fork+_exit+waitpid",
        exec: false,
        check: None,
        goal: Some("fork+exit+waitpid under libipcns.so <= 1.10x the plain program"),
    },
    Case {
        arg: "exec",
        name: "fork+execve+exit+waitpid",
        exec: true,
        check: None,
        goal: Some("fork+exec+exit+waitpid under libipcns.so <= 1.10x the plain program"),
    },
    Case {
        arg: "semundo",
        name: "same as 1, SEM_UNDO held",
        exec: false,
        check: Some(1),
        goal: None,
    },
    Case {
        arg: "shm",
        name: "same as 1, 64 KiB shm attached",
        exec: false,
        check: Some(1),
        goal: None,
    },
];

/// Cycles per round.
#[derive(Clone, Copy)]
struct Sizes {
    cycles: u64,
    exec_cycles: u64,
    warm: u64,
    exec_warm: u64,
}

impl Sizes {
    fn from_env() -> Sizes {
        let div = if quick() { 1000 } else { 1 };
        Sizes {
            cycles: (CYCLES / div).max(2),
            exec_cycles: (EXEC_CYCLES / div).max(1),
            warm: (WARM / div).max(1),
            exec_warm: (EXEC_WARM / div).max(1),
        }
    }

    fn of(&self, c: &Case) -> (u64, u64) {
        if c.exec {
            (self.exec_cycles, self.exec_warm)
        } else {
            (self.cycles, self.warm)
        }
    }
}

/// The compiled programs, in a directory of their own removed on drop.
struct Programs {
    dir: PathBuf,
    bench: PathBuf,
    tiny: PathBuf,
    /// The empty shared object.
    empty: PathBuf,
}

impl Programs {
    fn build() -> anyhow::Result<Programs> {
        let dir = std::env::temp_dir().join(format!(
            "ipcns-bench-fork-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        let p = Programs {
            bench: dir.join("fork-bench"),
            tiny: dir.join("tiny"),
            empty: dir.join("empty.so"),
            dir,
        };
        compile(PROGRAM, &p.bench, &[])?;
        compile(TINY, &p.tiny, &[])?;
        compile(EMPTY, &p.empty, &["-shared", "-fPIC"])?;
        Ok(p)
    }
}

impl Drop for Programs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Compiles the C text `src` into the program (or, with `-shared`, the
/// object) `out` (`$CC`, else `cc`, `-O2` and `flags`), as the library's
/// own C is compiled.
fn compile(src: &str, out: &Path, flags: &[&str]) -> anyhow::Result<()> {
    let c = out.with_extension("c");
    std::fs::write(&c, src).with_context(|| format!("write {}", c.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let r = Command::new(&cc)
        .arg("-O2")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(&c)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{cc} (a C compiler is needed: apt-get install gcc)"))?;
    ensure!(
        r.status.success(),
        "{cc} {}: {}",
        c.display(),
        String::from_utf8_lossy(&r.stderr).trim()
    );
    Ok(())
}

/// Where the library side runs: the library and its namespace.
struct Library<'a> {
    path: &'a Path,
    named: &'a Named,
}

/// What one run of the program said.
struct Said {
    /// ns per cycle: its median chunk's, and over all its timed cycles.
    median: f64,
    mean: f64,
    check: i64,
}

/// The three ways the program runs.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Plain,
    Empty,
    Library,
}

impl Way {
    const ALL: [Way; 3] = [Way::Plain, Way::Empty, Way::Library];

    fn name(self) -> &'static str {
        match self {
            Way::Plain => "plain",
            Way::Empty => "empty object",
            Way::Library => "library",
        }
    }
}

/// One run of the program.
fn run_once(
    p: &Programs,
    c: &Case,
    sizes: Sizes,
    way: Way,
    lib: &Library<'_>,
) -> anyhow::Result<Said> {
    let (cycles, warm) = sizes.of(c);
    let mut cmd = Command::new(&p.bench);
    cmd.arg(c.arg)
        .arg(cycles.to_string())
        .arg(warm.to_string())
        .arg(CHUNK.to_string())
        .arg(&p.tiny)
        .env_remove("LD_PRELOAD")
        .env_remove("IPCNS_FD")
        .env_remove("IPCNS_SHARED")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match way {
        Way::Plain => {}
        Way::Empty => {
            cmd.env("LD_PRELOAD", &p.empty);
        }
        Way::Library => {
            cmd.env("LD_PRELOAD", lib.path)
                .env("IPCNS_DIR", &lib.named.dir)
                .env("IPCNS", &lib.named.name);
        }
    }
    let side = way.name();
    let out = cmd
        .output()
        .with_context(|| format!("run {}", p.bench.display()))?;
    if !out.status.success() {
        bail!(
            "{} ({side}) failed ({}): {}",
            c.name,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = text.split_whitespace().collect();
    match (
        w.first().and_then(|x| x.parse::<f64>().ok()),
        w.get(1).and_then(|x| x.parse::<f64>().ok()),
        w.get(2).and_then(|x| x.parse::<i64>().ok()),
    ) {
        (Some(median), Some(mean), Some(check))
            if w.len() == 3 && median.is_finite() && mean.is_finite() =>
        {
            Ok(Said {
                median,
                mean,
                check,
            })
        }
        _ => bail!("{} ({side}) said {text:?}", c.name),
    }
}

/// One side's rounds, µs per cycle: each round's median chunk, and each
/// round's mean.
#[derive(Clone, Default)]
struct Side {
    us: Vec<f64>,
    mean_us: Vec<f64>,
    /// The check values seen that were not the expected one.
    wrong: Vec<i64>,
}

impl Side {
    fn median(&self) -> f64 {
        median(&mut self.us.clone())
    }
    /// The median of the rounds' means.
    fn mean_median(&self) -> f64 {
        median(&mut self.mean_us.clone())
    }
    fn min(&self) -> f64 {
        self.us.iter().copied().fold(f64::INFINITY, f64::min)
    }
    fn max(&self) -> f64 {
        self.us.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    }
    /// (max - min) / median, in percent.
    fn spread(&self) -> f64 {
        100.0 * ratio(self.max() - self.min(), self.median())
    }
    /// `median (min-max)`, one decimal.
    fn cell(&self) -> String {
        format!("{:.1} ({:.1}-{:.1})", self.median(), self.min(), self.max())
    }
}

/// A case's measurements.
struct Row {
    case: &'static Case,
    plain: Side,
    empty: Side,
    library: Side,
}

impl Row {
    fn ratio(&self) -> f64 {
        ratio(self.library.median(), self.plain.median())
    }

    fn side(&mut self, way: Way) -> &mut Side {
        match way {
            Way::Plain => &mut self.plain,
            Way::Empty => &mut self.empty,
            Way::Library => &mut self.library,
        }
    }
}

fn measure(p: &Programs, lib: &Library<'_>, sizes: Sizes) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::with_capacity(CASES.len());
    let steps = Way::ALL.len() * ROUNDS;
    let mut progress = Progress::new("fork", CASES.len() * steps);
    for (n, c) in CASES.iter().enumerate() {
        let mut row = Row {
            case: c,
            plain: Side::default(),
            empty: Side::default(),
            library: Side::default(),
        };
        for r in 0..ROUNDS {
            for turn in 0..Way::ALL.len() {
                let way = Way::ALL[(r + turn) % Way::ALL.len()];
                progress.step(
                    n * steps + r * Way::ALL.len() + turn,
                    &format!("{}, {}, {}", c.name, progress::round(r, ROUNDS), way.name()),
                );
                let said = run_once(p, c, sizes, way, lib)?;
                let side = row.side(way);
                side.us.push(said.median / 1000.0);
                side.mean_us.push(said.mean / 1000.0);
                if c.check.is_some_and(|want| want != said.check) {
                    side.wrong.push(said.check);
                }
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

pub fn run(opts: &crate::Options) -> anyhow::Result<()> {
    let sizes = Sizes::from_env();
    let cpu = cpu_model();
    let ncpus = allowed_cpus().map_or(0, |c| c.len());
    let path = lib_path()?;
    let programs = Programs::build()?;
    let named = Named::new()?;
    let lib = Library {
        path: &path,
        named: &named,
    };
    let rows = measure(&programs, &lib, sizes)?;
    let goals: Vec<Goal> = rows
        .iter()
        .filter_map(|r| {
            r.case
                .goal
                .map(|text| goal(text, r.ratio(), r.ratio() <= GOAL))
        })
        .collect();
    let text = if opts.json {
        to_json(&cpu, &path, sizes, &rows, &goals)
    } else {
        let goals = if opts.goals { &goals[..] } else { &[] };
        table(&cpu, ncpus, &path, sizes, &rows, goals)
    };
    crate::print_out(&text)?;
    Ok(())
}

/// What the checks found: `ok`, or each wrong value.
fn checks(rows: &[Row]) -> Result<(), Vec<String>> {
    let mut bad = Vec::new();
    for r in rows {
        let Some(want) = r.case.check else { continue };
        for (side, s) in [
            ("plain", &r.plain),
            ("empty object", &r.empty),
            ("library", &r.library),
        ] {
            if !s.wrong.is_empty() {
                bad.push(format!(
                    "{} ({side}): {} where {want} was expected",
                    r.case.name,
                    s.wrong
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    if bad.is_empty() { Ok(()) } else { Err(bad) }
}

fn table(
    cpu: &str,
    ncpus: usize,
    path: &Path,
    sizes: Sizes,
    rows: &[Row],
    goals: &[Goal],
) -> String {
    let mut s = String::new();
    let mut line = |l: String| {
        s.push_str(&l);
        s.push('\n');
    };
    line(format!(
        "ipcns bench fork: process life cycles of a C program, plain (the kernel's System V IPC), \
         under LD_PRELOAD of an empty object and under LD_PRELOAD={}; µs per cycle, medians of \
         {ROUNDS} rounds (fastest-slowest), each round its median chunk of {CHUNK} cycles, the three in turns",
        path.display()
    ));
    line(cpu_line(cpu, ncpus));
    line(String::new());
    line(format!(
        "{:<32} {:>22} {:>22} {:>22} {:>7} {:>9} {:>7} {:>8} {:>7}",
        "µs per cycle",
        "plain",
        "empty",
        "library",
        "lib/pl",
        "means l/p",
        "emp/pl",
        "lib/emp",
        "cycles"
    ));
    for (i, r) in rows.iter().enumerate() {
        let (cycles, _) = sizes.of(r.case);
        line(format!(
            "{:<32} {:>22} {:>22} {:>22} {:>6.2}x {:>8.2}x {:>6.2}x {:>7.2}x {:>7}",
            format!("{}. {}", i + 1, r.case.name),
            r.plain.cell(),
            r.empty.cell(),
            r.library.cell(),
            r.ratio(),
            ratio(r.library.mean_median(), r.plain.mean_median()),
            ratio(r.empty.median(), r.plain.median()),
            ratio(r.library.median(), r.empty.median()),
            cycles
        ));
    }
    line(format!(
        "  (cycles: timed per round, after {} untimed ({} for exec); means l/p: lib/pl of the rounds'",
        sizes.warm, sizes.exec_warm
    ));
    for l in [
        "   means, every cycle counted; exec runs a compiled `int main(void) { return 0; }` with the",
        "   parent's environment; empty: an object of one int preloaded instead of the library, what",
        "   preloading costs any library: emp/pl is that floor, lib/emp the library's own)",
    ] {
        line(l.to_string());
    }
    line(match checks(rows) {
        Ok(()) => "checks: after the cycles semval 1 (SEM_UNDO) and shm_nattch 1 on every side: ok"
            .to_string(),
        Err(bad) => format!("checks FAILED: {}", bad.join("; ")),
    });
    if !goals.is_empty() {
        line(String::new());
    }
    for g in goals {
        line(g.line());
    }
    s
}

fn to_json(cpu: &str, path: &Path, sizes: Sizes, rows: &[Row], goals: &[Goal]) -> String {
    let list = |v: &[f64]| v.iter().map(|&x| json_num(x)).collect::<Vec<_>>().join(",");
    let side = |s: &Side| {
        format!(
            "{{\"median\":{},\"min\":{},\"max\":{},\"spread_pct\":{},\"rounds\":[{}],\
             \"mean_median\":{},\"round_means\":[{}]}}",
            json_num(s.median()),
            json_num(s.min()),
            json_num(s.max()),
            json_num(s.spread()),
            list(&s.us),
            json_num(s.mean_median()),
            list(&s.mean_us)
        )
    };
    let cases = rows
        .iter()
        .map(|r| {
            let (cycles, warm) = sizes.of(r.case);
            format!(
                "{{\"case\":{},\"name\":{},\"cycles\":{cycles},\"warm\":{warm},\
                 \"plain_us\":{},\"empty_object_us\":{},\"library_us\":{},\
                 \"library_over_plain\":{},\"empty_over_plain\":{},\"library_over_empty\":{}}}",
                json_str(r.case.arg),
                json_str(r.case.name),
                side(&r.plain),
                side(&r.empty),
                side(&r.library),
                json_num(r.ratio()),
                json_num(ratio(r.empty.median(), r.plain.median())),
                json_num(ratio(r.library.median(), r.empty.median()))
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let checks = match checks(rows) {
        Ok(()) => "{\"ok\":true,\"failures\":[]}".to_string(),
        Err(bad) => format!(
            "{{\"ok\":false,\"failures\":[{}]}}",
            bad.iter()
                .map(|b| json_str(b))
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    format!(
        "{{\"bench\":\"fork\",\"cpu\":{},\"library\":{},\"rounds\":{ROUNDS},\"cycles\":{},\
         \"exec_cycles\":{},\"chunk\":{CHUNK},\"cases\":[{cases}],\"checks\":{checks},\"goals\":[{}]}}\n",
        json_str(cpu),
        json_str(&path.display().to_string()),
        sizes.cycles,
        sizes.exec_cycles,
        goals.iter().map(Goal::json).collect::<Vec<_>>().join(",")
    )
}
