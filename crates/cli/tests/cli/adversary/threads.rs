//! The end of a process or of a program image while other threads are
//! inside IPC calls: `exit(0)` in main (exitrace.c), and `execve` by a
//! thread other than the leader while the leader sleeps in semop or msgrcv
//! (execrace.c). The kernel stops the other threads between two system
//! calls; the library's threads run in user space, so before 9681a85 an
//! exit could apply a thread's undo entry half-way (semval 99 or 101),
//! keep an attachment or hang, and an execve left the leader's sleep
//! queued (tokens and messages handed to a thread that no longer exists).

use super::{Setup, scale};
use std::time::Duration;

/// 100 runs (times the scale): a child's 4 threads loop on semop(-1, +1,
/// SEM_UNDO), msgsnd/msgrcv and shmat/shmdt when its main thread calls
/// exit(0) 1-10 ms after starting them. Right after each waitpid: semval
/// exactly 100, nattch 0; no child alive 5 s after its fork, no worker's
/// call failing, every child exiting 0; `ns check` ok.
#[test]
fn exit_in_main_while_threads_are_inside_ipc_calls() {
    const TEST: &str = "adversary::threads::exit_in_main_while_threads_are_inside_ipc_calls";
    let Some(s) = Setup::new(TEST, &["exitrace"]) else {
        return;
    };
    let runs = (100 * scale()).to_string();
    let args = [runs.as_str(), "4"];
    let limit = Duration::from_secs(60 * scale());
    let what = format!("exit in main with 4 threads in calls, {runs} runs");
    let k = s.kernel("exitrace", &args, &[], limit);
    k.show(&what);
    let i = s.ipcns("exitrace", &args, &[], limit);
    i.show(&what);
    for o in [&k, &i] {
        o.assert_figure(&what, "runs", &runs);
        o.assert_figure(&what, "semval", &format!("100:x{runs}"));
        o.assert_figure(&what, "nattch", &format!("0:x{runs}"));
        o.assert_figure(&what, "hung", "0");
        o.assert_figure(&what, "worker_errors", "0");
        o.assert_figure(&what, "abnormal", "0");
        o.assert_ok(&what);
    }
}

/// execrace.c's variant `v`, 10 runs (times the scale), on both sides:
/// each run's execve made once the leader sleeps in its call, the checks
/// made once the new image runs; the figures in `zero` must be 0.
fn exec(test: &str, v: &str, what: &str, zero: &[&str]) {
    let Some(s) = Setup::new(test, &["execrace", "execsleeper"]) else {
        return;
    };
    let runs = (10 * scale()).to_string();
    let sleeper = s.program("execsleeper");
    let args = [v, runs.as_str(), sleeper.to_str().unwrap()];
    let limit = Duration::from_secs(60 * scale());
    let what = format!("{what}, {runs} runs");
    let k = s.kernel("execrace", &args, &[], limit);
    k.show(&what);
    let i = s.ipcns("execrace", &args, &[], limit);
    i.show(&what);
    for o in [&k, &i] {
        o.assert_figure(&what, "runs", &runs);
        // The scenario happened: the image ran, the leader asleep before.
        for key in ["leader_not_asleep", "no_image"].iter().chain(zero) {
            o.assert_figure(&what, key, "0");
        }
        o.assert_ok(&what);
    }
}

/// Variant a: after the execve GETNCNT is 0, semtimedop(-1, 20 ms) fails
/// with EAGAIN on time, and a token posted with +1 is obtained by
/// semtimedop(-1, 500 ms).
#[test]
fn execve_by_a_thread_while_the_leader_sleeps_in_semop() {
    exec(
        "adversary::threads::execve_by_a_thread_while_the_leader_sleeps_in_semop",
        "a",
        "execve while the leader sleeps in semop",
        &[
            "ncnt_not_0",
            "timeout_wrong",
            "token_lost",
            "leader_returned",
            "odd_exits",
        ],
    );
}

/// Variant b: a message sent after the execve is still in the queue.
#[test]
fn execve_by_a_thread_while_the_leader_sleeps_in_msgrcv() {
    exec(
        "adversary::threads::execve_by_a_thread_while_the_leader_sleeps_in_msgrcv",
        "b",
        "execve while the leader sleeps in msgrcv",
        &[
            "timeout_wrong",
            "message_lost",
            "leader_returned",
            "odd_exits",
        ],
    );
}

/// Variant c: the new image's own calls on the set (GETVAL, semop(+1,
/// IPC_NOWAIT), semtimedop(-1, 20 ms), semop(+1, IPC_NOWAIT)) behave as on
/// the kernel, and its last token is the parent's to take.
#[test]
fn execve_by_a_thread_then_the_new_image_uses_the_set() {
    exec(
        "adversary::threads::execve_by_a_thread_then_the_new_image_uses_the_set",
        "c",
        "execve while the leader sleeps in semop, the image's own calls",
        &[
            "ncnt_not_0",
            "image_wrong",
            "token_lost",
            "timeout_wrong",
            "leader_returned",
            "odd_exits",
        ],
    );
}
