//! Thread identities as the arena's lock words name them (lock/mod.rs
//! Protocol: the tid in bits 0-29, a 32-bit tag of the boot and the
//! thread's start time in the high half; lock/os.rs `identify`), computed
//! here for threads of other processes, so that a hostile write can name a
//! live thread: a stranger (a process that maps no arena) or a
//! participant that never lets go. The formula is checked against the
//! identity the library itself writes into every wait record (`who`):
//! a change of the library's tag makes the test fail, not quietly test
//! junk words.

use std::process::{Child, Command, Stdio};

/// `boot_tag()` of lock/os.rs: 24 bits of FNV-1a over the boot id's text,
/// never 0.
fn boot_tag() -> u64 {
    let text = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text.iter().take(64) {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    ((h ^ (h >> 24) ^ (h >> 48)) & 0xff_ffff) | 1
}

/// `tag_of()` of lock/os.rs.
fn tag_of(boot: u64, start: u64) -> u32 {
    let mut x = (boot << 40) ^ start;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x as u32).max(1)
}

/// Field 22 of /proc/TID/stat: the thread's start time in ticks.
fn thread_start(tid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The identity of live thread `tid`, as a lock word would name it.
pub fn identity(tid: u32) -> Option<u64> {
    let start = thread_start(tid)?;
    Some((u64::from(tag_of(boot_tag(), start)) << 32) | u64::from(tid))
}

/// The low 30 bits of an identity: the thread id.
pub const TID_MASK: u64 = (1 << 30) - 1;

/// A live process that maps no arena (`sleep`, started by exec), killed
/// when dropped.
pub struct Stranger {
    child: Child,
    pub who: u64,
}

impl Stranger {
    pub fn start() -> Stranger {
        let child = Command::new("sleep")
            .arg("3600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a `sleep` to stand for a stranger");
        // Its start time is readable at once (the exec may still be under
        // way: the identity names the thread, whatever it runs).
        let who = identity(child.id()).expect("the stranger's /proc/PID/stat");
        Stranger { child, who }
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
