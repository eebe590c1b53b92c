//! # ipcns-rseq: restartable sequences for Rust
//!
//! Per-cpu data without atomic instructions (seed 004, Linux's `rseq(2)`):
//! the kernel keeps the current cpu number in a per-thread area and restarts
//! a short critical section if the thread is preempted, migrated or signalled
//! before its final store, so a per-cpu update is a plain load, add and store.
//!
//! ## Modes
//!
//! [`mode()`] reports one of three, chosen once per process:
//!
//! - [`Mode::Glibc`]: glibc 2.35+ registered an area for every thread; it is
//!   found through `__rseq_offset`/`__rseq_size` (looked up with `dlsym`, so
//!   the crate also runs on older glibc). No second registration is made.
//! - [`Mode::Own`]: glibc did not register (`GLIBC_TUNABLES=glibc.pthread.rseq=0`):
//!   each thread registers an area in its TLS, sized and aligned as the kernel
//!   asks (`AT_RSEQ_FEATURE_SIZE`, `AT_RSEQ_ALIGN`), unregistered at exit.
//! - [`Mode::Fallback`]: no rseq (old kernel, seccomp): `sched_getcpu` plus
//!   atomics. Every operation stays correct.
//!
//! ## Layers
//!
//! - reads: [`cpu_id`], [`cpu_id_start`], [`node_id`], [`mm_cid`] (each
//!   `None` where unavailable), [`current_cpu`]; [`ThreadArea`] keeps the
//!   area's address for a loop, so each read is one load;
//! - [`ops`]: the critical sections (load-add-store, load-compare-store,
//!   double compare, try-store-then-store, list push and pop over
//!   [`Blocks`], bounded stack push and pop), indexed by
//!   cpu or `mm_cid`, each returning [`Outcome`] success / miss / abort;
//!   [`ops::strict`]: the same with no atomic fallback (`None` where no
//!   section can run), for memory every user must update in sections;
//! - safe types: [`PerCpu`], [`PerCpuCounter`], [`FreeList`] (per-cpu stacks
//!   of 32-bit block indexes, so regions of 4 GiB and more; every index read
//!   from shared memory is checked before use, see [`BadIndex`]), usable in
//!   memory mapped `MAP_SHARED` by several processes.
//!
//! ## Example
//!
//! ```
//! use ipcns_rseq::{mode, PerCpuCounter, Mode};
//! use std::sync::Arc;
//!
//! let hits = Arc::new(PerCpuCounter::new());
//! let workers: Vec<_> = (0..4)
//!     .map(|_| {
//!         let hits = Arc::clone(&hits);
//!         std::thread::spawn(move || (0..1000).for_each(|_| hits.inc()))
//!     })
//!     .collect();
//! workers.into_iter().for_each(|w| w.join().unwrap());
//! assert_eq!(hits.sum(), 4000);
//! println!("mode {}, cpu {:?}", mode(), ipcns_rseq::cpu_id());
//! assert!(matches!(mode(), Mode::Glibc | Mode::Own | Mode::Fallback));
//! ```
//!
//! Only x86-64 is implemented; other targets fail to compile with a message.

pub mod abi;
mod area;
mod counter;
mod cpus;
mod freelist;
mod kinds;
mod mode;
pub mod ops;
mod percpu;

pub use counter::PerCpuCounter;
pub use cpus::{parse_cpu_list, possible_cpus, possible_cpus_from};
pub use freelist::FreeList;
pub use kinds::{Errno, Mode};
pub use mode::{
    Info, ThreadArea, cpu_id, cpu_id_start, current_cpu, info, mm_cid, mm_cid_available, mode,
    node_id, sched_getcpu, thread_registered,
};
pub use ops::{BadCount, BadIndex, Blocks, Index, Outcome, Slots};
pub use percpu::{PerCpu, Slot};
