//! SEM_UNDO entries of removed sets: one process creates a set, makes one
//! semop with SEM_UNDO on it and removes it, over and over (a program that
//! makes a private set per task does this). Linux frees the undo entry of
//! a removed set (`freeary` unlinks it, and the process drops it when it
//! next looks); ipcns must not keep one entry per removed set until the
//! process exits.
//!
//! Before 59746a6 each cycle left 64 bytes in use: 20,000 cycles kept
//! 1.28 MB, a million 64 MB.
//!
//! IPCNS_UNDO_CYCLES: how many cycles per shape (default 20,000; the
//! adversary ran a million).

use crate::corrupt::env_u64;
use crate::support::TestNs;
use ipcns::abi::*;
use ipcns::sem::SemArg;
use ipcns::{CreateOptions, Cred, Namespace};
use std::io::Write;
use std::time::Instant;

/// Key 0: a new set each time.
const IPC_PRIVATE: i32 = 0;

/// semop(`sem_op`, SEM_UNDO) on each of the `nsems` semaphores of set
/// `id` (set to `-sem_op` first when it takes).
fn undo_op(ns: &Namespace, cred: &Cred, id: i32, nsems: i32, sem_op: i16) {
    if sem_op < 0 {
        let mut all = vec![sem_op.unsigned_abs(); nsems as usize];
        ns.semctl(cred, id, 0, SETALL, SemArg::Array(&mut all))
            .expect("SETALL");
    }
    let ops: Vec<sembuf> = (0..nsems)
        .map(|n| sembuf {
            sem_num: n as u16,
            sem_op,
            sem_flg: SEM_UNDO,
        })
        .collect();
    ns.semop(cred, id, &ops).expect("semop with SEM_UNDO");
}

fn new_set(ns: &Namespace, cred: &Cred, nsems: i32) -> i32 {
    ns.semget(cred, IPC_PRIVATE, nsems, IPC_CREAT | 0o600)
        .expect("semget")
}

fn remove(ns: &Namespace, cred: &Cred, id: i32) {
    ns.semctl(cred, id, 0, IPC_RMID, SemArg::None)
        .expect("IPC_RMID");
}

/// One cycle: a set of `nsems`, semop(`sem_op`, SEM_UNDO), IPC_RMID.
fn cycle(ns: &Namespace, cred: &Cred, nsems: i32, sem_op: i16) {
    let id = new_set(ns, cred, nsems);
    undo_op(ns, cred, id, nsems, sem_op);
    remove(ns, cred, id);
}

/// The heap bytes an undo entry takes: what a SEM_UNDO semop adds while
/// every set the process has an entry for lives (a process keeps the
/// entry of its last removed set until it makes a new one, and frees it
/// then). Also proves that the entries are heap bytes this test sees.
fn entry_bytes(ns: &Namespace, cred: &Cred, nsems: i32, sem_op: i16) -> u64 {
    let a = new_set(ns, cred, nsems);
    undo_op(ns, cred, a, nsems, sem_op);
    let b = new_set(ns, cred, nsems);
    let without = ns.heap_in_use();
    undo_op(ns, cred, b, nsems, sem_op);
    let with = ns.heap_in_use();
    remove(ns, cred, a);
    remove(ns, cred, b);
    assert!(
        with > without,
        "nsems {nsems}: a SEM_UNDO semop on a new set adds no heap bytes \
         ({without} before, {with} after): the test no longer sees undo entries"
    );
    with - without
}

#[test]
fn undo_entries_of_removed_sets_do_not_stay_allocated() {
    let cycles = env_u64("IPCNS_UNDO_CYCLES", 20_000).max(2);
    let t = TestNs::in_dir(
        std::path::Path::new("/dev/shm"),
        "undoleak",
        CreateOptions::default(),
    );
    let ns = &t.ns;
    let cred = ns.cred().expect("credentials");
    // Shapes: +1 on one semaphore (the adversary's), -1 on each of three.
    for (nsems, sem_op) in [(1, 1), (3, -1)] {
        // Warm up: the process's record, the heap's caches.
        for _ in 0..100 {
            cycle(ns, &cred, nsems, sem_op);
        }
        let entry = entry_bytes(ns, &cred, nsems, sem_op);
        let before = ns.heap_in_use();
        let started = Instant::now();
        let mut half = 0;
        for i in 0..cycles {
            cycle(ns, &cred, nsems, sem_op);
            if i == cycles / 2 {
                half = ns.heap_in_use();
            }
        }
        let after = ns.heap_in_use();
        let grown = after as i64 - before as i64;
        let _ = writeln!(
            std::io::stderr(),
            "undoleak: {cycles} cycles of semget({nsems}) + semop({sem_op:+}, SEM_UNDO) + IPC_RMID \
             in {:.2} s: heap in use {before} bytes before, {half} halfway, {after} after \
             ({:.3} bytes per cycle; an undo entry takes {entry})",
            started.elapsed().as_secs_f64(),
            grown as f64 / cycles as f64,
        );
        // Not one entry's worth more, whatever the number of cycles.
        assert!(
            after < before + entry,
            "nsems {nsems}: the heap grew by {grown} bytes over {cycles} cycles \
             ({before} -> {half} halfway -> {after}): undo entries of removed sets stay allocated"
        );
    }
    ns.check().expect("the namespace is consistent");
}
