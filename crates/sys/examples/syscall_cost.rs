//! What a raw system call costs beside libc's way of making the same call
//! (`libc::syscall` included: measuring it is the point): why `ipcns_sys`
//! keeps libc's `clock_gettime` (the vDSO: no kernel entry) and makes
//! everything else raw (a kernel entry either way).
//!
//! `cargo run --release -p ipcns-sys --example syscall_cost`: ns per call,
//! medians of 7 rounds of 1,000,000 calls (200,000 for real system calls).

use ipcns_sys as sys;
use std::hint::black_box;
use std::time::Instant;

const ROUNDS: usize = 7;

fn median_ns(iters: u64, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[ROUNDS / 2]
}

#[allow(unsafe_code)]
fn main() {
    let clocks = [
        ("CLOCK_MONOTONIC", libc::CLOCK_MONOTONIC),
        ("CLOCK_REALTIME_COARSE", libc::CLOCK_REALTIME_COARSE),
    ];
    println!("{:<44} {:>10} {:>10}", "call", "libc ns", "raw ns");
    for (name, c) in clocks {
        let libc_ns = median_ns(1_000_000, || {
            black_box(sys::time::clock_ns(black_box(c)));
        });
        let raw_ns = median_ns(200_000, || {
            black_box(sys::time::clock_ns_raw(black_box(c)));
        });
        println!(
            "{:<44} {libc_ns:>10.1} {raw_ns:>10.1}",
            format!("clock_gettime({name})")
        );
    }
    let libc_ns = median_ns(200_000, || {
        // SAFETY: getpid takes nothing.
        black_box(unsafe { libc::getpid() });
    });
    let raw_ns = median_ns(200_000, || {
        black_box(sys::process::getpid());
    });
    println!("{:<44} {libc_ns:>10.1} {raw_ns:>10.1}", "getpid()");
    let word = core::sync::atomic::AtomicU32::new(0);
    let libc_ns = median_ns(200_000, || {
        // SAFETY: FUTEX_WAKE on a live word; no other pointer.
        black_box(unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) });
    });
    let raw_ns = median_ns(200_000, || {
        black_box(sys::futex::wake(&word, 1));
    });
    println!(
        "{:<44} {libc_ns:>10.1} {raw_ns:>10.1}",
        "futex(FUTEX_WAKE), nobody waiting (syscall)"
    );
}
