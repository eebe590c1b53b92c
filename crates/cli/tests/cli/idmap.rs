use crate::{ipcns, text};

#[test]
fn check_accepts_and_refuses_like_the_kernel() {
    let ok = ipcns(&["idmap", "check", "-"], "0 100000 65536\n");
    assert!(ok.status.success());
    assert_eq!(
        text(&ok.stdout),
        "-: valid, 1 extent; Linux keeps up to 5 inline and scans them linearly\n"
    );

    let bad = ipcns(&["idmap", "check", "-"], "0 0 1\n1 1 1\n5 0 3\n");
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        text(&bad.stderr),
        "ipcns: -: EINVAL: line 3: overlaps line 1 in the lower range\n"
    );
    assert!(bad.stdout.is_empty());

    let many: String = (0..6).map(|i| format!("{i} {} 1\n", 100 + i)).collect();
    let ok = ipcns(&["idmap", "check", "-"], &many);
    assert!(
        text(&ok.stdout).contains("6 extents; Linux keeps 6 to 340"),
        "{}",
        text(&ok.stdout)
    );
}

#[test]
fn split_makes_a_straddling_map_writable() {
    let dir = std::env::temp_dir().join(format!("ipcns-cli-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let parent = dir.join("parent");
    std::fs::write(&parent, "0 0 1\n1 1000 5\n6 2000 5\n").unwrap();
    let p = parent.to_str().unwrap();
    let refused = ipcns(&["idmap", "check", "-", "--parent", p], "0 0 1\n1 1 10\n");
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("EPERM: line 2: lower range 1-10 is not inside one extent")
    );
    let split = ipcns(&["idmap", "split", "-", "--parent", p], "0 0 1\n1 1 10\n");
    assert!(split.status.success());
    assert_eq!(text(&split.stdout), "0 0 1\n1 1 5\n6 6 5\n");
    let ok = ipcns(
        &["idmap", "check", "-", "--parent", p],
        &text(&split.stdout),
    );
    assert!(ok.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn except_prints_seed_003_layout() {
    let out = ipcns(
        &[
            "idmap",
            "except",
            "--count",
            "1000000000",
            "--host-base",
            "1000000",
            "--keep",
            "999,1001",
        ],
        "",
    );
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        "999 999 1\n1001 1001 1\n0 1000000 999\n1000 1001000 1\n1002 1001002 999998998\n"
    );
    let bad = ipcns(
        &[
            "idmap",
            "except",
            "--count",
            "10",
            "--host-base",
            "100",
            "--keep",
            "105",
        ],
        "",
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).starts_with("ipcns: EINVAL: line "),
        "{}",
        text(&bad.stderr)
    );
    let bad = ipcns(
        &["idmap", "except", "--count", "x", "--host-base", "100"],
        "",
    );
    assert_eq!(
        text(&bad.stderr),
        "ipcns: --count: \"x\" is not a number from 0 to 4294967295\n"
    );
}

#[test]
fn show_and_map_read_our_own_maps() {
    let out = ipcns(&["idmap", "show", "self"], "");
    assert!(out.status.success());
    let own = std::fs::read_to_string("/proc/self/uid_map").unwrap();
    assert!(text(&out.stdout).contains(&own), "{}", text(&out.stdout));
    let out = ipcns(&["idmap", "map", "self", "--uid", "0"], "");
    assert!(out.status.success());
    assert!(text(&out.stdout).starts_with("uid 0 inside self's namespace is "));
}

#[test]
fn bad_usage_is_an_error_not_a_panic() {
    for args in [
        &["idmap"][..],
        &["idmap", "show"],
        &["idmap", "show", "notapid"],
        &["idmap", "show", "4294967295"],
        &["idmap", "check", "/nonexistent/map"],
        &["idmap", "map", "self"],
        &["idmap", "write", "self"],
        &["idmap", "bogus"],
        &["bogus"],
    ] {
        let out = ipcns(args, "");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.starts_with("ipcns: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn write_needs_a_target_in_a_new_namespace() {
    // Our own map (initial namespace, or already written) can't be written:
    // EPERM, explained.
    let dir = std::env::temp_dir().join(format!("ipcns-cli-write-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let map = dir.join("map");
    std::fs::write(&map, "0 0 1\n").unwrap();
    let out = ipcns(
        &["idmap", "write", "self", "--uid-map", map.to_str().unwrap()],
        "",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("uid_map: EPERM: "),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn write_into_a_new_namespace() {
    let Ok(mut child) =
        ipcns_idmap::userns::spawn_in_new_userns(std::process::Command::new("sleep").arg("60"))
    else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED write_into_a_new_namespace: cannot create a user namespace"
        );
        return;
    };
    let pid = child.id().to_string();
    let out = ipcns(
        &["idmap", "write", &pid, "--uid-map", "-"],
        "0 100000 65536\n",
    );
    let root = crate::kernel::is_root();
    if root {
        assert!(out.status.success(), "{}", text(&out.stderr));
        let out = ipcns(&["idmap", "map", &pid, "--uid", "1000"], "");
        assert_eq!(
            text(&out.stdout),
            format!(
                "uid 1000 inside {pid}'s namespace is 101000 outside\nuid 1000 outside is 65534 (unmapped) inside {pid}'s namespace\n"
            )
        );
    } else {
        assert_eq!(out.status.code(), Some(1));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A map is read only as far as the kernel would take it (and a byte
/// more): `/dev/zero` is refused at once, as a write of 4096 bytes or more
/// to uid_map is, instead of being read forever.
#[test]
fn check_reads_no_more_than_the_kernel_would() {
    use std::time::Duration;
    let run = |c: &mut std::process::Command| {
        crate::output_within(c, Duration::from_secs(20)).expect("ipcns read on past 4097 bytes")
    };
    let want = "EINVAL: map is 4097 bytes; the kernel accepts at most 4095 bytes in one write (the rest was not read)\n";
    let o = run(std::process::Command::new(env!("CARGO_BIN_EXE_ipcns"))
        .args(["idmap", "check", "/dev/zero"])
        .stdin(std::process::Stdio::null()));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stderr), format!("ipcns: /dev/zero: {want}"));
    let o = run(std::process::Command::new(env!("CARGO_BIN_EXE_ipcns"))
        .args(["idmap", "check", "-"])
        .stdin(std::fs::File::open("/dev/zero").unwrap()));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stderr), format!("ipcns: -: {want}"));
    let o = run(std::process::Command::new(env!("CARGO_BIN_EXE_ipcns"))
        .args(["idmap", "write", "self", "--uid-map", "/dev/zero"])
        .stdin(std::process::Stdio::null()));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stderr), format!("ipcns: /dev/zero: {want}"));
    // Up to the limit the parser sees it all: 4095 bytes pass, 4096 do not.
    let map = |len: usize| format!("0 0 1{}\n", " ".repeat(len - 6));
    let o = ipcns(&["idmap", "check", "-"], &map(4095));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = ipcns(&["idmap", "check", "-"], &map(4096));
    assert_eq!(
        text(&o.stderr),
        "ipcns: -: EINVAL: map is 4096 bytes; the kernel accepts at most 4095 bytes in one write\n"
    );
}
