//! Test support: namespaces in a private directory, removed on drop.

use ipcns::{CreateOptions, Namespace};
use std::path::PathBuf;

pub struct TestNs {
    pub ns: Namespace,
    path: PathBuf,
}

impl TestNs {
    pub fn new(tag: &str) -> TestNs {
        Self::with(tag, CreateOptions::default())
    }

    pub fn with(tag: &str, opts: CreateOptions) -> TestNs {
        let path = std::env::temp_dir().join(format!(
            "ipcns-test-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let ns = Namespace::create_at(&path, opts).expect("create a test namespace");
        TestNs { ns, path }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
