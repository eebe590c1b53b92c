//! Mode detection and the reads (cpu_id, cpu_id_start, node_id, mm_cid) in
//! all three modes; own registrations are gone after the thread's exit.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use common::*;
use ipcns_rseq::{Mode, abi};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

fn reads() {
    let info = ipcns_rseq::info();
    let usable = info.registered_size.min(info.feature_size);
    let rseq = info.mode != Mode::Fallback;
    assert_eq!(info.fallback_reason.is_some(), !rseq);
    if info.mode == Mode::Fallback {
        assert_eq!(
            info.fallback_reason,
            Some(ipcns_rseq::Errno(libc::ENOSYS)),
            "{info:?}"
        );
    }
    std::thread::spawn(move || {
        // Looked up once: its reads must follow the thread from cpu to cpu.
        let first = ipcns_rseq::ThreadArea::current();
        for cpu in 0..std::thread::available_parallelism().map_or(1, |n| n.get()) {
            set_affinity(gettid(), Some(cpu));
            std::thread::yield_now(); // make sure we run on it
            assert_eq!(ipcns_rseq::current_cpu() as usize, cpu);
            assert_eq!(ipcns_rseq::sched_getcpu() as usize, cpu);
            assert_eq!(ipcns_rseq::thread_registered(), rseq);
            assert_eq!(
                ipcns_rseq::cpu_id().map(|c| c as usize),
                rseq.then_some(cpu)
            );
            assert_eq!(
                ipcns_rseq::cpu_id_start().map(|c| c as usize),
                rseq.then_some(cpu)
            );
            let area = ipcns_rseq::ThreadArea::current();
            assert_eq!(area.is_some(), rseq);
            if let Some(a) = area {
                assert_eq!(a.cpu_id().map(|c| c as usize), Some(cpu));
                assert_eq!(a.cpu_id_start() as usize, cpu);
            }
            if let Some(a) = first {
                assert_eq!(a.as_ptr(), area.unwrap().as_ptr());
                assert_eq!(a.cpu_id().map(|c| c as usize), Some(cpu));
            }
            let node = ipcns_rseq::node_id();
            assert_eq!(
                node.is_some(),
                rseq && usable >= 24,
                "node_id {node:?} with {info:?}"
            );
            let cid = ipcns_rseq::mm_cid();
            assert_eq!(
                cid.is_some(),
                rseq && usable >= 28,
                "mm_cid {cid:?} with {info:?}"
            );
            assert_eq!(ipcns_rseq::mm_cid_available(), cid.is_some());
            if let Some(c) = cid {
                assert!((c as usize) < ipcns_rseq::possible_cpus());
            }
            eprintln!(
                "[reads] mode {}: cpu {cpu}, node_id {node:?}, mm_cid {cid:?}",
                info.mode
            );
        }
    })
    .join()
    .unwrap();
}

#[test]
fn mode_and_reads() {
    in_all_modes("mode_and_reads", reads);
}

#[test]
fn glibc_mode_is_found_here() {
    if role().is_some() {
        return;
    }
    // This system's glibc (2.35+) registers every thread unless told not to.
    if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("rseq=0")) {
        eprintln!("glibc_mode_is_found_here: skipped, GLIBC_TUNABLES disables glibc's rseq");
        return;
    }
    assert_eq!(ipcns_rseq::mode(), Mode::Glibc, "{:?}", ipcns_rseq::info());
}

/// What a thread-local destructor that runs after the crate's own saw:
/// whether the thread is registered, a fresh registration's result and errno,
/// and the `cpu_id` read through a `ThreadArea` looked up while the thread ran.
type Seen = (bool, i64, i32, Option<Option<u32>>);

struct Probe(Arc<Mutex<Option<Seen>>>, Option<ipcns_rseq::ThreadArea>);

impl Drop for Probe {
    fn drop(&mut self) {
        #[repr(C, align(32))]
        struct Area([u8; 32]);
        let mut area = Area([0; 32]);
        let registered = ipcns_rseq::thread_registered();
        let late_read = self.1.map(|a| a.cpu_id());
        // A fresh registration succeeds only if no area is registered now.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rseq,
                &mut area as *mut Area,
                32,
                0,
                abi::SIGNATURE,
            )
        };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if r == 0 {
            let u = unsafe {
                libc::syscall(
                    libc::SYS_rseq,
                    &mut area as *mut Area,
                    32,
                    abi::FLAG_UNREGISTER,
                    abi::SIGNATURE,
                )
            };
            assert_eq!(u, 0);
        }
        *self.0.lock().unwrap() = Some((registered, r, errno, late_read));
    }
}

thread_local! {
    static PROBE: RefCell<Option<Probe>> = const { RefCell::new(None) };
}

fn exit_unregisters() {
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    std::thread::spawn(move || {
        PROBE.with(|p| *p.borrow_mut() = Some(Probe(s, None))); // destructor registered first: runs last
        ipcns_rseq::PerCpuCounter::new().inc(); // the crate's registration (own mode)
        let area = ipcns_rseq::ThreadArea::current();
        PROBE.with(|p| p.borrow_mut().as_mut().unwrap().1 = area);
    })
    .join()
    .unwrap();
    let (registered, r, errno, late_read) = seen.lock().unwrap().take().expect("probe ran");
    eprintln!(
        "[exit] mode {}: after exit destructors registered={registered} rseq()={r} errno={errno} \
         ThreadArea::cpu_id()={late_read:?}",
        ipcns_rseq::mode()
    );
    match ipcns_rseq::mode() {
        // glibc's area is still registered: the handle still reads a cpu.
        Mode::Glibc => assert!(matches!(late_read, Some(Some(_)))),
        // ours was unregistered: the kernel reset cpu_id, the handle says so.
        Mode::Own => assert_eq!(late_read, Some(None)),
        Mode::Fallback => assert_eq!(late_read, None),
    }
    match ipcns_rseq::mode() {
        // glibc's registration stays until the thread is gone: ours was never made.
        Mode::Glibc => {
            assert!(registered && r == -1 && (errno == libc::EBUSY || errno == libc::EINVAL))
        }
        // ours was removed by its destructor: the kernel accepts a new one.
        Mode::Own => assert!(!registered && r == 0),
        Mode::Fallback => assert!(!registered && r == -1 && errno == libc::ENOSYS),
    }
}

#[test]
fn thread_exit_unregisters() {
    in_all_modes("thread_exit_unregisters", exit_unregisters);
}
