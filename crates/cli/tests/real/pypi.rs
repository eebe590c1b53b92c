//! A public SysV IPC test suite that nobody here wrote: the unittest suite
//! in the source distribution of PyPI's `sysv_ipc` 1.2.0 (semaphores,
//! message queues, shared memory, through its C extension).
//!
//! The test run downloads the sdist with pip (hash pinned; cached in
//! `target/real-cache`), builds it into a venv in a temporary directory,
//! and runs its suite on the kernel and under `ipcns run --strict`, one
//! case at a time reported by `unittest_lines.py`. Passed, failed and
//! skipped are printed side by side with every case whose outcome
//! differs; a case that passes on the kernel and not under ipcns fails
//! the test. Nothing of the package is in this repository.

use crate::harness::{self, Mode, TempDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const PACKAGE: &str = "sysv_ipc";
const VERSION: &str = "1.2.0";
/// sha256 of sysv_ipc-1.2.0.tar.gz as PyPI serves it.
const SHA256: &str = "ef96ab33bb62e4d14142f0be0524dcc0c3c70c96442df2fc773c67b7c7514199";
const RUNNER: &str = include_str!("unittest_lines.py");
const PYTHON: &str = "/usr/bin/python3";

pub fn test() {
    let results: Mutex<Vec<(&'static str, Cases)>> = Mutex::new(Vec::new());
    harness::both("pypi_sysv_ipc", false, setup, |m, suite| {
        let cases = run_suite(m, suite);
        let figures = format!("{PACKAGE} {VERSION}: {}", cases.counts());
        results.lock().unwrap().push((m.name(), cases));
        figures
    });
    let runs = results.into_inner().unwrap();
    if let [(_, kernel), (_, ipcns)] = runs.as_slice() {
        compare(kernel, ipcns);
    }
}

/// The built package: its venv's python and the unpacked sdist.
pub struct Suite {
    python: PathBuf,
    src: PathBuf,
    _tmp: TempDir,
}

fn tool(c: &mut Command, limit: u64, what: &str) -> Result<harness::Out, String> {
    let out = harness::run(c, Duration::from_secs(limit), what);
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            out.status,
            out.stderr
                .trim()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" / ")
        ))
    }
}

fn sha256(p: &Path) -> Option<String> {
    let o = Command::new("sha256sum").arg(p).output().ok()?;
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
}

/// The sdist, from the cache or downloaded into it.
fn sdist() -> Result<PathBuf, String> {
    let exe = Path::new(harness::ipcns_exe());
    let cache = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("no target directory")?
        .join("real-cache");
    let file = cache.join(format!("{PACKAGE}-{VERSION}.tar.gz"));
    if sha256(&file).as_deref() == Some(SHA256) {
        return Ok(file);
    }
    let dl = TempDir::new("pip-download");
    let req = dl.join("requirements.txt");
    std::fs::write(
        &req,
        format!("{PACKAGE}=={VERSION} --hash=sha256:{SHA256}\n"),
    )
    .map_err(|e| e.to_string())?;
    tool(
        Command::new(PYTHON)
            .args(["-m", "pip", "download", "--no-binary", ":all:", "--no-deps"])
            .args(["--no-build-isolation", "--require-hashes", "-q", "-r"])
            .arg(&req)
            .arg("-d")
            .arg(dl.path()),
        600,
        "pip download sysv_ipc==1.2.0",
    )?;
    let got = dl.join(format!("{PACKAGE}-{VERSION}.tar.gz"));
    if sha256(&got).as_deref() != Some(SHA256) {
        return Err(format!("{} does not have the pinned sha256", got.display()));
    }
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    std::fs::copy(&got, &file).map_err(|e| e.to_string())?;
    Ok(file)
}

fn setup() -> Result<Suite, String> {
    harness::need_programs(&["gcc", "tar", "sha256sum"])?;
    if !Path::new(PYTHON).is_file() {
        return Err(format!(
            "{PYTHON} is not installed (python3-dev, python3-venv)"
        ));
    }
    let headers = Command::new(PYTHON)
        .args(["-c", "import sysconfig, os, venv, ensurepip, setuptools, pip; \
                      print(os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"])
        .output()
        .map_err(|e| e.to_string())?;
    if String::from_utf8_lossy(&headers.stdout).trim() != "True" {
        return Err(
            "python3-dev, python3-venv, python3-pip and python3-setuptools are needed to build sysv_ipc"
                .to_string(),
        );
    }
    let sdist = sdist()?;
    let tmp = TempDir::new("sysv-ipc");
    tool(
        Command::new("tar")
            .arg("xzf")
            .arg(&sdist)
            .arg("-C")
            .arg(tmp.path()),
        60,
        "tar xzf",
    )?;
    let venv = tmp.join("venv");
    tool(
        Command::new(PYTHON)
            .args(["-m", "venv", "--system-site-packages"])
            .arg(&venv),
        300,
        "python3 -m venv",
    )?;
    let python = venv.join("bin/python");
    tool(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-build-isolation",
                "--no-index",
                "--no-deps",
            ])
            .arg(&sdist),
        600,
        "pip install sysv_ipc",
    )?;
    let v = tool(
        Command::new(&python).args(["-c", "import sysv_ipc; print(sysv_ipc.VERSION)"]),
        60,
        "import sysv_ipc",
    )?;
    if v.stdout.trim() != VERSION {
        return Err(format!("built sysv_ipc says version {:?}", v.stdout.trim()));
    }
    Ok(Suite {
        python,
        src: tmp.join(format!("{PACKAGE}-{VERSION}")),
        _tmp: tmp,
    })
}

/// How one case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
}

/// Every case's outcome and detail (a traceback, a skip reason).
struct Cases(BTreeMap<String, (Outcome, String)>);

impl Cases {
    fn count(&self, o: Outcome) -> usize {
        self.0.values().filter(|(x, _)| *x == o).count()
    }

    fn counts(&self) -> String {
        format!(
            "{} cases: {} passed, {} failed, {} skipped",
            self.0.len(),
            self.count(Outcome::Passed),
            self.count(Outcome::Failed),
            self.count(Outcome::Skipped)
        )
    }
}

fn run_suite(m: &Mode, s: &Suite) -> Cases {
    let mut c = m.command(&s.python);
    c.args(["-c", RUNNER])
        .arg(&s.src)
        .current_dir(&s.src)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = harness::run(&mut c, Duration::from_secs(600), "the sysv_ipc suite");
    let mut cases = BTreeMap::new();
    let mut done = false;
    for line in out.stdout.lines() {
        let f: Vec<&str> = line.splitn(3, '\t').collect();
        let outcome = match f[0] {
            "passed" | "xfail" => Outcome::Passed,
            "failed" | "error" | "xpass" => Outcome::Failed,
            "skipped" => Outcome::Skipped,
            "done" => {
                done = true;
                continue;
            }
            _ => continue,
        };
        let id = f.get(1).copied().unwrap_or_default().to_string();
        let detail = f.get(2).copied().unwrap_or_default().replace("\\n", "\n");
        // A failed subtest and its case: the worst outcome stands.
        let e = cases.entry(id).or_insert((outcome, detail.clone()));
        if outcome == Outcome::Failed {
            *e = (outcome, detail);
        }
    }
    assert!(
        done && !cases.is_empty(),
        "{}: the sysv_ipc suite did not run to its end ({}):\n{}\n{}",
        m.name(),
        out.status,
        out.stdout
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .join("\n"),
        out.stderr
    );
    Cases(cases)
}

/// Prints both runs side by side and fails on every case that passed on
/// the kernel and not under ipcns.
fn compare(kernel: &Cases, ipcns: &Cases) {
    let mut text = format!(
        "real: pypi_sysv_ipc: {PACKAGE} {VERSION}'s own suite\n  {:<10} {:>8} {:>8}\n",
        "", "kernel", "ipcns"
    );
    for (name, o) in [
        ("cases", None),
        ("passed", Some(Outcome::Passed)),
        ("failed", Some(Outcome::Failed)),
        ("skipped", Some(Outcome::Skipped)),
    ] {
        let n = |c: &Cases| o.map_or(c.0.len(), |o| c.count(o));
        text += &format!("  {name:<10} {:>8} {:>8}\n", n(kernel), n(ipcns));
    }
    let mut regressions = Vec::new();
    let ids: std::collections::BTreeSet<&String> = kernel.0.keys().chain(ipcns.0.keys()).collect();
    for id in ids {
        let k = kernel.0.get(id).map(|x| x.0);
        let i = ipcns.0.get(id);
        if k == i.map(|x| x.0) {
            continue;
        }
        let show = |o: Option<Outcome>| {
            o.map_or("not run".to_string(), |o| format!("{o:?}").to_lowercase())
        };
        text += &format!(
            "  differs: {id}: kernel {}, ipcns {}\n",
            show(k),
            show(i.map(|x| x.0))
        );
        if k == Some(Outcome::Passed) {
            let detail = i.map_or("", |x| x.1.as_str());
            regressions.push(format!("{id}:\n{detail}"));
        }
    }
    harness::say(text.trim_end());
    assert!(
        regressions.is_empty(),
        "{} case(s) pass on the kernel and not under ipcns:\n{}",
        regressions.len(),
        regressions.join("\n")
    );
}
