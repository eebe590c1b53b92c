//! SHM_HUGETLB served from huge pages, against the kernel: the same
//! sequence (shmget, shmat with and without an address, a write in one
//! process read in another, IPC_STAT, SHM_INFO, /proc/sysvipc/shm,
//! SHM_LOCK, shmdt, IPC_RMID, and the pool's HugePages_Free and
//! HugePages_Rsvd after each step) on the kernel, in a fresh IPC
//! namespace, and on ipcns, in a forked child with a private mount
//! namespace where hugetlbfs is mounted; the pool is raised to 8 pages of
//! 2 MiB for the test and restored after it.
//!
//! Needs root and 2 MiB huge pages; skipped with the reason otherwise.
//!
//! # Safety
//! The forked child unshares and mounts with NUL-terminated strings; the
//! sequence reads and writes bytes of attachments it made, within their
//! size; an anonymous mapping is made and unmapped to find a free address.
#![allow(unsafe_code)]

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::shm::ShmArg;
use ipcns::shm::attach::SHM_RND;
use ipcns::{Cred, Errno, Mech, Namespace, SysResult};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;

/// 2 MiB.
const PAGE: usize = 2 << 20;
const IPC_PRIVATE: i32 = 0;
const SHIFT_2M: i32 = 21 << 26;
const SHIFT_1G: i32 = 30 << 26;
const POOL: &str = "/proc/sys/vm/nr_hugepages";

/// `HugePages_<field>` of /proc/meminfo.
fn meminfo(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let key = format!("HugePages_{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The 2 MiB pool set to `n` pages for the guard's life, then restored;
/// the test holds /tmp/ipcns-nr_hugepages.lock meanwhile (the preload
/// tests that need an empty pool take it too).
struct Pool {
    old: String,
    _lock: File,
}

impl Pool {
    fn set(n: u64) -> Result<Pool, String> {
        let lock = File::create("/tmp/ipcns-nr_hugepages.lock").map_err(|e| e.to_string())?;
        lock.lock().map_err(|e| format!("flock: {e}"))?;
        let old = std::fs::read_to_string(POOL).map_err(|e| format!("{POOL}: {e}"))?;
        let pool = Pool { old, _lock: lock };
        std::fs::write(POOL, format!("{n}\n")).map_err(|e| format!("{POOL}: {e}"))?;
        if meminfo("Free") != n || meminfo("Rsvd") != 0 {
            return Err(format!(
                "the pool did not become {n} free pages (HugePages_Free {}, HugePages_Rsvd {})",
                meminfo("Free"),
                meminfo("Rsvd")
            ));
        }
        Ok(pool)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = std::fs::write(POOL, &self.old);
    }
}

/// The pool of `n` pages, or None after printing why the test is skipped.
fn pool_or_skip(test: &str, n: u64) -> Option<Pool> {
    if !support::kernel_or_skip(test) {
        return None;
    }
    if std::fs::metadata("/sys/kernel/mm/hugepages/hugepages-2048kB").is_err() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: the kernel has no 2 MiB huge pages"
        );
        return None;
    }
    match Pool::set(n) {
        Ok(p) => Some(p),
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            None
        }
    }
}

/// In the calling (forked, single-threaded) process: a private mount
/// namespace with hugetlbfs (2 MiB pages) mounted on a new directory, and
/// a new IPC namespace. The directory, or why not.
fn private_hugetlbfs(tag: &str) -> Result<std::path::PathBuf, String> {
    // SAFETY: flag-only system call.
    if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWIPC) } != 0 {
        return Err(format!("unshare: {}", std::io::Error::last_os_error()));
    }
    let root = CString::new("/").unwrap();
    let none = CString::new("none").unwrap();
    // SAFETY: NUL-terminated strings; no data.
    let r = unsafe {
        libc::mount(
            none.as_ptr(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount --make-rprivate /: {}",
            std::io::Error::last_os_error()
        ));
    }
    let dir = std::env::temp_dir().join(format!("ipcns-hugetlbfs-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let target = CString::new(dir.to_str().unwrap()).unwrap();
    let fstype = CString::new("hugetlbfs").unwrap();
    let opts = CString::new("pagesize=2M").unwrap();
    // SAFETY: NUL-terminated strings.
    let r = unsafe {
        libc::mount(
            none.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&dir);
        return Err(format!("mount -t hugetlbfs: {e}"));
    }
    Ok(dir)
}

/// Unmounts and removes what [`private_hugetlbfs`] made.
fn unmount(dir: &std::path::Path) {
    let target = CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated string.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    let _ = std::fs::remove_dir(dir);
}

/// The calls the sequence makes, on the kernel or on ipcns.
trait Side {
    fn get(&self, key: i32, size: u64, flg: i32) -> SysResult<i32>;
    fn at(&self, id: i32, addr: usize, flg: i32) -> SysResult<usize>;
    fn dt(&self, addr: usize) -> SysResult<i32>;
    fn ctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32>;
    fn proc_shm(&self) -> String;
    fn sysctl(&self, name: &str, value: &str) -> SysResult<()>;
}

struct Kernel;

impl Side for Kernel {
    fn get(&self, key: i32, size: u64, flg: i32) -> SysResult<i32> {
        ipcns_sys::sysv::shmget(key, size as usize, flg)
    }
    fn at(&self, id: i32, addr: usize, flg: i32) -> SysResult<usize> {
        // SAFETY: the sequence asks for addresses where nothing of ours is
        // mapped (or that the kernel refuses), never with SHM_REMAP.
        unsafe { ipcns_sys::sysv::shmat(id, addr, flg) }
    }
    fn dt(&self, addr: usize) -> SysResult<i32> {
        // SAFETY: only an attachment of the sequence's can go.
        unsafe { ipcns_sys::sysv::shmdt(addr) }
    }
    fn ctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32> {
        use ipcns_oracle::SysV;
        ipcns_oracle::kernel::Host.shmctl(id, cmd, arg)
    }
    fn proc_shm(&self) -> String {
        std::fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default()
    }
    fn sysctl(&self, name: &str, value: &str) -> SysResult<()> {
        use ipcns_oracle::SysV;
        ipcns_oracle::kernel::Host.sysctl_write(name, value)
    }
}

struct Ipcns<'a>(&'a Namespace);

impl Ipcns<'_> {
    fn cred(&self) -> Cred {
        Cred::root(std::process::id() as i32)
    }
}

impl Side for Ipcns<'_> {
    fn get(&self, key: i32, size: u64, flg: i32) -> SysResult<i32> {
        self.0.shmget(&self.cred(), key, size, flg)
    }
    fn at(&self, id: i32, addr: usize, flg: i32) -> SysResult<usize> {
        self.0.shmat(&self.cred(), id, addr, flg)
    }
    fn dt(&self, addr: usize) -> SysResult<i32> {
        self.0.shmdt(&self.cred(), addr)
    }
    fn ctl(&self, id: i32, cmd: i32, arg: ShmArg<'_>) -> SysResult<i32> {
        self.0.shmctl(&self.cred(), id, cmd, arg)
    }
    fn proc_shm(&self) -> String {
        self.0
            .proc_text(&self.cred(), Mech::Shm)
            .unwrap_or_default()
    }
    fn sysctl(&self, name: &str, value: &str) -> SysResult<()> {
        self.0.sysctl_write(&self.cred(), name, value)
    }
}

fn poke(addr: usize, at: usize, v: u8) {
    // SAFETY: `addr` is a live read-write attachment of more than `at`
    // bytes whose pages are reserved.
    unsafe { *((addr + at) as *mut u8) = v };
}

fn peek(addr: usize, at: usize) -> u8 {
    // SAFETY: as `poke`.
    unsafe { *((addr + at) as *const u8) }
}

/// A 2 MiB aligned address with 4 MiB free after it (an anonymous
/// mapping made and unmapped).
fn free_aligned() -> usize {
    let len = 3 * PAGE;
    // SAFETY: a new anonymous mapping where the kernel chooses, unmapped
    // at once.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // SAFETY: the mapping just made.
    unsafe { libc::munmap(p, len) };
    (p as usize).next_multiple_of(PAGE)
}

/// The rss and swap columns of segment `id` in /proc/sysvipc/shm.
fn proc_columns(text: &str, id: i32) -> String {
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&id.to_string().as_str()))
        .map_or("absent".into(), |f| {
            format!("size {} rss {} swap {}", f[3], f[14], f[15])
        })
}

/// The pool's change since `(free, rsvd)`: pages taken, pages reserved.
fn pool_delta(base: (u64, u64)) -> String {
    format!(
        "pool: {} taken, {} reserved",
        base.0 as i64 - meminfo("Free") as i64,
        meminfo("Rsvd") as i64 - base.1 as i64
    )
}

fn stat(s: &dyn Side, id: i32) -> String {
    let mut ds = shmid64_ds::default();
    match s.ctl(id, IPC_STAT, ShmArg::Ds(&mut ds)) {
        Ok(_) => format!(
            "segsz {} nattch {} mode {:o} cpid-is-me {} lpid-is-me {}",
            ds.shm_segsz,
            ds.shm_nattch,
            ds.shm_perm.mode,
            ds.shm_cpid == std::process::id() as i32,
            ds.shm_lpid == std::process::id() as i32,
        ),
        Err(e) => format!("{e:?}"),
    }
}

fn nattch(s: &dyn Side, id: i32) -> u64 {
    let mut ds = shmid64_ds::default();
    s.ctl(id, IPC_STAT, ShmArg::Ds(&mut ds))
        .map_or(9, |_| ds.shm_nattch)
}

fn info(s: &dyn Side) -> String {
    let mut i = shm_info::default();
    let r = s.ctl(0, SHM_INFO, ShmArg::ShmInfo(&mut i));
    format!(
        "SHM_INFO {:?} used {} tot {} rss {} swp {}",
        r.map(|_| ()),
        i.used_ids,
        i.shm_tot,
        i.shm_rss,
        i.shm_swp
    )
}

/// The sequence; every observation as a line.
fn sequence(s: &dyn Side) -> Vec<String> {
    let mut out = Vec::new();
    let base = (meminfo("Free"), meminfo("Rsvd"));
    // A size encoding without a pool: EINVAL; 1 GiB pages (a pool the
    // kernel has, empty): ENOMEM.
    out.push(format!(
        "25: {:?}",
        s.get(IPC_PRIVATE, 4096, SHM_HUGETLB | (25 << 26) | 0o600)
    ));
    out.push(format!(
        "1G: {:?}",
        s.get(IPC_PRIVATE, 4096, SHM_HUGETLB | SHIFT_1G | 0o600)
    ));
    // 3 MiB: two pages reserved, none taken.
    let id = s.get(0x4855, 3 << 20, IPC_CREAT | SHM_HUGETLB | SHIFT_2M | 0o640);
    out.push(format!("get: {:?}", id.map(|_| ())));
    let Ok(id) = id else { return out };
    out.push(pool_delta(base));
    out.push(stat(s, id));
    out.push(info(s));
    // The same key again (no SHM_HUGETLB needed), and too big.
    out.push(format!("again: {:?}", s.get(0x4855, 0, 0).map(|i| i == id)));
    out.push(format!("bigger: {:?}", s.get(0x4855, 4 << 20, 0)));
    let a = s.at(id, 0, 0);
    out.push(format!("at: {:?}", a.map(|a| a % PAGE)));
    let Ok(a) = a else { return out };
    out.push(pool_delta(base));
    // Addresses not aligned to the huge page: EINVAL, SHM_RND or not.
    let free = free_aligned();
    out.push(format!("at +4K: {:?}", s.at(id, free + 4096, 0)));
    out.push(format!(
        "at +4K+1 RND: {:?}",
        s.at(id, free + 4097, SHM_RND)
    ));
    out.push(format!(
        "at aligned: {:?}",
        s.at(id, free, 0).map(|x| x == free)
    ));
    // Another process writes both pages; this one reads them.
    let code = support::fork_run(|| {
        let Ok(b) = s.at(id, 0, 0) else { return 2 };
        poke(b, 0, 0x5a);
        poke(b, PAGE + 5, 0xa5);
        match s.dt(b) {
            Ok(_) => 0,
            Err(_) => 3,
        }
    });
    out.push(format!("child: {code}"));
    out.push(format!("read: {:x} {:x}", peek(a, 0), peek(a, PAGE + 5)));
    out.push(pool_delta(base));
    out.push(stat(s, id));
    out.push(info(s));
    out.push(proc_columns(&s.proc_shm(), id));
    // A forked child inherits the attachments (nattch 3 while it lives),
    // detaches the inherited one at `a` itself, and exits with the other.
    let code = support::fork_run(|| {
        let n = nattch(s, id);
        let dt = i32::from(s.dt(a).is_ok());
        (n * 10) as i32 + dt
    });
    out.push(format!(
        "forked child: nattch {} detached {}",
        code / 10,
        code % 10
    ));
    out.push(stat(s, id));
    // shmdt only at an attachment's start.
    out.push(format!("dt inside: {:?}", s.dt(a + PAGE)));
    out.push(format!("dt +4K: {:?}", s.dt(a + 4096)));
    // SHM_LOCK: nothing to lock on hugetlbfs, no SHM_LOCKED.
    out.push(format!("lock: {:?}", s.ctl(id, SHM_LOCK, ShmArg::None)));
    out.push(stat(s, id));
    out.push(format!("unlock: {:?}", s.ctl(id, SHM_UNLOCK, ShmArg::None)));
    // Removed while attached: pages kept until the last detach.
    out.push(format!("rmid: {:?}", s.ctl(id, IPC_RMID, ShmArg::None)));
    out.push(stat(s, id));
    out.push(format!("dt: {:?}", s.dt(free)));
    out.push(pool_delta(base));
    out.push(format!("dt: {:?}", s.dt(a)));
    out.push(pool_delta(base));
    out.push(info(s));
    // More than the pool holds: ENOMEM; with SHM_NORESERVE granted,
    // nothing reserved.
    out.push(format!(
        "9 pages: {:?}",
        s.get(IPC_PRIVATE, 9 * PAGE as u64, SHM_HUGETLB | 0o600)
    ));
    let nr = s.get(
        IPC_PRIVATE,
        9 * PAGE as u64,
        SHM_HUGETLB | SHM_NORESERVE | 0o600,
    );
    out.push(format!("9 pages NORESERVE: {:?}", nr.map(|_| ())));
    out.push(pool_delta(base));
    if let Ok(nr) = nr {
        out.push(stat(s, nr));
        out.push(format!("rmid: {:?}", s.ctl(nr, IPC_RMID, ShmArg::None)));
    }
    // The whole pool in one segment, then none left.
    let all = s.get(IPC_PRIVATE, 8 * PAGE as u64 - 1, SHM_HUGETLB | 0o600);
    out.push(format!("8 pages: {:?}", all.map(|_| ())));
    out.push(pool_delta(base));
    out.push(format!(
        "one more: {:?}",
        s.get(IPC_PRIVATE, 1, SHM_HUGETLB | 0o600)
    ));
    if let Ok(all) = all {
        out.push(format!("rmid: {:?}", s.ctl(all, IPC_RMID, ShmArg::None)));
    }
    out.push(pool_delta(base));
    out.push(info(s));
    // shm_rmid_forced: a segment whose creator exited unattached is
    // destroyed, its pages freed.
    out.push(format!("forced: {:?}", s.sysctl("shm_rmid_forced", "1")));
    let code =
        support::fork_run(
            || match s.get(0x4856, PAGE as u64, IPC_CREAT | SHM_HUGETLB | 0o600) {
                Ok(_) => 0,
                Err(e) => e.0,
            },
        );
    out.push(format!("orphan made: {code}"));
    out.push(format!("orphan: {:?}", s.get(0x4856, 0, 0).map(|_| ())));
    out.push(pool_delta(base));
    out.push(format!("forced: {:?}", s.sysctl("shm_rmid_forced", "0")));
    out.push(info(s));
    out
}

/// Runs the sequence on the kernel, then on ipcns, in a child in a
/// private mount namespace with hugetlbfs mounted; 0 if they agree.
fn kernel_then_ipcns(tag: &'static str, seq: fn(&dyn Side) -> Vec<String>) -> i32 {
    support::fork_run(|| {
        let dir = match private_hugetlbfs(tag) {
            Ok(d) => d,
            Err(why) => {
                eprintln!("{tag}: {why}");
                return 10;
            }
        };
        let kernel = seq(&Kernel);
        let t = TestNs::new(tag);
        let ipcns = seq(&Ipcns(&t.ns));
        drop(t);
        let left = std::fs::read_dir(&dir).map_or(0, |d| d.count());
        unmount(&dir);
        let mut code = 0;
        for (i, (k, o)) in kernel.iter().zip(&ipcns).enumerate() {
            let mark = if k == o { " " } else { "!" };
            eprintln!("{mark} {i:2} kernel: {k:<50} ipcns: {o}");
            if k != o {
                code = 1;
            }
        }
        if kernel.len() != ipcns.len() {
            eprintln!(
                "lengths differ: kernel {} ipcns {}",
                kernel.len(),
                ipcns.len()
            );
            code = 1;
        }
        if left != 0 {
            eprintln!("{left} entries left on the hugetlbfs mount after the namespace's removal");
            code = 1;
        }
        code
    })
}

#[test]
fn hugetlb_pages_match_the_kernel() {
    let Some(_pool) = pool_or_skip("hugetlb_pages_match_the_kernel", 8) else {
        return;
    };
    assert_eq!(kernel_then_ipcns("hugetlb", sequence), 0);
    assert_eq!(
        (meminfo("Free"), meminfo("Rsvd")),
        (8, 0),
        "pages left taken"
    );
}

/// With the pool empty: ENOMEM on both (SHM_NORESERVE granted on both);
/// and without a hugetlbfs mount ipcns answers ENOMEM whatever the pool.
fn empty_sequence(s: &dyn Side) -> Vec<String> {
    vec![
        format!(
            "default: {:?}",
            s.get(IPC_PRIVATE, 4096, SHM_HUGETLB | 0o600)
        ),
        format!(
            "2M: {:?}",
            s.get(0x77, 5 << 20, IPC_CREAT | SHM_HUGETLB | SHIFT_2M | 0o600)
        ),
        format!(
            "NORESERVE: {:?}",
            s.get(
                IPC_PRIVATE,
                PAGE as u64,
                SHM_HUGETLB | SHM_NORESERVE | 0o600
            )
            .map(|id| s.ctl(id, IPC_RMID, ShmArg::None))
        ),
        info(s),
    ]
}

#[test]
fn hugetlb_without_pages_is_enomem() {
    let Some(_pool) = pool_or_skip("hugetlb_without_pages_is_enomem", 0) else {
        return;
    };
    assert_eq!(kernel_then_ipcns("hugetlb-empty", empty_sequence), 0);
    // No hugetlbfs mount where ipcns looks (none in this mount namespace
    // unless the system has one): ENOMEM even with pages in the pool.
    let has_mount = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(" - hugetlbfs "));
    if !has_mount {
        drop(_pool);
        let Ok(_pool) = Pool::set(2) else { return };
        let code = support::fork_run(|| {
            let t = TestNs::new("hugetlb-nomount");
            let me = Cred::root(std::process::id() as i32);
            match t.ns.shmget(&me, IPC_PRIVATE, 4096, SHM_HUGETLB | 0o600) {
                Err(Errno::ENOMEM) => 0,
                r => {
                    eprintln!("no mount: {r:?}");
                    1
                }
            }
        });
        assert_eq!(code, 0);
    }
}

/// A huge page segment whose record (the words naming its file) is
/// overwritten: shmat answers EIDRM and nothing faults, whatever the
/// words; IPC_STAT, SHM_INFO and /proc/sysvipc/shm still answer; with the
/// words restored the segment works again. A segment removed while its
/// record is hostile leaves its file, which the namespace's removal takes
/// (the pool is whole again). A file left by an earlier arena under the
/// new segment's name is replaced.
#[test]
fn hugetlb_hostile_record() {
    use std::os::unix::fs::FileExt;
    let Some(_pool) = pool_or_skip("hugetlb_hostile_record", 2) else {
        return;
    };
    let code = support::fork_run(|| {
        let dir = match private_hugetlbfs("hostile") {
            Ok(d) => d,
            Err(why) => {
                eprintln!("hugetlb_hostile_record: {why}");
                return 10;
            }
        };
        let t = TestNs::new("hugetlb-hostile");
        let me = Cred::root(std::process::id() as i32);
        // A file left under the first serial by an earlier arena with this
        // device and inode, holding a page: replaced, its page freed.
        {
            use std::os::unix::fs::{DirBuilderExt, MetadataExt};
            let m = std::fs::metadata(t.path()).unwrap();
            let (maj, min) = (libc::major(m.dev()), libc::minor(m.dev()));
            let stale = dir.join(format!("ipcns-{maj}.{min}-{}", m.ino()));
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&stale)
                .unwrap();
            let f = File::create(stale.join("shm.1")).unwrap();
            f.set_len(PAGE as u64).unwrap();
            // SAFETY: a descriptor we own; no pointer.
            let r =
                unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, PAGE as i64) };
            if r != 0 || meminfo("Free") != 1 {
                eprintln!(
                    "the stale file took no page ({r}, {} free)",
                    meminfo("Free")
                );
                return 4;
            }
        }
        let id =
            t.ns.shmget(&me, IPC_PRIVATE, PAGE as u64, SHM_HUGETLB | 0o600)
                .unwrap();
        let r =
            t.ns.regions()
                .into_iter()
                .find(|r| r.name.starts_with("shm.slot[") && r.name.ends_with(".huge"))
                .expect("the segment's record");
        let arena = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(t.path())
            .unwrap();
        let mut orig = [0u8; 16];
        arena.read_exact_at(&mut orig, r.off).unwrap();
        if meminfo("Free") != 2 || meminfo("Rsvd") != 1 {
            eprintln!("the stale file's page was not freed");
            return 5;
        }
        let w0 = u64::from_ne_bytes(orig[..8].try_into().unwrap());
        let ino = u64::from_ne_bytes(orig[8..].try_into().unwrap());
        assert_eq!(w0 & 0xff, 21, "the record names 2 MiB pages");
        let hostile = [
            (0, 0),
            (5, ino),
            (w0 ^ (1 << 12), ino),
            (w0 ^ (1 << 32), ino),
            (w0, ino + 1),
            (w0, 0),
            (w0 | 0x200, ino),
            ((w0 & !0xff) | 30, ino),
            (u64::MAX, u64::MAX),
        ];
        for (a, b) in hostile {
            let mut bytes = [0u8; 16];
            bytes[..8].copy_from_slice(&a.to_ne_bytes());
            bytes[8..].copy_from_slice(&b.to_ne_bytes());
            arena.write_all_at(&bytes, r.off).unwrap();
            let got = t.ns.shmat(&me, id, 0, 0);
            if got != Err(Errno::EIDRM) {
                eprintln!("record {a:#x} {b:#x}: shmat {got:?}");
                return 1;
            }
            let mut ds = shmid64_ds::default();
            assert_eq!(t.ns.shmctl(&me, id, IPC_STAT, ShmArg::Ds(&mut ds)), Ok(0));
            assert_eq!(ds.shm_segsz, PAGE as u64);
            let mut i = shm_info::default();
            assert!(
                t.ns.shmctl(&me, 0, SHM_INFO, ShmArg::ShmInfo(&mut i))
                    .is_ok()
            );
            assert_eq!(i.shm_rss, 0);
            assert!(t.ns.proc_text(&me, Mech::Shm).is_ok());
        }
        arena.write_all_at(&orig, r.off).unwrap();
        // A size past the file's end (shm_segsz, 96 bytes into the slot,
        // after the 96-byte head): the pages beyond would be SIGBUS.
        let slot =
            t.ns.regions()
                .into_iter()
                .find(|s| s.name == r.name.trim_end_matches(".huge"))
                .expect("the segment's slot");
        let size_at = slot.off + 96;
        arena
            .write_all_at(&(PAGE as u64 + 1).to_ne_bytes(), size_at)
            .unwrap();
        if t.ns.shmat(&me, id, 0, 0) != Err(Errno::EIDRM) {
            eprintln!("a size past the file's end was mapped");
            return 3;
        }
        arena
            .write_all_at(&(PAGE as u64).to_ne_bytes(), size_at)
            .unwrap();
        let a = t.ns.shmat(&me, id, 0, 0).unwrap();
        poke(a, 7, 1);
        assert_eq!(t.ns.shmdt(&me, a), Ok(0));
        // Removed with a hostile record: the file stays (its pages too)
        // until the namespace goes.
        arena.write_all_at(&[0xff; 16], r.off).unwrap();
        assert_eq!(t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None), Ok(0));
        let free = meminfo("Free");
        drop(t);
        let left = std::fs::read_dir(&dir).map_or(99, |d| d.count());
        unmount(&dir);
        if free != 1 || left != 0 || meminfo("Free") != 2 {
            eprintln!(
                "free {free} after the removal, {left} entries left, then free {}",
                meminfo("Free")
            );
            return 2;
        }
        0
    });
    assert_eq!(code, 0);
}

/// `IPCNS_HUGETLBFS` names the mount to use first: with two hugetlbfs
/// mounts, the segment's file is made on the one it names, and found
/// there by shmat; a name that is not a hugetlbfs mount is passed over.
#[test]
fn hugetlb_mount_named_by_env() {
    let Some(_pool) = pool_or_skip("hugetlb_mount_named_by_env", 2) else {
        return;
    };
    let code = support::fork_run(|| {
        let first = match private_hugetlbfs("env-a") {
            Ok(d) => d,
            Err(why) => {
                eprintln!("hugetlb_mount_named_by_env: {why}");
                return 10;
            }
        };
        let second =
            std::env::temp_dir().join(format!("ipcns-hugetlbfs-env-b-{}", std::process::id()));
        std::fs::create_dir_all(&second).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "hugetlbfs", "none"])
            .arg(&second)
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("mount -t hugetlbfs {second:?} failed");
            unmount(&first);
            return 11;
        }
        let t = TestNs::new("hugetlb-env");
        let me = Cred::root(std::process::id() as i32);
        let count = |d: &std::path::Path| std::fs::read_dir(d).map_or(99, |d| d.count());
        let mut code = 0;
        for (named, on) in [(&std::env::temp_dir(), &first), (&second, &second)] {
            // SAFETY: this forked child has one thread.
            unsafe { std::env::set_var("IPCNS_HUGETLBFS", named) };
            let id =
                t.ns.shmget(&me, IPC_PRIVATE, PAGE as u64, SHM_HUGETLB | 0o600)
                    .unwrap();
            let a = t.ns.shmat(&me, id, 0, 0).unwrap();
            poke(a, 1, 1);
            assert_eq!(t.ns.shmdt(&me, a), Ok(0));
            let (on_first, on_second) = (count(&first), count(&second));
            if (on_first, on_second) != if on == &first { (1, 0) } else { (1, 1) } {
                eprintln!(
                    "IPCNS_HUGETLBFS={named:?}: {on_first} dirs on the first, {on_second} on the second"
                );
                code = 1;
            }
            assert_eq!(t.ns.shmctl(&me, id, IPC_RMID, ShmArg::None), Ok(0));
        }
        drop(t);
        let left = count(&first) + count(&second);
        unmount(&second);
        unmount(&first);
        if left != 0 || meminfo("Free") != 2 {
            eprintln!("{left} left, {} free", meminfo("Free"));
            code = 2;
        }
        code
    });
    assert_eq!(code, 0);
}
