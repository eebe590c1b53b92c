//! The crate's quick start (its front page): a private namespace in a
//! temporary directory, a semaphore posted and waited for, a message sent
//! and received.
//!
//! `cargo run --release -p ipcns --example quickstart`

use ipcns::{CreateOptions, MsgFlags, MsgQueue, MsgType, Namespace, SemOp, SemSet};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A private namespace: an arena file in a temporary directory.
    let path = std::env::temp_dir().join(format!("ipcns-quickstart-{}", std::process::id()));
    let ns = Namespace::create_at(&path, CreateOptions::default())?;

    // A set of one semaphore: post, then wait.
    let sem = SemSet::private(&ns, 1, 0o600)?;
    sem.op(SemOp::post(0))?;
    sem.op(SemOp::wait(0))?;
    assert_eq!(sem.get(0)?, 0);

    // A message queue: send a message of type 1, receive it.
    let queue = MsgQueue::private(&ns, 0o600)?;
    queue.send(1, b"hello", MsgFlags::NONE)?;
    let msg = queue.receive(MsgType::Any, MsgFlags::NONE)?;
    assert_eq!((msg.mtype, &msg.text[..]), (1, &b"hello"[..]));

    println!(
        "semaphore set {} and queue {} in {}: received {:?} (type {})",
        sem.id(),
        queue.id(),
        path.display(),
        String::from_utf8_lossy(&msg.text),
        msg.mtype
    );

    // Leave the namespace, then delete its file.
    drop(ns);
    Namespace::remove_at(&path)?;
    Ok(())
}
