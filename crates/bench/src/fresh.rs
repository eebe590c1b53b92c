//! Where the kernel halves measure: a fresh IPC namespace of their own,
//! so that the host's objects and limits do not weigh on them.
//!
//! As root, `unshare(CLONE_NEWIPC)`. Otherwise inside a new user
//! namespace first (`unshare(CLONE_NEWUSER | CLONE_NEWIPC)`, as `unshare
//! -Ur --ipc` does): there the caller holds every capability over the IPC
//! namespace it made, so it may make more of them, enter them (setns) and
//! write their /proc/sys/kernel/sem_next_id (CAP_CHECKPOINT_RESTORE,
//! ipc/ipc_sysctl.c: `ipc_permissions`), and its own uid and gid are mapped
//! to 0 there (user_namespaces(7)). The System V calls measured are the
//! same code in the kernel either way (`ipc/sem.c` and its kin look the
//! namespace up from the task, not the user namespace). Only where no user
//! namespace can be made (a kernel or a sandbox that forbids them) does a
//! kernel half fail, with both reasons.

use anyhow::anyhow;
use std::os::unix::fs::MetadataExt;

/// How the fresh IPC namespace was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fresh {
    /// `unshare(CLONE_NEWIPC)`: as root.
    Ipc,
    /// Inside a new user namespace: not root.
    UserNs,
}

impl Fresh {
    /// The word a kernel child prints first, for its parent.
    pub fn word(self) -> &'static str {
        match self {
            Fresh::Ipc => "fresh",
            Fresh::UserNs => "fresh-userns",
        }
    }

    /// The [`Fresh::word`] said back, or None.
    pub fn from_word(w: &str) -> Option<Fresh> {
        match w {
            "fresh" => Some(Fresh::Ipc),
            "fresh-userns" => Some(Fresh::UserNs),
            _ => None,
        }
    }

    /// For a table's notes and the JSON.
    pub fn describe(self) -> &'static str {
        match self {
            Fresh::Ipc => "a fresh IPC namespace",
            Fresh::UserNs => "a fresh IPC namespace in a new user namespace (not root)",
        }
    }
}

/// Moves this (single-threaded) process into a fresh IPC namespace (see
/// the module doc). Called again, it makes another: inside the user
/// namespace made by the first call, a plain `unshare(CLONE_NEWIPC)`.
pub fn enter() -> anyhow::Result<Fresh> {
    let root_err = match ipcns_oracle::kernel::unshare_ipc() {
        Ok(()) => return Ok(Fresh::Ipc),
        Err(e) => e,
    };
    // Who we are, for the maps: the owner of our /proc/self.
    let me = std::fs::metadata("/proc/self")?;
    crate::capi::unshare_user_ipc().map_err(|e| {
        anyhow!(
            "unshare(CLONE_NEWIPC) needs root ({root_err}) and no user namespace could be made: {e}"
        )
    })?;
    // Our uid and gid as 0 inside: without the maps we would be nobody
    // (65534) there. The maps are a convenience (the capabilities come with
    // the namespace), so one that cannot be written is not an error.
    let _ = std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("0 {} 1", me.uid())))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("0 {} 1", me.gid())));
    Ok(Fresh::UserNs)
}
