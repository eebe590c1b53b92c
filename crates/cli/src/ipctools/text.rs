//! The text shapes that ipcs.c prints with `printf`, shared by the lists
//! ([`super::lists`]) and the details of one object ([`super::details`]).

use super::host::{ctime, group_name, user_name};
use super::rows::Perm;
use std::io::Write;

/// `printf("%-W.Ps", s)` on bytes: truncate to `prec`, pad to `width`.
pub(super) fn pad(out: &mut Vec<u8>, s: &[u8], width: usize, prec: Option<usize>) {
    let s = match prec {
        Some(p) if s.len() > p => &s[..p],
        _ => s,
    };
    out.extend_from_slice(s);
    out.resize(out.len() + width.saturating_sub(s.len()), b' ');
}

/// `ctime64(&t)`, or the text the tool prints for 0 (`"Not set"`) when
/// `not_set` is given.
pub(super) fn time_text(t: i64, not_set: bool) -> Vec<u8> {
    if t == 0 && not_set {
        return b"Not set".to_vec();
    }
    ctime(t).unwrap_or_default().into_bytes()
}

/// `" %-20.16s"` of `ctime + 4` (month, day and time), or `Not set`.
pub(super) fn short_time(out: &mut Vec<u8>, t: i64) {
    out.push(b' ');
    let text = if t != 0 {
        let c = time_text(t, false);
        c.get(4..).map(<[u8]>::to_vec).unwrap_or_default()
    } else {
        b"Not set".to_vec()
    };
    pad(out, &text, 20, Some(16));
}

/// `"%-W d %-10.10s"`: the id, then the owner's name or number.
pub(super) fn id_owner(out: &mut Vec<u8>, id: i32, id_width: usize, uid: u32) {
    let _ = write!(out, "{id:<id_width$} ");
    match user_name(uid) {
        Some(n) => pad(out, &n, 10, Some(10)),
        None => {
            let _ = write!(out, "{uid:<10}");
        }
    }
}

/// `ipc_print_perms`: id, mode, then creator and owner names or numbers.
pub(super) fn print_perms(out: &mut Vec<u8>, p: &Perm) {
    let _ = write!(out, "{:<10} {:<10o}", p.id, p.mode & 0o777);
    let name = |out: &mut Vec<u8>, n: Option<Vec<u8>>, num: u32, last: bool| {
        out.push(b' ');
        match n {
            Some(n) => pad(out, &n, 10, None),
            None => {
                let _ = write!(out, "{num:<10}");
            }
        }
        if last {
            out.push(b'\n');
        }
    };
    name(out, user_name(p.cuid), p.cuid, false);
    name(out, group_name(p.cgid), p.cgid, false);
    name(out, user_name(p.uid), p.uid, false);
    name(out, group_name(p.gid), p.gid, true);
}
