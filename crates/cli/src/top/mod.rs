//! `ipcns top [NAME]`: a live view of a namespace's objects, refreshed
//! every interval: each object's operations per second and in all (the
//! counters the operations keep in the objects' slots, which the kernel
//! does not have: `ipcns::ObjectActivity`), the calls blocked on it, a
//! queue's messages and bytes, a segment's attachments, the last pid.
//!
//! A rate is the difference of two readings of the same object (same id
//! and generation) over the time between them; an object made between
//! them shows its count since it was made. On a terminal the screen is
//! redrawn and keys sort it (`term.rs`); otherwise each reading is
//! printed after the previous one, as `top -b` does.

mod term;

use anyhow::{Context, bail};
use ipcns::{Mech, Namespace, ObjectActivity};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

pub const USAGE: &str = "\
usage: ipcns top [--ns NAME | NAME] [--once | -n COUNT] [-d SECONDS] [--sort KEY] [-s|-q|-m] [--json]
A live view of the namespace's objects, refreshed every second: each object's
operations per second and in all (semop calls completed; msgsnd and msgrcv
calls; shmat and shmdt calls), the calls blocked on it now, a set's semaphores,
a queue's messages and bytes, a segment's size and attachments, the last pid.
The kernel keeps no such counts: the operations keep them in the objects.
  --once         one reading over one interval, printed once (for scripts)
  -n COUNT       COUNT readings, then exit
  -d SECONDS     the interval (default 1; at least 0.1)
  --sort KEY     ops (the default: busiest first), id, waiting, bytes or pid
  -s, -q, -m     semaphore sets, message queues or segments only
  --json         each reading as one line of JSON
On a terminal the screen is redrawn at each reading; keys: o, i, w, b, p sort
by ops, id, waiting, bytes, pid; q quits.";

/// How the rows are ordered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sort {
    Ops,
    Id,
    Waiting,
    Bytes,
    Pid,
}

impl Sort {
    fn parse(s: &str) -> Option<Sort> {
        Some(match s {
            "ops" => Sort::Ops,
            "id" => Sort::Id,
            "waiting" => Sort::Waiting,
            "bytes" => Sort::Bytes,
            "pid" => Sort::Pid,
            _ => return None,
        })
    }

    fn key(c: u8) -> Option<Sort> {
        Some(match c {
            b'o' => Sort::Ops,
            b'i' => Sort::Id,
            b'w' => Sort::Waiting,
            b'b' => Sort::Bytes,
            b'p' => Sort::Pid,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Sort::Ops => "ops",
            Sort::Id => "id",
            Sort::Waiting => "waiting",
            Sort::Bytes => "bytes",
            Sort::Pid => "pid",
        }
    }
}

struct Options {
    name: Option<String>,
    count: Option<u64>,
    interval: Duration,
    sort: Sort,
    mechs: Vec<Mech>,
    json: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut o = Options {
        name: None,
        count: None,
        interval: Duration::from_secs(1),
        sort: Sort::Ops,
        mechs: Vec::new(),
        json: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next().cloned().with_context(|| {
                format!("top: {a} needs {what}\nTry 'ipcns top --help' for more information.")
            })
        };
        match a.as_str() {
            "--once" => o.count = Some(1),
            "-n" => {
                let v = value("a count")?;
                o.count = Some(v.parse().ok().filter(|&n| n > 0).with_context(|| {
                    format!("top: -n {v:?}: not a count of readings (1 or more)")
                })?);
            }
            "-d" => {
                let v = value("a number of seconds")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && (0.1..=86400.0).contains(s))
                    .with_context(|| {
                        format!("top: -d {v:?}: not an interval from 0.1 to 86400 seconds")
                    })?;
                o.interval = Duration::from_secs_f64(secs);
            }
            "--sort" => {
                let v = value("a key")?;
                o.sort = Sort::parse(&v).with_context(|| {
                    format!("top: --sort {v:?}: not ops, id, waiting, bytes or pid")
                })?;
            }
            "-s" => o.mechs.push(Mech::Sem),
            "-q" => o.mechs.push(Mech::Msg),
            "-m" => o.mechs.push(Mech::Shm),
            "--json" => o.json = true,
            s if s.starts_with('-') => {
                bail!("top: unknown option {s:?}\nTry 'ipcns top --help' for more information.")
            }
            s => {
                if o.name.is_some() {
                    bail!(
                        "top: unexpected argument {s:?}\nTry 'ipcns top --help' for more information."
                    );
                }
                o.name = Some(s.to_string());
            }
        }
    }
    if o.mechs.is_empty() {
        o.mechs = Mech::ALL.to_vec();
    }
    Ok(o)
}

/// `ipcns top ARGS` on namespace `ns_name` (a NAME argument wins).
pub fn run(ns_name: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return crate::print_out(&format!("{USAGE}\n"));
    }
    let mut o = parse(args)?;
    let name = o.name.clone().unwrap_or_else(|| ns_name.to_string());
    let ns = crate::ns::existing(&name)?;
    let cred = ns.cred()?;
    let live = o.count.is_none() && !o.json && term::stdout_is_terminal();
    let mut keys = if live { term::Keys::open() } else { None };
    let mut before = read(&ns, &cred, &o.mechs)?;
    let mut n = 0u64;
    loop {
        let start = Instant::now();
        // The interval, or a key: a sort key redraws at once (rates over
        // the time so far), q ends.
        let mut quit = false;
        match keys.as_mut() {
            Some(k) => {
                while let Some(left) = o.interval.checked_sub(start.elapsed()) {
                    match k.next(left) {
                        Some(b'q') => {
                            quit = true;
                            break;
                        }
                        Some(c) => {
                            if let Some(s) = Sort::key(c) {
                                o.sort = s;
                                break;
                            }
                        }
                        None => {}
                    }
                }
            }
            None => std::thread::sleep(o.interval),
        }
        if quit || term::interrupted() {
            break;
        }
        let after = read(&ns, &cred, &o.mechs)?;
        let rows = rates(&before, &after);
        let text = if o.json {
            json(&ns, &after, &rows)
        } else {
            table(&ns, &after, rows, o.sort, live)
        };
        crate::print_out(&text)?;
        before = after;
        n += 1;
        if o.count.is_some_and(|c| n >= c) || term::interrupted() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One reading: every object's activity, and when.
struct Reading {
    at: Instant,
    wall: SystemTime,
    rows: Vec<ObjectActivity>,
}

fn read(ns: &Namespace, cred: &ipcns::Cred, mechs: &[Mech]) -> anyhow::Result<Reading> {
    let mut rows = Vec::new();
    for &m in mechs {
        rows.extend(
            ns.activity(cred, m)
                .map_err(|e| anyhow::anyhow!("top: reading the {} objects: {e}", mech_name(m)))?,
        );
    }
    Ok(Reading {
        at: Instant::now(),
        wall: SystemTime::now(),
        rows,
    })
}

/// A row with its rate: operations per second since the previous reading.
struct Row<'a> {
    o: &'a ObjectActivity,
    total: u64,
    per_s: f64,
}

/// The operations a row counts in all (a queue: sent and received).
fn total(o: &ObjectActivity) -> u64 {
    match o.mech {
        Mech::Msg => o.ops.wrapping_add(o.ops2),
        _ => o.ops,
    }
}

fn rates<'a>(before: &Reading, after: &'a Reading) -> Vec<Row<'a>> {
    let prev: HashMap<(Mech, i32, u64), u64> = before
        .rows
        .iter()
        .map(|o| ((o.mech, o.id, o.generation), total(o)))
        .collect();
    let secs = after.at.duration_since(before.at).as_secs_f64().max(1e-3);
    after
        .rows
        .iter()
        .map(|o| {
            let t = total(o);
            let d = t.wrapping_sub(
                prev.get(&(o.mech, o.id, o.generation))
                    .copied()
                    .unwrap_or(0),
            );
            Row {
                o,
                total: t,
                per_s: d as f64 / secs,
            }
        })
        .collect()
}

fn mech_name(m: Mech) -> &'static str {
    match m {
        Mech::Sem => "sem",
        Mech::Msg => "msg",
        Mech::Shm => "shm",
    }
}

fn sort(rows: &mut [Row<'_>], by: Sort) {
    let id = |r: &Row<'_>| (r.o.mech as u8, r.o.id);
    match by {
        Sort::Ops => rows.sort_by(|a, b| b.per_s.total_cmp(&a.per_s).then(id(a).cmp(&id(b)))),
        Sort::Id => rows.sort_by_key(id),
        Sort::Waiting => rows.sort_by(|a, b| b.o.waiting.cmp(&a.o.waiting).then(id(a).cmp(&id(b)))),
        Sort::Bytes => rows.sort_by(|a, b| b.o.bytes.cmp(&a.o.bytes).then(id(a).cmp(&id(b)))),
        Sort::Pid => rows.sort_by(|a, b| b.o.last_pid.cmp(&a.o.last_pid).then(id(a).cmp(&id(b)))),
    }
}

fn dash_or(v: u64, shown: bool) -> String {
    if shown {
        v.to_string()
    } else {
        "-".to_string()
    }
}

fn table(ns: &Namespace, r: &Reading, mut rows: Vec<Row<'_>>, by: Sort, live: bool) -> String {
    sort(&mut rows, by);
    let mut t = String::new();
    if live {
        t.push_str("\x1b[H\x1b[2J");
    }
    let secs = r
        .wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let _ = writeln!(
        t,
        "ipcns top: namespace {} ({}), {} object{}, sorted by {}, at {:02}:{:02}:{:02} UTC",
        ns.name(),
        ns.path().display(),
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        by.name(),
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    );
    let _ = writeln!(
        t,
        "{:<4} {:>10} {:>10} {:>6} {:>5} {:>10} {:>12} {:>7} {:>5} {:>7} {:>10} {:>6} {:>8}",
        "TYPE",
        "ID",
        "KEY",
        "OWNER",
        "PERMS",
        "OPS/S",
        "OPS",
        "WAITING",
        "SEMS",
        "MSGS",
        "BYTES",
        "NATTCH",
        "LAST-PID"
    );
    for row in &rows {
        let o = row.o;
        let (sem, msg, shm) = (
            o.mech == Mech::Sem,
            o.mech == Mech::Msg,
            o.mech == Mech::Shm,
        );
        let _ = writeln!(
            t,
            "{:<4} {:>10} {:>#10x} {:>6} {:>5o} {:>10.0} {:>12} {:>7} {:>5} {:>7} {:>10} {:>6} {:>8}",
            mech_name(o.mech),
            o.id,
            o.key,
            o.uid,
            o.mode,
            row.per_s,
            row.total,
            dash_or(o.waiting, !shm),
            dash_or(o.count, sem),
            dash_or(o.count, msg),
            dash_or(o.bytes, !sem),
            dash_or(o.nattch, shm),
            o.last_pid,
        );
    }
    if !live {
        t.push('\n');
    }
    t
}

fn json(ns: &Namespace, r: &Reading, rows: &[Row<'_>]) -> String {
    let secs = r
        .wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut t = format!(
        "{{\"namespace\":{},\"time\":{secs:.3},\"objects\":[",
        json_str(ns.name())
    );
    for (i, row) in rows.iter().enumerate() {
        let o = row.o;
        if i > 0 {
            t.push(',');
        }
        let _ = write!(
            t,
            "{{\"type\":\"{}\",\"id\":{},\"key\":{},\"owner\":{},\"perms\":\"{:o}\",\"ops_per_s\":{:.1},\"ops\":{},",
            mech_name(o.mech),
            o.id,
            o.key,
            o.uid,
            o.mode,
            row.per_s,
            row.total
        );
        let _ = match o.mech {
            Mech::Sem => write!(
                t,
                "\"slept\":{},\"waiting\":{},\"nsems\":{}",
                o.ops2, o.waiting, o.count
            ),
            Mech::Msg => write!(
                t,
                "\"sent\":{},\"received\":{},\"waiting\":{},\"messages\":{},\"bytes\":{}",
                o.ops, o.ops2, o.waiting, o.count, o.bytes
            ),
            Mech::Shm => write!(t, "\"size\":{},\"nattch\":{}", o.bytes, o.nattch),
        };
        let _ = write!(t, ",\"last_pid\":{}}}", o.last_pid);
    }
    t.push_str("]}\n");
    t
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
