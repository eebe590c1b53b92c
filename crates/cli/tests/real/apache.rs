//! Apache httpd with the prefork MPM and `Mutex sysvsem`: the root
//! parent makes the accept mutex (a set of one semaphore), hands it to
//! `nobody` with IPC_SET, and forks children that setuid to nobody and
//! take the mutex with SEM_UNDO around accept (two Listen lines, so the
//! mutex is really used).
//!
//! Pages served on loopback; the set is listed as created by root and
//! owned by nobody; the child holding the mutex (the semaphore at 0, its
//! last operator a live child) is killed with SIGKILL: its undo gives the
//! mutex back and another child takes it, pages are served again; more
//! children killed while requests run do not wedge the server; `-k stop`
//! and the set is gone.

use crate::harness::{self, Mode, TempDir, User};
use crate::ipcs::{self, Tables};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

pub fn test() {
    harness::both("apache_prefork", true, setup, scenario);
}

pub struct Ap {
    apache: PathBuf,
    modules: PathBuf,
    nobody: User,
    group: String,
}

fn setup() -> Result<Ap, String> {
    let apache = harness::find_program(&["/usr/sbin/apache2", "/usr/sbin/httpd"])
        .ok_or("Apache httpd is not installed (no /usr/sbin/apache2)")?;
    let modules = ["/usr/lib/apache2/modules", "/usr/lib64/httpd/modules"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("mod_mpm_prefork.so").is_file() && d.join("mod_authz_core.so").is_file())
        .ok_or("Apache's mod_mpm_prefork.so and mod_authz_core.so are not installed")?;
    let nobody = User::lookup("nobody")?;
    let group = std::process::Command::new("id")
        .args(["-gn", "nobody"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .map_err(|e| format!("id -gn nobody: {e}"))?;
    Ok(Ap {
        apache,
        modules,
        nobody,
        group,
    })
}

/// Two loopback ports free a moment ago.
fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let b = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

/// `GET /index.html` on `port`: the body if the answer was 200.
fn get(port: u16) -> Result<String, String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut v = Vec::new();
    s.read_to_end(&mut v).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&v);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no header end")?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("answer {:?}", head.lines().next()));
    }
    Ok(body.to_string())
}

/// `n` requests over both ports, each answered with `token`.
fn serve_all(ports: (u16, u16), n: usize, token: &str, what: &str) {
    for i in 0..n {
        let port = if i % 2 == 0 { ports.0 } else { ports.1 };
        match get(port) {
            Ok(body) => assert_eq!(body, token, "{what}: request {i}"),
            Err(e) => panic!("{what}: request {i} on port {port}: {e}"),
        }
    }
}

fn scenario(m: &Mode, ap: &Ap) -> String {
    let tmp = TempDir::new("apache");
    let htdocs = tmp.join("htdocs");
    std::fs::create_dir_all(&htdocs).unwrap();
    std::fs::create_dir_all(tmp.join("run")).unwrap();
    let token = format!("ipcns real apache {}\n", std::process::id());
    std::fs::write(htdocs.join("index.html"), &token).unwrap();
    let ports = free_ports();
    let root = tmp.path().display();
    let mods = ap.modules.display();
    let conf = tmp.join("httpd.conf");
    std::fs::write(
        &conf,
        format!(
            "ServerRoot {root}\nServerName localhost\n\
             LoadModule mpm_prefork_module {mods}/mod_mpm_prefork.so\n\
             LoadModule authz_core_module {mods}/mod_authz_core.so\n\
             Listen 127.0.0.1:{}\nListen 127.0.0.1:{}\n\
             User {}\nGroup {}\n\
             PidFile {root}/httpd.pid\nErrorLog {root}/error.log\nLogLevel info\n\
             DefaultRuntimeDir {root}/run\nDocumentRoot {root}/htdocs\n\
             Mutex sysvsem default\n\
             StartServers 4\nMinSpareServers 2\nMaxSpareServers 6\nMaxRequestWorkers 8\n\
             <Directory {root}/htdocs>\n  Require all granted\n</Directory>\n",
            ports.0, ports.1, ap.nobody.name, ap.group
        ),
    )
    .unwrap();
    let conf = conf.to_str().unwrap();
    let apache = |args: &[&str]| {
        let mut c = m.command(&ap.apache);
        c.args(["-f", conf]).args(args).env("LC_ALL", "C");
        harness::run(&mut c, Duration::from_secs(60), "apache2")
            .ok(&format!("{} apache2 {args:?}", m.name()))
    };
    let error_log = || std::fs::read_to_string(tmp.join("error.log")).unwrap_or_default();

    apache(&["-k", "start"]);
    let parent: u32 = harness::wait_for(Duration::from_secs(30), "httpd.pid", || {
        std::fs::read_to_string(tmp.join("httpd.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    });
    harness::wait_for(Duration::from_secs(30), "a first page", || {
        get(ports.0).ok()
    });

    // The accept mutex: made by root, given to nobody with IPC_SET.
    let t = Tables::parse(&m.ipcs(&["-s"]));
    assert_eq!(t.sets.len(), 1, "one semaphore set: {t:?}");
    let set = &t.sets[0];
    assert_eq!(
        (set.owner.as_str(), set.perms.as_str(), set.num(0)),
        (ap.nobody.name.as_str(), "600", 1)
    );
    let c = ipcs::creators(&m.ipcs(&["-s", "-c"]));
    assert_eq!(c.len(), 1, "ipcs -s -c: {c:?}");
    assert_eq!(
        (c[0].cuid.as_str(), c[0].uid.as_str(), c[0].gid.as_str()),
        ("root", ap.nobody.name.as_str(), ap.group.as_str()),
        "creator and owner of the mutex"
    );
    let id = set.id.to_string();

    serve_all(ports, 40, &token, "before any kill");

    // The holder: the semaphore at 0, its last operator a live child.
    let holder = |not: u32| {
        harness::wait_for(Duration::from_secs(30), "a child holding the mutex", || {
            let s = *ipcs::sems(&m.ipcs(&["-s", "-i", &id])).first()?;
            let kids = harness::children(parent);
            (s.value == 0 && s.pid != not && kids.contains(&s.pid)).then_some(s)
        })
    };
    let first = holder(0);
    assert!(harness::kill(first.pid, "KILL"));
    let second = holder(first.pid);
    serve_all(ports, 40, &token, "after the mutex holder's SIGKILL");

    // More children killed while requests run.
    let (lost, killed) = std::thread::scope(|s| {
        let client = s.spawn(|| {
            (0..60)
                .filter(|i| get(if i % 2 == 0 { ports.0 } else { ports.1 }).is_err())
                .count()
        });
        let mut killed = 0;
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(150));
            if let Some(&pid) = harness::children(parent).first() {
                killed += usize::from(harness::kill(pid, "KILL"));
            }
        }
        (client.join().unwrap(), killed)
    });
    assert!(
        lost <= killed,
        "{lost} requests failed while {killed} children were killed"
    );
    serve_all(ports, 40, &token, "after killing children under load");
    // The parent reaped the killed holder (Apache does not log a SIGKILL).
    assert!(!harness::children(parent).contains(&first.pid));
    let log = error_log();
    assert!(
        !log.contains(":emerg]") && !log.contains(":alert]"),
        "error.log:\n{log}"
    );

    apache(&["-k", "stop"]);
    harness::wait_for(Duration::from_secs(30), "httpd to stop", || {
        (!harness::alive(parent)).then_some(())
    });
    let t = Tables::parse(&m.ipcs(&[]));
    assert!(t.is_empty(), "objects left after apache2 -k stop: {t:?}");
    format!(
        "180 pages served; the mutex holder {} killed, {} took the mutex (ncount {}); \
         {killed} more children killed under load, {lost} requests lost",
        first.pid, second.pid, second.ncount
    )
}
