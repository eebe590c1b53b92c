//! Temporary: shmget + IPC_RMID cost per size, reserved vs SHM_NORESERVE, and the kernel's.
use ipcns::abi::*;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Namespace};
use std::time::Instant;

fn main() {
    let dir = std::env::temp_dir().join(format!("shmget-cost-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let ns = Namespace::create_at(
        &std::path::Path::new("/dev/shm").join(format!("ipcns.cost{}", std::process::id())),
        CreateOptions::default(),
    )
    .unwrap();
    let root = Cred::root(std::process::id() as i32);
    for size in [4096u64, 1 << 20, 64 << 20] {
        let n = if size > (1 << 20) { 50 } else { 2000 };
        for (name, flg) in [("reserved", 0), ("noreserve", SHM_NORESERVE)] {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = Instant::now();
                for _ in 0..n {
                    let id = ns.shmget(&root, 0, size, flg | 0o600).unwrap();
                    ns.shmctl(&root, id, IPC_RMID, ShmArg::None).unwrap();
                }
                best = best.min(t.elapsed().as_secs_f64() * 1e6 / n as f64);
            }
            println!("ipcns {name:9} {size:>9}: {best:8.1} us per shmget+IPC_RMID");
        }
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..n {
                // SAFETY: plain system calls.
                #[allow(unsafe_code)]
                unsafe {
                    let id = libc::shmget(0, size as usize, 0o600);
                    assert!(id >= 0);
                    libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
                }
            }
            best = best.min(t.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
        println!("kernel              {size:>9}: {best:8.1} us per shmget+IPC_RMID");
    }
    let _ = Namespace::remove_at(
        &std::path::Path::new("/dev/shm").join(format!("ipcns.cost{}", std::process::id())),
    );
}
