//! The namespace's cleanup after dead descendants, on a thread of its own:
//! `Namespace::reap_exited` takes the namespace's locks, and a lock held by
//! a stopped participant (SIGSTOP, a debugger) would otherwise stall the
//! loop that forwards signals and notices the program's exit.

use ipcns::Namespace;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long one pass waits for the arena's locks, in all.
const PASS_LOCKS: Duration = Duration::from_secs(1);

/// Requests made and requests served: a request made after the thread
/// started a pass is served by the next pass (the pass must see the
/// process that died after it started).
#[derive(Default)]
struct Counts {
    wanted: u64,
    done: u64,
}

#[derive(Default)]
pub struct Shared {
    counts: Mutex<Counts>,
    changed: Condvar,
}

impl Shared {
    fn counts(&self) -> MutexGuard<'_, Counts> {
        // Nothing panics while holding it; a poisoned lock's data is fine.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `reap_exited` when asked: on its thread, or in the caller if no
/// thread could be started.
pub enum Reaper {
    Thread(Arc<Shared>),
    Inline(Arc<Namespace>),
}

impl Reaper {
    /// Starts the thread, which owns `ns` from now on.
    pub fn start(ns: Arc<Namespace>) -> Reaper {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        // The namespace comes back if the thread cannot start.
        let ns = std::sync::Mutex::new(Some(ns));
        let ns = Arc::new(ns);
        let theirs = Arc::clone(&ns);
        let started = std::thread::Builder::new()
            .name("ipcns-reaper".into())
            .spawn(move || {
                let taken = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(ns) = taken {
                    serve(&ns, &s);
                }
            });
        match started {
            Ok(_) => Reaper::Thread(shared),
            Err(_) => {
                let taken = ns.lock().unwrap_or_else(|e| e.into_inner()).take();
                match taken {
                    Some(ns) => Reaper::Inline(ns),
                    None => Reaper::Thread(shared),
                }
            }
        }
    }

    /// Asks for a pass (a descendant died); returns at once (inline: once
    /// done).
    pub fn request(&self) {
        match self {
            Reaper::Thread(shared) => {
                shared.counts().wanted += 1;
                shared.changed.notify_all();
            }
            Reaper::Inline(ns) => {
                let _ = ns.reap_exited();
            }
        }
    }

    /// Asks for a pass and waits for it up to `limit`; whether it ran.
    pub fn finish(&self, limit: Duration) -> bool {
        let shared = match self {
            Reaper::Thread(shared) => shared,
            Reaper::Inline(ns) => {
                let _ = ns.reap_exited();
                return true;
            }
        };
        let deadline = Instant::now() + limit;
        let mut c = shared.counts();
        c.wanted += 1;
        let want = c.wanted;
        shared.changed.notify_all();
        while c.done < want {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            c = shared
                .changed
                .wait_timeout(c, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// The thread: a pass of `reap_exited` per batch of requests, forever (the
/// process exits under it).
fn serve(ns: &Namespace, s: &Shared) {
    loop {
        let target = {
            let mut c = s.counts();
            while c.done == c.wanted {
                c = s.changed.wait(c).unwrap_or_else(|e| e.into_inner());
            }
            c.wanted
        };
        // Errors are the namespace's (a corrupt arena): the next pass, or
        // the next participant that meets the dead process, retries.
        // A lock kept by a stopped participant must not keep the passes
        // (and the end of the run) waiting: the next pass retries.
        let _ = ipcns::with_lock_limit(PASS_LOCKS, || ns.reap_exited());
        s.counts().done = target;
        s.changed.notify_all();
    }
}
