//! `ipcs -i ID`: ipcs.c's `print_shm`, `print_msg` and `print_sem`, one
//! object in detail (a set with each semaphore's value, ncount, zcount and
//! last pid, read with `semctl`; a queue with `qbytes` from `IPC_STAT`).

use super::rows;
use super::size::{self, Unit};
use super::text::{pad, time_text};
use super::{Exit, Tool};
use ipcns::abi;
use ipcns::sysv::SysV;
use std::io::Write;

/// `%#o`: octal with a leading 0, except for 0 itself.
fn alt_octal(v: u32) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("0{v:o}")
    }
}

/// `"NAME=%-26.24s\n"` of a time (or `Not set`).
fn long_time(out: &mut Vec<u8>, label: &str, t: i64, not_set: bool) {
    out.extend_from_slice(label.as_bytes());
    pad(out, &time_text(t, not_set), 26, Some(24));
    out.push(b'\n');
}

pub fn print_shm(t: &mut Tool, sys: &dyn SysV, id: i32, unit: Unit) {
    let Some(s) = rows::shm_by_id(sys, id) else {
        t.warnx(format!("id {id} not found"));
        return;
    };
    let out = &mut t.out;
    let p = &s.perm;
    let _ = write!(
        out,
        "\nShared memory Segment shmid={id}\n\
         uid={}\tgid={}\tcuid={}\tcgid={}\n\
         mode={}\taccess_perms={}\n",
        p.uid,
        p.gid,
        p.cuid,
        p.cgid,
        alt_octal(p.mode),
        alt_octal(p.mode & 0o777)
    );
    let label = if unit == Unit::Human {
        "size="
    } else {
        "bytes="
    };
    size::print(out, unit, Some(label), s.segsz, "\t", 0);
    let _ = writeln!(
        out,
        "lpid={}\tcpid={}\tnattch={}",
        s.lprid, s.cprid, s.nattch as i64
    );
    long_time(out, "att_time=", s.atime, true);
    long_time(out, "det_time=", s.dtime, true);
    long_time(out, "change_time=", s.ctime, false);
    out.push(b'\n');
}

pub fn print_msg(t: &mut Tool, sys: &dyn SysV, id: i32, unit: Unit) {
    let Some(m) = rows::msg_by_id(sys, id) else {
        t.warnx(format!("id {id} not found"));
        return;
    };
    let out = &mut t.out;
    let p = &m.perm;
    let _ = write!(
        out,
        "\nMessage Queue msqid={id}\n\
         uid={}\tgid={}\tcuid={}\tcgid={}\tmode={}\n",
        p.uid,
        p.gid,
        p.cuid,
        p.cgid,
        alt_octal(p.mode)
    );
    let human = unit == Unit::Human;
    size::print(
        out,
        unit,
        Some(if human { "csize=" } else { "cbytes=" }),
        m.cbytes,
        "\t",
        0,
    );
    size::print(
        out,
        unit,
        Some(if human { "qsize=" } else { "qbytes=" }),
        m.qbytes,
        "\t",
        0,
    );
    let _ = writeln!(
        out,
        "qnum={}\tlspid={}\tlrpid={}",
        m.qnum as i64, m.lspid, m.lrpid
    );
    long_time(out, "send_time=", m.stime, true);
    long_time(out, "rcv_time=", m.rtime, true);
    long_time(out, "change_time=", m.ctime, true);
    out.push(b'\n');
}

pub fn print_sem(t: &mut Tool, sys: &dyn SysV, id: i32) -> Result<(), Exit> {
    let Some(s) = rows::sem_by_id(sys, id) else {
        t.warnx(format!("id {id} not found"));
        return Ok(());
    };
    // get_sem_elements: four semctl calls per semaphore, fatal on error.
    let mut elems = Vec::new();
    for i in 0..s.nsems {
        let mut e = [0i32; 4];
        for (k, (cmd, name)) in [
            (abi::GETVAL, "semctl(GETVAL)"),
            (abi::GETNCNT, "semctl(GETNCNT)"),
            (abi::GETZCNT, "semctl(GETZCNT)"),
            (abi::GETPID, "semctl(GETPID)"),
        ]
        .into_iter()
        .enumerate()
        {
            e[k] = sys
                .semctl(id, i as i32, cmd, ipcns::sem::SemArg::None)
                .map_err(|errno| t.err(errno.raw(), format!("{name} failed")))?;
        }
        elems.push(e);
    }
    let out = &mut t.out;
    let p = &s.perm;
    let _ = write!(
        out,
        "\nSemaphore Array semid={id}\n\
         uid={}\t gid={}\t cuid={}\t cgid={}\n\
         mode={}, access_perms={}\n\
         nsems = {}\n",
        p.uid,
        p.gid,
        p.cuid,
        p.cgid,
        alt_octal(p.mode),
        alt_octal(p.mode & 0o777),
        s.nsems
    );
    long_time(out, "otime = ", s.otime, true);
    long_time(out, "ctime = ", s.ctime, false);
    let _ = writeln!(
        out,
        "{:<10} {:<10} {:<10} {:<10} {:<10}",
        "semnum", "value", "ncount", "zcount", "pid"
    );
    for (i, e) in elems.iter().enumerate() {
        let _ = writeln!(
            out,
            "{i:<10} {:<10} {:<10} {:<10} {:<10}",
            e[0], e[1], e[2], e[3]
        );
    }
    out.push(b'\n');
    Ok(())
}
