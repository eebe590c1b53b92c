//! util-linux's sys-utils/ipcutils.c readers: the /proc/sysvipc text
//! parsed as its `scanf` formats read it (a line that does not scan is
//! skipped), and the limits from /proc/sys/kernel.

use super::cnum::{strtoimax, strtoul};
use ipcns::Mech;
use ipcns::abi;
use ipcns::sysv::SysV;

/// `struct ipc_stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Perm {
    pub key: i32,
    pub id: i32,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub cuid: u32,
    pub cgid: u32,
}

/// `struct sem_data` (without the elements, read separately).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sem {
    pub perm: Perm,
    pub nsems: u64,
    pub otime: i64,
    pub ctime: i64,
}

/// `struct msg_data`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Msg {
    pub perm: Perm,
    pub cbytes: u64,
    pub qnum: u64,
    pub qbytes: u64,
    pub lspid: i32,
    pub lrpid: i32,
    pub stime: i64,
    pub rtime: i64,
    pub ctime: i64,
}

/// `struct shm_data`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shm {
    pub perm: Perm,
    pub segsz: u64,
    pub cprid: u32,
    pub lprid: u32,
    pub nattch: u64,
    pub atime: i64,
    pub dtime: i64,
    pub ctime: i64,
}

/// One scanf conversion on a white-space separated field.
#[derive(Clone, Copy)]
enum Conv {
    /// `%d` / `%u` / `%SCNu64`: base 10 (a sign allowed, as scanf does).
    Dec,
    /// `%o`.
    Oct,
    /// `%SCNi64`: base 0.
    Int,
}

/// Scans the fields of `line` with `convs`, stopping at the first that
/// does not convert completely; returns the values converted.
fn scan(line: &str, convs: &[Conv]) -> Vec<i128> {
    let mut v = Vec::new();
    for (field, conv) in line.split_whitespace().zip(convs) {
        let base = match conv {
            Conv::Dec => 10,
            Conv::Oct => 8,
            Conv::Int => 0,
        };
        let (value, end) = if field.starts_with('-') {
            let r = strtoimax(field.as_bytes(), base);
            (i128::from(r.value), r.end)
        } else {
            let r = strtoul(field.as_bytes(), base);
            (i128::from(r.value), r.end)
        };
        if end != field.len() {
            break;
        }
        v.push(value);
    }
    v
}

fn perm(key: i128, id: i128, mode: i128, ids: [i128; 4]) -> Perm {
    Perm {
        key: key as i32,
        id: id as i32,
        mode: mode as u32,
        uid: ids[0] as u32,
        gid: ids[1] as u32,
        cuid: ids[2] as u32,
        cgid: ids[3] as u32,
    }
}

/// The rows after the header line of /proc/sysvipc/`m`; a read failure
/// is an empty list (the kernel's file cannot fail this way).
fn lines(sys: &dyn SysV, m: Mech) -> Vec<String> {
    sys.proc_text(m)
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

use Conv::{Dec, Int, Oct};

/// `ipc_sem_get_info(-1, ...)`: every set (`"%d %d  %o %u %u %u %u %u %li %li"`).
pub fn sems(sys: &dyn SysV) -> Vec<Sem> {
    let convs = [Dec, Dec, Oct, Dec, Dec, Dec, Dec, Dec, Int, Int];
    lines(sys, Mech::Sem)
        .iter()
        .map(|l| scan(l, &convs))
        .filter(|f| f.len() == 10)
        .map(|f| Sem {
            perm: perm(f[0], f[1], f[2], [f[4], f[5], f[6], f[7]]),
            nsems: f[3] as u64,
            otime: f[8] as i64,
            ctime: f[9] as i64,
        })
        .collect()
}

/// `ipc_msg_get_info(-1, ...)`: every queue (14 fields).
pub fn msgs(sys: &dyn SysV) -> Vec<Msg> {
    let convs = [
        Dec, Dec, Oct, Dec, Dec, Dec, Dec, Dec, Dec, Dec, Dec, Int, Int, Int,
    ];
    lines(sys, Mech::Msg)
        .iter()
        .map(|l| scan(l, &convs))
        .filter(|f| f.len() == 14)
        .map(|f| Msg {
            perm: perm(f[0], f[1], f[2], [f[7], f[8], f[9], f[10]]),
            cbytes: f[3] as u64,
            qnum: f[4] as u64,
            qbytes: 0,
            lspid: f[5] as i32,
            lrpid: f[6] as i32,
            stime: f[11] as i64,
            rtime: f[12] as i64,
            ctime: f[13] as i64,
        })
        .collect()
}

/// `ipc_shm_get_info(-1, ...)`: every segment (at least 14 of 16 fields).
pub fn shms(sys: &dyn SysV) -> Vec<Shm> {
    let convs = [
        Dec, Dec, Oct, Dec, Dec, Dec, Dec, Dec, Dec, Dec, Dec, Int, Int, Int, Dec, Dec,
    ];
    lines(sys, Mech::Shm)
        .iter()
        .map(|l| scan(l, &convs))
        .filter(|f| f.len() >= 14)
        .map(|f| Shm {
            perm: perm(f[0], f[1], f[2], [f[7], f[8], f[9], f[10]]),
            segsz: f[3] as u64,
            cprid: f[4] as u32,
            lprid: f[5] as u32,
            nattch: f[6] as u64,
            atime: f[11] as i64,
            dtime: f[12] as i64,
            ctime: f[13] as i64,
        })
        .collect()
}

/// `ipc_msg_get_info(id, ...)`: the queue with this id, with `qbytes`
/// from `msgctl(id, IPC_STAT)` (0 when that fails). A negative id matches
/// nothing and so returns the first queue with `qbytes` 0, as util-linux's
/// list walk does.
pub fn msg_by_id(sys: &dyn SysV, id: i32) -> Option<Msg> {
    let all = msgs(sys);
    if id < 0 {
        return all.first().copied();
    }
    let mut m = all.into_iter().find(|m| m.perm.id == id)?;
    if let Ok((_, ds)) = ipcns::sysv::msg_stat(sys, id, abi::IPC_STAT) {
        m.qbytes = ds.msg_qbytes;
    }
    Some(m)
}

/// `ipc_shm_get_info(id, ...)`, with the same negative-id walk.
pub fn shm_by_id(sys: &dyn SysV, id: i32) -> Option<Shm> {
    let all = shms(sys);
    if id < 0 {
        return all.first().copied();
    }
    all.into_iter().find(|s| s.perm.id == id)
}

/// `ipc_sem_get_info(id, ...)` without the elements.
pub fn sem_by_id(sys: &dyn SysV, id: i32) -> Option<Sem> {
    sems(sys).into_iter().find(|s| s.perm.id == id)
}

/// `struct ipc_limits`, as ipcutils.c fills it from /proc/sys/kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct Limits {
    pub shmmni: u64,
    pub shmall: u64,
    pub shmmax: u64,
    pub shmmin: u64,
    pub semmni: i32,
    pub semmsl: i32,
    pub semmns: i32,
    pub semopm: i32,
    pub semvmx: u32,
    pub msgmni: i32,
    pub msgmax: u64,
    pub msgmnb: i32,
}

/// `ul_path_read_s64` / `_u64` of /proc/sys/kernel/`name`: a number
/// (scanf-style) at the start of the text.
fn read_num(sys: &dyn SysV, name: &str) -> Option<i128> {
    let text = sys.sysctl_read(name).ok()?;
    let field = text.split_whitespace().next()?;
    let r = if field.starts_with('-') {
        let r = strtoimax(field.as_bytes(), 10);
        (i128::from(r.value), r.end)
    } else {
        let r = strtoul(field.as_bytes(), 10);
        (i128::from(r.value), r.end)
    };
    (r.1 > 0).then_some(r.0)
}

/// `ipc_msg_get_limits`; `None` is "unable to fetch message limits".
pub fn msg_limits(sys: &dyn SysV) -> Option<Limits> {
    Some(Limits {
        msgmni: read_num(sys, "msgmni")? as i32,
        msgmnb: read_num(sys, "msgmnb")? as i32,
        msgmax: read_num(sys, "msgmax")? as u64,
        ..Limits::default()
    })
}

/// `ipc_sem_get_limits`: `fscanf("%d\t%d\t%d\t%d")` of /proc/sys/kernel/sem,
/// else `semctl(IPC_INFO)`.
pub fn sem_limits(sys: &dyn SysV) -> Option<Limits> {
    let mut l = Limits {
        semvmx: 32767,
        ..Limits::default()
    };
    let v: Vec<i32> = sys
        .sysctl_read("sem")
        .unwrap_or_default()
        .split_whitespace()
        .take(4)
        .map_while(|f| f.parse::<i64>().ok().map(|x| x as i32))
        .collect();
    if let [msl, mns, opm, mni] = v[..] {
        (l.semmsl, l.semmns, l.semopm, l.semmni) = (msl, mns, opm, mni);
    } else {
        let (_, i) = ipcns::sysv::sem_info(sys, abi::IPC_INFO).ok()?;
        (l.semmsl, l.semmns, l.semopm, l.semmni) = (i.semmsl, i.semmns, i.semopm, i.semmni);
    }
    Some(l)
}

/// `ipc_shm_get_limits` (values that fail to read stay 0, as there).
pub fn shm_limits(sys: &dyn SysV) -> Limits {
    Limits {
        shmmin: 1,
        shmall: read_num(sys, "shmall").unwrap_or(0) as u64,
        shmmax: read_num(sys, "shmmax").unwrap_or(0) as u64,
        shmmni: read_num(sys, "shmmni").unwrap_or(0) as u64,
        ..Limits::default()
    }
}
