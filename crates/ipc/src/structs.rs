//! The `*ctl` structures as the bytes the kernel copies: `copy_*_to_user`
//! writes the whole structure with its padding zeroed (the kernel clears
//! it before filling it in), `copy_*_from_user` reads the whole structure
//! (so a buffer too short for it is EFAULT even if the fields used fit).
//! Field by field, in the order and at the offsets that `ipcns::abi` pins.

use crate::abi::{
    ipc64_perm, msginfo, msqid64_ds, semid64_ds, seminfo, shm_info, shmid64_ds, shminfo64,
};

/// Bytes written in order; the gaps stay zero.
struct Out<const N: usize> {
    b: [u8; N],
    at: usize,
}

impl<const N: usize> Out<N> {
    fn new() -> Self {
        Out { b: [0; N], at: 0 }
    }
    fn put(&mut self, bytes: &[u8]) -> &mut Self {
        let end = (self.at + bytes.len()).min(N);
        let n = end.saturating_sub(self.at);
        self.b[self.at..end].copy_from_slice(&bytes[..n]);
        self.at = end;
        self
    }
    fn skip(&mut self, n: usize) -> &mut Self {
        self.at = (self.at + n).min(N);
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.put(&v.to_ne_bytes())
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.put(&v.to_ne_bytes())
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.put(&v.to_ne_bytes())
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.put(&v.to_ne_bytes())
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.put(&v.to_ne_bytes())
    }
    fn done(&self) -> [u8; N] {
        self.b
    }
}

/// Bytes read in order.
struct In<'a> {
    b: &'a [u8],
    at: usize,
}

impl In<'_> {
    fn take<const K: usize>(&mut self) -> [u8; K] {
        let mut v = [0u8; K];
        if let Some(s) = self.b.get(self.at..self.at + K) {
            v.copy_from_slice(s);
        }
        self.at += K;
        v
    }
    fn skip(&mut self, n: usize) {
        self.at += n;
    }
    fn i32(&mut self) -> i32 {
        i32::from_ne_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_ne_bytes(self.take())
    }
    fn u16(&mut self) -> u16 {
        u16::from_ne_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_ne_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_ne_bytes(self.take())
    }
}

/// `struct ipc64_perm`: 48 bytes.
fn perm_out<const N: usize>(o: &mut Out<N>, p: &ipc64_perm) {
    o.i32(p.key)
        .u32(p.uid)
        .u32(p.gid)
        .u32(p.cuid)
        .u32(p.cgid)
        .u32(p.mode)
        .u16(p.seq)
        .skip(2 + 4 + 8 + 8);
}

fn perm_in(i: &mut In<'_>) -> ipc64_perm {
    let p = ipc64_perm {
        key: i.i32(),
        uid: i.u32(),
        gid: i.u32(),
        cuid: i.u32(),
        cgid: i.u32(),
        mode: i.u32(),
        seq: i.u16(),
        ..ipc64_perm::default()
    };
    i.skip(2 + 4 + 8 + 8);
    p
}

pub const SEMID_DS: usize = 104;
pub const MSQID_DS: usize = 120;
pub const SHMID_DS: usize = 112;

pub fn semid_out(d: &semid64_ds) -> [u8; SEMID_DS] {
    let mut o = Out::new();
    perm_out(&mut o, &d.sem_perm);
    o.i64(d.sem_otime)
        .skip(8)
        .i64(d.sem_ctime)
        .skip(8)
        .u64(d.sem_nsems);
    o.done()
}

pub fn semid_in(b: &[u8; SEMID_DS]) -> semid64_ds {
    let mut i = In { b, at: 0 };
    let sem_perm = perm_in(&mut i);
    let sem_otime = i.i64();
    i.skip(8);
    let sem_ctime = i.i64();
    i.skip(8);
    semid64_ds {
        sem_perm,
        sem_otime,
        sem_ctime,
        sem_nsems: i.u64(),
        ..semid64_ds::default()
    }
}

pub fn msqid_out(d: &msqid64_ds) -> [u8; MSQID_DS] {
    let mut o = Out::new();
    perm_out(&mut o, &d.msg_perm);
    o.i64(d.msg_stime)
        .i64(d.msg_rtime)
        .i64(d.msg_ctime)
        .u64(d.msg_cbytes)
        .u64(d.msg_qnum)
        .u64(d.msg_qbytes)
        .i32(d.msg_lspid)
        .i32(d.msg_lrpid);
    o.done()
}

pub fn msqid_in(b: &[u8; MSQID_DS]) -> msqid64_ds {
    let mut i = In { b, at: 0 };
    msqid64_ds {
        msg_perm: perm_in(&mut i),
        msg_stime: i.i64(),
        msg_rtime: i.i64(),
        msg_ctime: i.i64(),
        msg_cbytes: i.u64(),
        msg_qnum: i.u64(),
        msg_qbytes: i.u64(),
        msg_lspid: i.i32(),
        msg_lrpid: i.i32(),
        ..msqid64_ds::default()
    }
}

pub fn shmid_out(d: &shmid64_ds) -> [u8; SHMID_DS] {
    let mut o = Out::new();
    perm_out(&mut o, &d.shm_perm);
    o.u64(d.shm_segsz)
        .i64(d.shm_atime)
        .i64(d.shm_dtime)
        .i64(d.shm_ctime)
        .i32(d.shm_cpid)
        .i32(d.shm_lpid)
        .u64(d.shm_nattch);
    o.done()
}

pub fn shmid_in(b: &[u8; SHMID_DS]) -> shmid64_ds {
    let mut i = In { b, at: 0 };
    shmid64_ds {
        shm_perm: perm_in(&mut i),
        shm_segsz: i.u64(),
        shm_atime: i.i64(),
        shm_dtime: i.i64(),
        shm_ctime: i.i64(),
        shm_cpid: i.i32(),
        shm_lpid: i.i32(),
        shm_nattch: i.u64(),
        ..shmid64_ds::default()
    }
}

pub fn seminfo_out(s: &seminfo) -> [u8; 40] {
    let mut o = Out::new();
    for v in [
        s.semmap, s.semmni, s.semmns, s.semmnu, s.semmsl, s.semopm, s.semume, s.semusz, s.semvmx,
        s.semaem,
    ] {
        o.i32(v);
    }
    o.done()
}

pub fn msginfo_out(m: &msginfo) -> [u8; 32] {
    let mut o = Out::new();
    for v in [
        m.msgpool, m.msgmap, m.msgmax, m.msgmnb, m.msgmni, m.msgssz, m.msgtql,
    ] {
        o.i32(v);
    }
    o.u16(m.msgseg);
    o.done()
}

pub fn shminfo_out(s: &shminfo64) -> [u8; 72] {
    let mut o = Out::new();
    for v in [s.shmmax, s.shmmin, s.shmmni, s.shmseg, s.shmall] {
        o.u64(v);
    }
    o.done()
}

pub fn shm_info_out(s: &shm_info) -> [u8; 48] {
    let mut o = Out::new();
    o.i32(s.used_ids)
        .skip(4)
        .u64(s.shm_tot)
        .u64(s.shm_rss)
        .u64(s.shm_swp)
        .u64(s.swap_attempts)
        .u64(s.swap_successes);
    o.done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_offsets() {
        use core::mem::size_of;
        assert_eq!(size_of::<semid64_ds>(), SEMID_DS);
        assert_eq!(size_of::<msqid64_ds>(), MSQID_DS);
        assert_eq!(size_of::<shmid64_ds>(), SHMID_DS);
        let d = shmid64_ds {
            shm_nattch: 7,
            shm_cpid: 5,
            shm_perm: ipc64_perm {
                mode: 0o600,
                seq: 3,
                ..ipc64_perm::default()
            },
            ..shmid64_ds::default()
        };
        let b = shmid_out(&d);
        assert_eq!(b[88], 7);
        assert_eq!(b[80], 5);
        assert_eq!(u32::from_ne_bytes([b[20], b[21], b[22], b[23]]), 0o600);
        assert_eq!(b[24], 3);
        assert_eq!(shmid_in(&b), d);
        let m = msqid64_ds {
            msg_qbytes: 99,
            msg_lrpid: 4,
            ..msqid64_ds::default()
        };
        let b = msqid_out(&m);
        assert_eq!(b[88], 99);
        assert_eq!(b[100], 4);
        assert_eq!(msqid_in(&b), m);
        let s = semid64_ds {
            sem_ctime: 9,
            sem_nsems: 2,
            ..semid64_ds::default()
        };
        let b = semid_out(&s);
        assert_eq!(b[64], 9);
        assert_eq!(b[80], 2);
        assert_eq!(semid_in(&b), s);
        let i = msginfo {
            msgseg: 0x1234,
            ..msginfo::default()
        };
        assert_eq!(msginfo_out(&i)[28..32], [0x34, 0x12, 0, 0]);
        let i = shm_info {
            used_ids: 1,
            shm_tot: 2,
            ..shm_info::default()
        };
        let b = shm_info_out(&i);
        assert_eq!((b[0], b[4], b[8]), (1, 0, 2));
    }
}
