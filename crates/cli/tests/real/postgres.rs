//! PostgreSQL as the `postgres` user, every shared structure in System V
//! segments: `shared_memory_type = sysv` puts the main area (buffers,
//! locks, and the POSIX semaphores PostgreSQL makes inside it, so the
//! mapping must be truly shared between processes) in one segment keyed
//! on the data directory, `dynamic_shared_memory_type = sysv` the dynamic
//! segments of parallel queries in others.
//!
//! initdb; start with pg_ctl; the main segment's nattch is the postmaster
//! and each of its children (attachments counted through fork); `pgbench
//! -i` and 4 clients x 250 transactions, all counted, the balances of
//! accounts, tellers, branches and history equal; a parallel query with 2
//! workers launched; a backend killed with SIGKILL: the postmaster
//! restarts everything (the log says so), the old segment removed while
//! still attached and its key reused at once by the new one, new queries
//! answered, nattch right again; `pg_ctl stop -m fast`: no segment left.

use crate::harness::{self, Mode, TempDir, User};
use crate::ipcs::{Row, Tables};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn test() {
    harness::both("postgresql", true, setup, scenario);
}

pub struct Pg {
    bin: PathBuf,
    user: User,
}

/// The newest `/usr/lib/postgresql/N/bin` with every program needed.
fn setup() -> Result<Pg, String> {
    harness::need_programs(&["setpriv"])?;
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| "PostgreSQL is not installed (no /usr/lib/postgresql)".to_string())?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            ["initdb", "pg_ctl", "postgres", "psql", "pgbench"]
                .iter()
                .all(|p| bin.join(p).is_file())
                .then_some((v, bin))
        })
        .collect();
    versions.sort();
    let (_, bin) = versions
        .pop()
        .ok_or("no /usr/lib/postgresql/N/bin with initdb, pg_ctl, postgres, psql and pgbench")?;
    Ok(Pg {
        bin,
        user: User::lookup("postgres")?,
    })
}

/// One server's files and how to run its programs in a mode.
struct Server<'a> {
    m: &'a Mode,
    pg: &'a Pg,
    /// postgres's home: the socket directory and the log.
    home: PathBuf,
    data: PathBuf,
    log: PathBuf,
}

impl Server<'_> {
    fn cmd(&self, program: &str) -> Command {
        let mut c = self
            .m
            .as_user(&self.pg.user, &self.home, self.pg.bin.join(program));
        c.env("LC_ALL", "C").env("PGHOST", &self.home);
        c
    }

    fn run(&self, program: &str, args: &[&str], limit: u64) -> String {
        let mut c = self.cmd(program);
        c.args(args);
        harness::run(&mut c, Duration::from_secs(limit), program)
            .ok(&format!("{} {program} {args:?}", self.m.name()))
            .stdout
    }

    fn psql_args(sql: &str) -> Vec<&str> {
        vec![
            "-X",
            "-A",
            "-t",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            "postgres",
            "-c",
            sql,
        ]
    }

    /// The result of `sql`, unaligned, without headers.
    fn psql(&self, sql: &str) -> String {
        self.run("psql", &Self::psql_args(sql), 60)
            .trim()
            .to_string()
    }

    fn postmaster(&self) -> u32 {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next()?.trim().parse().ok())
            .expect("postmaster.pid")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The segments, all PostgreSQL's (owner postgres, mode 600), and the
    /// main one: the largest.
    fn segments(&self) -> (Vec<Row>, Row) {
        let t = Tables::parse(&self.m.ipcs(&["-m"]));
        for r in &t.segments {
            assert_eq!(
                (r.owner.as_str(), r.perms.as_str()),
                ("postgres", "600"),
                "{r:?}"
            );
        }
        let main = t
            .segments
            .iter()
            .max_by_key(|r| r.num(0))
            .cloned()
            .unwrap_or_else(|| panic!("no segment: {t:?}"));
        assert!(
            main.num(0) >= 16 << 20,
            "main segment smaller than shared_buffers: {main:?}"
        );
        (t.segments, main)
    }

    /// Waits until the main segment's nattch is the postmaster plus its
    /// children (stable across the read), and returns it.
    fn census(&self) -> u64 {
        let pm = self.postmaster();
        let mut last = String::new();
        for _ in 0..100 {
            let before = harness::children(pm);
            let (_, main) = self.segments();
            let after = harness::children(pm);
            let nattch = main.num(1);
            if before == after && nattch == 1 + before.len() as u64 {
                return nattch;
            }
            last = format!("nattch {nattch}, postmaster {pm} with children {before:?} / {after:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("main segment's nattch never matched the postmaster's processes: {last}");
    }
}

fn scenario(m: &Mode, pg: &Pg) -> String {
    let tmp = TempDir::new("postgres");
    let home = tmp.join("home");
    std::fs::create_dir(&home).unwrap();
    harness::chown(&home, &pg.user);
    let s = Server {
        m,
        pg,
        data: home.join("data"),
        log: home.join("server.log"),
        home,
    };
    let data = s.data.to_str().unwrap();
    let log = s.log.to_str().unwrap();
    s.run(
        "initdb",
        &[
            "-D",
            data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ],
        240,
    );
    let conf = format!(
        "\nshared_memory_type = sysv\ndynamic_shared_memory_type = sysv\n\
         listen_addresses = ''\nunix_socket_directories = '{}'\nport = 5432\n\
         shared_buffers = 16MB\nmax_connections = 20\nfsync = off\nautovacuum = off\n",
        s.home.display()
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(s.data.join("postgresql.conf"))
        .unwrap();
    f.write_all(conf.as_bytes()).unwrap();
    drop(f);
    s.run(
        "pg_ctl",
        &["-D", data, "-l", log, "-w", "-t", "120", "start"],
        150,
    );
    assert_eq!(s.psql("SHOW shared_memory_type"), "sysv");
    assert_eq!(s.psql("SHOW dynamic_shared_memory_type"), "sysv");
    let nattch0 = s.census();

    s.run("pgbench", &["-i", "-s", "1", "-q", "postgres"], 180);
    let bench = s.run(
        "pgbench",
        &["-c", "4", "-j", "2", "-t", "250", "postgres"],
        240,
    );
    assert!(
        bench.contains("number of transactions actually processed: 1000/1000"),
        "pgbench:\n{bench}"
    );
    let tps = bench
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("?")
        .to_string();
    let sums = s.psql(
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers), \
         (SELECT sum(bbalance) FROM pgbench_branches), (SELECT sum(delta) FROM pgbench_history), \
         (SELECT count(*) FROM pgbench_history)",
    );
    let f: Vec<&str> = sums.split('|').collect();
    assert!(
        f.len() == 5 && f[0] == f[1] && f[1] == f[2] && f[2] == f[3] && f[4] == "1000",
        "balances of accounts, tellers, branches, history and the history count: {sums}"
    );

    let parallel = "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; \
                    SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0; ";
    let plan = s.psql(&format!(
        "{parallel}EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM pgbench_accounts"
    ));
    assert!(
        plan.contains("Workers Launched: 2"),
        "parallel plan:\n{plan}"
    );
    assert_eq!(
        s.psql(&format!("{parallel}SELECT count(*) FROM pgbench_accounts")),
        "100000"
    );

    let restart = crash_restart(&s);
    let nattch1 = s.census();

    s.run(
        "pg_ctl",
        &["-D", data, "-w", "-t", "60", "stop", "-m", "fast"],
        90,
    );
    assert!(
        s.log().contains("database system is shut down"),
        "log:\n{}",
        s.log()
    );
    let t = Tables::parse(&m.ipcs(&["-m"]));
    assert!(
        t.segments.is_empty(),
        "segments left after pg_ctl stop: {t:?}"
    );
    format!(
        "pgbench 1000/1000 transactions ({tps} tps), balances agree, 2 parallel workers, \
         nattch {nattch0} then {nattch1} after a backend's SIGKILL, restart in {restart:.2} s, \
         no segment left"
    )
}

/// Kills a backend with SIGKILL while its client stays connected, and
/// checks the crash restart: returns the seconds from the kill to the
/// first query answered again.
fn crash_restart(s: &Server) -> f64 {
    let (_, old_main) = s.segments();
    let mut session = s
        .cmd("psql")
        .args(["-X", "-A", "-t", "-q", "-d", "postgres"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("psql session");
    let mut input = session.stdin.take().unwrap();
    input.write_all(b"SELECT pg_backend_pid();\n").unwrap();
    input.flush().unwrap();
    let stdout = session.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    let backend: u32 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("pg_backend_pid() printed {line:?}"));
    assert!(harness::children(s.postmaster()).contains(&backend));

    let t0 = Instant::now();
    assert!(harness::kill(backend, "KILL"), "kill -9 {backend}");
    let count = harness::wait_for(
        Duration::from_secs(90),
        "a query after the crash restart",
        || {
            let mut c = s.cmd("psql");
            c.args(Server::psql_args("SELECT count(*) FROM pgbench_accounts"));
            let out = harness::run(&mut c, Duration::from_secs(30), "psql");
            out.status.success().then(|| out.stdout.trim().to_string())
        },
    );
    let restart = t0.elapsed().as_secs_f64();
    assert_eq!(count, "100000");
    drop(input);
    harness::wait_for(
        Duration::from_secs(30),
        "the killed session's psql to end",
        || session.try_wait().ok().flatten(),
    );

    let log = s.log();
    let at = log
        .find(&format!(
            "server process (PID {backend}) was terminated by signal 9"
        ))
        .unwrap_or_else(|| panic!("the log does not name the killed backend {backend}:\n{log}"));
    let after = &log[at..];
    for want in [
        "terminating any other active server processes",
        "all server processes terminated; reinitializing",
        "database system is ready to accept connections",
    ] {
        assert!(
            after.contains(want),
            "no {want:?} after the kill in the log:\n{log}"
        );
    }

    // The old main segment was removed while attached, its key free at
    // once: the new main segment has it, under a new id.
    let (segs, main) = s.segments();
    assert_eq!(
        main.key, old_main.key,
        "the main segment's key after the restart"
    );
    assert_ne!(main.id, old_main.id, "a new main segment after the restart");
    assert!(
        segs.iter().all(|r| r.id != old_main.id),
        "the old main segment is still listed: {segs:?}"
    );
    restart
}
