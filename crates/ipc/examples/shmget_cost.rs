//! What a `shmget` + `IPC_RMID` pair costs per segment size: ipcns with
//! the segment's pages reserved at shmget (the default), ipcns with
//! SHM_NORESERVE (a sparse file, as before the reservation), and the host
//! kernel (which reserves nothing). Best of 5 rounds, in µs per pair, on a
//! namespace in /dev/shm.
//!
//! `cargo run --release -p ipcns --example shmget_cost`

use ipcns::abi::*;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Namespace};
use std::path::PathBuf;
use std::time::Instant;

/// Best of 5 rounds of `n` calls of `f`, in µs per call.
fn best(n: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let path = PathBuf::from(format!("/dev/shm/ipcns.shmget-cost-{}", std::process::id()));
    let ns = Namespace::create_at(&path, CreateOptions::default()).expect("create a namespace");
    let root = Cred::root(std::process::id() as i32);
    println!(
        "{:>10} {:>12} {:>12} {:>12}",
        "size", "reserved", "noreserve", "kernel"
    );
    for size in [4096u64, 1 << 20, 64 << 20] {
        let n = if size > 1 << 20 { 50 } else { 2000 };
        let ours = |flg: i32| {
            best(n, || {
                let id = ns.shmget(&root, 0, size, flg | 0o600).expect("shmget");
                ns.shmctl(&root, id, IPC_RMID, ShmArg::None)
                    .expect("IPC_RMID");
            })
        };
        let (reserved, sparse) = (ours(0), ours(SHM_NORESERVE));
        let kernel = best(n, || {
            // SAFETY: plain system calls on the host's System V IPC, with
            // no pointer but a null one IPC_RMID ignores.
            #[allow(unsafe_code)]
            unsafe {
                let id = libc::shmget(libc::IPC_PRIVATE, size as usize, 0o600);
                assert!(id >= 0, "the kernel's shmget");
                libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
            }
        });
        println!("{size:>10} {reserved:>10.1}us {sparse:>10.1}us {kernel:>10.1}us");
    }
    drop(ns);
    let _ = Namespace::remove_at(&path);
}
