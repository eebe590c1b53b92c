//! `ipcns ipcrm` against util-linux `ipcrm` on the kernel: the same
//! removals, in order, on the same objects, with the same output, messages
//! and exit codes; and both tools run as an unprivileged user.

use crate::ipcs::populate;
use crate::kernel::{Ns, both, in_fresh_ipc_ns, skip};
use ipcns::CreateOptions;
use ipcns::abi::IPC_CREAT;
use std::os::unix::fs::PermissionsExt;

#[test]
fn ipcrm_matches_util_linux() {
    in_fresh_ipc_ns("ipcrm_matches_util_linux", || {
        let ns = Ns::new();
        let m = populate(&ns);
        let (s0, s2, s3) = (
            m.sems[0].to_string(),
            m.sems[1].to_string(),
            m.sems[2].to_string(),
        );
        let (m0, m1) = (m.msgs[0].to_string(), m.msgs[1].to_string());
        let (h0, h1) = (m.shms[0].to_string(), m.shms[1].to_string());
        let cases: Vec<Vec<&str>> = vec![
            vec!["-v", "-m", &h0],
            vec!["-m", &h0],
            vec!["-m", "99", "-q", "98", "-s", &s2],
            vec!["-M", "0x1234"],
            vec!["-v", "-S", "0x1234"],
            vec!["-S", "0x1234"],
            vec!["-S", "4660"],
            vec!["-M", "0"],
            vec!["-M", "zz"],
            vec!["-M", ""],
            vec!["-m", "zz"],
            vec!["-m", "-5"],
            vec!["-m", "99999999999"],
            vec!["-Q", "99999999999"],
            vec!["-Q", "-1"],
            vec!["-Q", "99999999999999999999999"],
            vec![],
            vec!["foo"],
            vec!["sem"],
            vec!["msg", &m0, "x", "7", ""],
            vec!["-a=foo"],
            vec!["--all=foo"],
            vec!["-x"],
            vec!["-m"],
            vec!["--shm", "3"],
            vec!["--s", "3"],
            vec!["--verbose=1"],
            vec!["-v", "--queue-key=0x7ffffff0", "extra"],
            vec!["-s", &s3, "--semaphore-id", &s3],
            vec!["shm", &h1],
            vec!["-v", "-a", "shm", "more"],
            vec!["-v", "--all=sem"],
            vec!["-v", "-a"],
            vec!["-a", "-m", "0"],
        ];
        for args in &cases {
            ns.check("ipcrm", args);
        }
        let _ = (s0, m1);
        ns.check("ipcs", &[]);
        // Everything again, then -a with the verbose listing of each kind.
        let m = populate(&ns);
        assert_eq!(m.shms.len(), 3);
        both(&ns, "msgget", |s| s.msgget(0x42, 0o600 | IPC_CREAT)).unwrap();
        ns.check("ipcrm", &["-v", "-amsg"]);
        ns.check("ipcrm", &["--verbose", "--all"]);
        ns.check("ipcs", &[]);
    });
}

#[test]
fn ipcs_and_ipcrm_as_another_user() {
    const TEST: &str = "ipcs_and_ipcrm_as_another_user";
    in_fresh_ipc_ns(TEST, || {
        let ns = Ns::with(CreateOptions {
            mode: 0o666,
            ..CreateOptions::default()
        });
        // The arena's mode is the boundary: let uid 1000 in.
        std::fs::set_permissions(ns.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(ns.ns.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
        let probe = std::process::Command::new("setpriv")
            .args(["--reuid=1000", "--regid=1000", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_ipcns"))
            .arg("--help")
            .output();
        if !probe.is_ok_and(|o| o.status.success()) {
            skip(TEST, "setpriv cannot run ipcns as uid 1000");
            return;
        }
        let m = populate(&ns);
        let s0 = m.sems[0].to_string();
        let m1 = m.msgs[1].to_string();
        let (h0, h1) = (m.shms[0].to_string(), m.shms[1].to_string());
        for args in [
            &[][..],
            &["-c"],
            &["-s", "-i", &s0],
            &["-q", "-i", &m1],
            &["-m", "-i", &h1],
            &["-u"],
        ] {
            ns.check_as(1000, "ipcs", args);
        }
        for args in [
            &["-m", &h0][..],
            &["-M", "0x5678"],
            &["-Q", "0x7ffffff0"],
            &["-v", "-a"],
            &["sem", &s0],
        ] {
            ns.check_as(1000, "ipcrm", args);
        }
        ns.check("ipcs", &[]);
    });
}
