//! The terminal of `ipcns top`'s live view: keys read one at a time
//! (canonical mode and echo off, signals left on), the terminal's
//! settings given back when the view ends, and Ctrl-C (SIGINT) or SIGTERM
//! ending the view through a flag instead of killing the process with the
//! terminal left raw.
//!
//! # Safety
//! `isatty`, `tcgetpgrp`, `getpgrp`, `tcgetattr`, `tcsetattr`, `poll`, `read` and `sigaction` on
//! standard input, a `termios` and a `pollfd` of our own stack, and a
//! handler that only stores to an atomic (async-signal-safe).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Whether SIGINT or SIGTERM asked the view to end (only once [`Keys`]
/// caught them).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Whether standard output is a terminal.
pub fn stdout_is_terminal() -> bool {
    // SAFETY: isatty on a descriptor number (module doc).
    unsafe { libc::isatty(1) == 1 }
}

/// Standard input in key-at-a-time mode, until dropped.
pub struct Keys {
    saved: libc::termios,
}

impl Keys {
    /// None when standard input is not a terminal (the view then only
    /// ends at Ctrl-C, as `watch` does).
    pub fn open() -> Option<Keys> {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with our handler and no
            // SA_RESTART, so that poll returns at the signal (module doc).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        // SAFETY: a termios is plain data; zeroed is a valid value.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: isatty, tcgetpgrp, getpgrp and tcgetattr into our own
        // termios (module doc). In the background (`ipcns top &`,
        // `timeout`), changing the terminal would stop us (SIGTTOU): no
        // keys then.
        let terminal = unsafe {
            libc::isatty(0) == 1
                && libc::tcgetpgrp(0) == libc::getpgrp()
                && libc::tcgetattr(0, &mut t) == 0
        };
        if !terminal {
            return None;
        }
        let saved = t;
        t.c_lflag &= !(libc::ICANON | libc::ECHO);
        // A read returns at once, with what is there (poll waits).
        t.c_cc[libc::VMIN] = 0;
        t.c_cc[libc::VTIME] = 0;
        // SAFETY: tcsetattr from our own termios (module doc).
        if unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) } != 0 {
            return None;
        }
        Some(Keys { saved })
    }

    /// The next key pressed within `wait`, if any; `q` at SIGINT or
    /// SIGTERM and when the terminal hangs up.
    pub fn next(&mut self, wait: Duration) -> Option<u8> {
        let mut p = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: poll on our own pollfd (module doc).
        if unsafe { libc::poll(&mut p, 1, ms) } != 1 {
            // A signal that asks the view to end is a q.
            return interrupted().then_some(b'q');
        }
        if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            // The terminal is gone: quit.
            return Some(b'q');
        }
        let mut b = 0u8;
        // SAFETY: read of one byte into our own variable (module doc).
        let n = unsafe { libc::read(0, (&mut b as *mut u8).cast(), 1) };
        (n == 1).then_some(b)
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: tcsetattr from the settings saved at open (module doc).
        unsafe { libc::tcsetattr(0, libc::TCSANOW, &self.saved) };
        println!();
    }
}
