//! A hostile participant against a victim: one field of a live object
//! rewritten as another participant could (the arena is theirs to write),
//! and the victim's promises checked: no write past its buffer, no wait
//! past its timeout, no unbounded wait on a lock word naming a stranger,
//! no time or memory in proportion to a hostile list. Each case failed
//! before the change that made it hold (issue 13).
//!
//! # Safety
//! `waitpid` on our own child with a status word of ours; `setrlimit` of
//! our own limit in a forked child.
#![allow(unsafe_code)]

use crate::support::{self, TestNs};
use ipcns::abi::*;
use ipcns::sem::{SemArg, SemValues};
use ipcns::{Errno, Mech};
use std::time::{Duration, Instant};

/// `struct sem_array` field offsets in a slot (object.rs pins them).
const NSEMS: u64 = 96;
const UNDOS: u64 = 144;
/// An undo entry's `next_set` (sem/undo.rs pins it).
const NEXT_SET: u64 = 8;

fn op(num: u16, v: i16, flg: i32) -> sembuf {
    sembuf {
        sem_num: num,
        sem_op: v,
        sem_flg: flg as i16,
    }
}

fn ts(ms: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: ms / 1000,
        tv_nsec: (ms % 1000) * 1_000_000,
    }
}

/// GETALL's destination as the C ABI has it: memory of unknown extent.
/// Records how many values it was asked to take.
struct Unbounded(usize);

impl SemValues for Unbounded {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        self.0 = into.len();
        Ok(())
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        self.0 = vals.len();
        Ok(())
    }
}

#[test]
fn getall_never_copies_more_than_the_size_shown() {
    let t = TestNs::new("hostile-nsems");
    let ns = &t.ns;
    let me = ns.cred().unwrap();
    let id = ns.semget(&me, 0, 3, IPC_CREAT | 0o600).unwrap();
    let slot = ns.slot_offset(Mech::Sem, (id & 0x7fff) as u32);
    // Another participant says the set has 5 semaphores (it has room for
    // 5 inline): a GETALL sized by that would write 10 bytes into the
    // caller's 6.
    ns.arena_word(slot + NSEMS)
        .unwrap()
        .store(5, core::sync::atomic::Ordering::Relaxed);
    let mut dst = Unbounded(0);
    let r = ns.semctl(&me, id, 0, GETALL, SemArg::Array(&mut dst));
    println!(
        "GETALL after nsems 3 -> 5: {r:?}, {} values asked to be copied",
        dst.0
    );
    assert_eq!(r, Err(Errno::EUCLEAN));
    assert_eq!(dst.0, 0, "nothing copied");
    let mut src = Unbounded(0);
    assert_eq!(
        ns.semctl(&me, id, 0, SETALL, SemArg::Array(&mut src)),
        Err(Errno::EUCLEAN)
    );
    assert_eq!(src.0, 0, "nothing read");
    // A size the process is shown (IPC_STAT) is the one it sizes its
    // buffer by: GETALL then copies that many.
    let mut ds = semid64_ds::default();
    ns.semctl(&me, id, 0, IPC_STAT, SemArg::Ds(&mut ds))
        .unwrap();
    assert_eq!(ds.sem_nsems, 5);
    let mut dst = Unbounded(0);
    ns.semctl(&me, id, 0, GETALL, SemArg::Array(&mut dst))
        .unwrap();
    assert_eq!(dst.0, 5);
}

/// Spawns a process that maps no arena and sleeps: a live stranger.
fn stranger() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("run sleep")
}

#[test]
fn a_strangers_identity_in_a_lock_word_holds_nobody_for_long() {
    let t = TestNs::new("hostile-lockword");
    let ns = &t.ns;
    let me = ns.cred().unwrap();
    let id = ns.semget(&me, 0, 1, IPC_CREAT | 0o600).unwrap();
    ns.semctl(&me, id, 0, SETVAL, SemArg::Val(1)).unwrap();
    let mut s = stranger();
    let who = ipcns::thread_identity(s.id()).expect("the stranger's identity");
    let word = ns
        .arena_word(ns.slot_offset(Mech::Sem, (id & 0x7fff) as u32))
        .unwrap();
    let hold = || word.store(who, core::sync::atomic::Ordering::Relaxed);
    // A timeout holds: EAGAIN at the deadline, not when the lock frees.
    hold();
    let t0 = Instant::now();
    let r = ns.semtimedop(&me, id, &[op(0, -1, 0)], Some(&ts(10)));
    let timed = t0.elapsed();
    // IPC_NOWAIT does not wait on a lock for long.
    hold();
    let t0 = Instant::now();
    let nowait = ns.semop(&me, id, &[op(0, -1, IPC_NOWAIT)]);
    let nowait_took = t0.elapsed();
    // A call without either takes the stranger's word over (it maps no
    // arena of ours) after about a second.
    hold();
    let t0 = Instant::now();
    let val = ns.semctl(&me, id, 0, GETVAL, SemArg::None);
    let plain = t0.elapsed();
    let _ = s.kill();
    let _ = s.wait();
    println!(
        "lock word naming a live stranger: semtimedop(10 ms) {r:?} in {timed:?}; \
         IPC_NOWAIT {nowait:?} in {nowait_took:?}; GETVAL {val:?} in {plain:?}"
    );
    assert_eq!(r, Err(Errno::EAGAIN));
    assert!(timed < Duration::from_millis(500), "{timed:?}");
    assert!(nowait_took < Duration::from_millis(1600), "{nowait_took:?}");
    assert!(matches!(nowait, Ok(0) | Err(Errno::EAGAIN)), "{nowait:?}");
    assert!(matches!(val, Ok(0 | 1)), "{val:?}");
    assert!(plain < Duration::from_millis(2600), "{plain:?}");
    assert_eq!(ns.check().map(|_| ()), Ok(()));
}

#[test]
fn a_stopped_participant_holds_no_timed_call() {
    let t = TestNs::new("hostile-stopped");
    let ns = &t.ns;
    let me = ns.cred().unwrap();
    let id = ns.semget(&me, 0, 1, IPC_CREAT | 0o600).unwrap();
    ns.semctl(&me, id, 0, SETVAL, SemArg::Val(1)).unwrap();
    let path = t.path().to_path_buf();
    let slot = ns.slot_offset(Mech::Sem, (id & 0x7fff) as u32);
    // A participant that takes the set's lock (its own identity in the
    // word) and is stopped there.
    let child = support::fork_child(|| {
        let Ok(ns) = ipcns::Namespace::open_at(&path) else {
            return 1;
        };
        let tid = ipcns::sys::process::gettid() as u32;
        let Some(who) = ipcns::thread_identity(tid) else {
            return 2;
        };
        ns.arena_word(slot)
            .unwrap()
            .store(who, core::sync::atomic::Ordering::Relaxed);
        let _ = ipcns::sys::process::kill(ipcns::sys::process::getpid(), libc::SIGSTOP);
        0
    });
    let mut status = 0;
    // SAFETY: waits for our own child.
    let r = unsafe { libc::waitpid(child, &mut status, libc::WUNTRACED) };
    assert_eq!(r, child);
    assert!(libc::WIFSTOPPED(status), "the holder stopped");
    let t0 = Instant::now();
    let timed = ns.semtimedop(&me, id, &[op(0, -1, 0)], Some(&ts(10)));
    let timed_took = t0.elapsed();
    let t0 = Instant::now();
    let nowait = ns.semop(&me, id, &[op(0, -1, IPC_NOWAIT)]);
    let nowait_took = t0.elapsed();
    support::kill(child);
    support::wait_child(child);
    let after = ns.semctl(&me, id, 0, GETVAL, SemArg::None);
    println!(
        "a stopped participant holding the set: semtimedop(10 ms) {timed:?} in {timed_took:?}; \
         IPC_NOWAIT {nowait:?} in {nowait_took:?}; after its death GETVAL {after:?}"
    );
    assert_eq!(timed, Err(Errno::EAGAIN));
    assert!(timed_took < Duration::from_millis(300), "{timed_took:?}");
    assert_eq!(nowait, Err(Errno::EAGAIN));
    assert!(nowait_took < Duration::from_millis(1600), "{nowait_took:?}");
    assert_eq!(after, Ok(1));
    assert_eq!(ns.check().map(|_| ()), Ok(()));
}

#[test]
fn an_undo_list_cycle_costs_neither_time_nor_memory() {
    let t = TestNs::new("hostile-undo-cycle");
    let ns = &t.ns;
    let me = ns.cred().unwrap();
    let id = ns.semget(&me, 0, 2, IPC_CREAT | 0o600).unwrap();
    ns.semctl(&me, id, 0, SETVAL, SemArg::Val(5)).unwrap();
    ns.semop(&me, id, &[op(0, -1, SEM_UNDO.into())]).unwrap();
    let slot = ns.slot_offset(Mech::Sem, (id & 0x7fff) as u32);
    let relaxed = core::sync::atomic::Ordering::Relaxed;
    let entry = ns.arena_word(slot + UNDOS).unwrap().load(relaxed);
    assert_ne!(entry, 0, "the SEM_UNDO entry");
    // A one-entry cycle on the set's list.
    ns.arena_word(entry + NEXT_SET)
        .unwrap()
        .store(entry, relaxed);
    let path = t.path().to_path_buf();
    // Another process with an address-space limit a little above what it
    // maps: an allocation in proportion to the list would fail (and a
    // failed allocation must be an errno, never an abort).
    let code = support::fork_child(|| {
        let Ok(ns) = ipcns::Namespace::open_at(&path) else {
            return 1;
        };
        let me = ns.cred().unwrap();
        let vm = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmSize:"))
                    .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(0);
        let limit = libc::rlimit {
            rlim_cur: (vm + 256 * 1024) * 1024,
            rlim_max: (vm + 256 * 1024) * 1024,
        };
        // SAFETY: sets our own limit from a struct of ours.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
        let t0 = Instant::now();
        let a = ns.semop(&me, id, &[op(1, 1, SEM_UNDO.into())]);
        let b = ns.semctl(&me, id, 0, SETVAL, SemArg::Val(3));
        let c = ns.semctl(&me, id, 0, IPC_RMID, SemArg::None);
        let took = t0.elapsed();
        println!("undo cycle: semop {a:?}, SETVAL {b:?}, IPC_RMID {c:?} in {took:?}");
        if a.is_err() || b.is_err() || c.is_err() {
            return 3;
        }
        if took > Duration::from_millis(500) {
            return 4;
        }
        0
    });
    let status = support::wait_child(code);
    assert_eq!(
        status, 0,
        "the victim's verdict (3: a call failed, 4: too slow)"
    );
    // The namespace answers after it, and the check never hangs.
    let t0 = Instant::now();
    let _ = ns.problems();
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_free_list_loop_is_reported_at_once_and_every_held_lock_named() {
    let t = TestNs::new("hostile-freeloop");
    let ns = &t.ns;
    let me = ns.cred().unwrap();
    let relaxed = core::sync::atomic::Ordering::Relaxed;
    // A 32 KiB block (a class without per-cpu caches) freed: the head of
    // its class's list; its link made to point at itself.
    let b = ns.heap_alloc(32 << 10).unwrap();
    ns.heap_free(b, 32 << 10).unwrap();
    let f = ns.facts();
    let head = f.heap_state + 48 + 10 * 8;
    assert_eq!(
        ns.arena_word(head).unwrap().load(relaxed),
        b,
        "the list's head"
    );
    ns.arena_word(b).unwrap().store(b, relaxed);
    let t0 = Instant::now();
    let (_, problems) = ns.problems();
    let stats = ns.heap_stats();
    let took = t0.elapsed();
    println!("a one-block free-list loop: {problems:?} in {took:?}; {stats:?}");
    assert!(problems.iter().any(|p| p.contains("loop")), "{problems:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Every lock held is named, an object's too.
    let id = ns.semget(&me, 0, 1, IPC_CREAT | 0o600).unwrap();
    let idx = (id & 0x7fff) as u32;
    let mut s = stranger();
    let who = ipcns::thread_identity(s.id()).unwrap();
    ns.arena_word(ns.slot_offset(Mech::Sem, idx))
        .unwrap()
        .store(who, relaxed);
    let held = ns.lock_holders();
    let _ = s.kill();
    let _ = s.wait();
    println!("held: {held:?}");
    assert!(
        held.iter()
            .any(|(name, h)| name == &format!("sem {idx}") && h.tid == s.id())
    );
}
