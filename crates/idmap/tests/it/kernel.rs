//! Differential tests against the running kernel: the same map text written
//! into real child user namespaces and given to the library; verdicts,
//! errnos, read-back text and translations must agree.

use crate::maps;
use crate::support::{self, NsProc, Rng};
use ipcns_idmap::proc::{self, IdKind, Pid, Setgroups};
use ipcns_idmap::{Errno, Extent, IdMap};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

fn cases_from_env(default: usize) -> usize {
    std::env::var("IPCNS_KERNEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn show(t: &[u8]) -> String {
    let s = t.escape_ascii().to_string();
    if s.len() > 300 {
        format!("{}...({} bytes)", &s[..300], t.len())
    } else {
        s
    }
}

/// One generated case: what it is and its text.
fn make_case(rng: &mut Rng) -> (String, Vec<u8>) {
    match rng.below(20) {
        // Valid maps, varied white space and number spellings.
        0..=5 => {
            let n = *rng.pick(&[1, 1, 2, 3, 4, 5, 5, 6, 7, 10, 30, 100]);
            let v = maps::random_extents(rng, n);
            let fancy = rng.chance(2);
            (
                format!("valid n={n} fancy={fancy}"),
                maps::render(rng, &v, fancy),
            )
        }
        // Extent-level mutations: overlaps, count 0, wraps, 4294967295.
        6..=11 => {
            let n = *rng.pick(&[1, 2, 3, 5, 6, 8, 20]);
            let mut v = maps::random_extents(rng, n);
            let what = maps::mutate_extents(rng, &mut v);
            let fancy = rng.chance(3);
            (format!("{what} n={n}"), maps::render(rng, &v, fancy))
        }
        // Syntax mutations.
        12..=16 => {
            let n = *rng.pick(&[1, 2, 3, 6]);
            let v = maps::random_extents(rng, n);
            let fancy = rng.chance(2);
            let mut t = maps::render(rng, &v, fancy);
            let what = maps::mutate_text(rng, &mut t);
            (format!("{what} n={n}"), t)
        }
        // Sizes: 339/340/341 extents, 4094..4097 bytes.
        17 => {
            let n = *rng.pick(&[339, 340, 341]);
            let v = maps::many_small(rng, n);
            let mut t = maps::render(rng, &v, false);
            if rng.chance(3) {
                t.pop();
            } else if rng.chance(3) {
                t.push(b'\n');
            }
            (format!("{n} extents"), t)
        }
        18 => {
            let len = *rng.pick(&[4094, 4095, 4096, 4097]);
            let v = maps::random_extents(rng, 3);
            let t = maps::padded(&maps::render(rng, &v, false), len);
            (format!("{} bytes", t.len()), t)
        }
        _ => {
            let fixed: &[&[u8]] = &[
                b"",
                b"\n",
                b" \n",
                b"0 0 1",
                b"0 0 1\n\n",
                b"0 0 4294967295\n",
                b"1 0 4294967295\n",
                b"4294967294 4294967294 1\n",
                b"4294967294 0 2\n",
                b"4294967295 0 1\n",
                b"0 4294967295 1\n",
                b"0 0 0\n",
                b"0 0 4294967296\n",
                b"4294967296 0 1\n",
                b"0 0 1 \n",
                b"0 0 1x\n",
                b"0 0\n",
                b"0\n",
                b"0 0 1\n1 1 1\n",
                b"0 1 1\n1 0 1\n",
                b"0 0 2\n1 5 1\n",
                b"0 0 2\n5 1 1\n",
                b"\t0\t0\t1\t\n",
                b"0\xa00\xa01\n",
                b"0\x0b0\x0c1\r\n",
                b"-0 0 1\n",
                b"+0 0 1\n",
                b"0 0 +1\n",
                b"0 0 01\n",
                b"00000000000000000000000000001 0 1\n",
            ];
            let t = *rng.pick(fixed);
            ("fixed".to_string(), t.to_vec())
        }
    }
}

fn expected(text: &[u8]) -> Result<IdMap, i32> {
    IdMap::parse(text).map_err(|e| e.errno.raw())
}

#[test]
fn verdicts_and_read_back_match_the_kernel() {
    if !support::kernel_or_skip("verdicts_and_read_back_match_the_kernel") {
        return;
    }
    let n = cases_from_env(4000);
    let mut rng = Rng::from_env(0x1d_3a9);
    let mut failures = Vec::new();
    let mut accepted = 0;
    for i in (0..n).step_by(2) {
        let ns = NsProc::spawn().expect("spawn a process in a new user namespace");
        for (k, kind) in [IdKind::Uid, IdKind::Gid].into_iter().enumerate() {
            if i + k >= n {
                break;
            }
            let (what, text) = make_case(&mut rng);
            let kernel = support::write_text(ns.pid(), kind, &text);
            let lib = expected(&text);
            match (&kernel, &lib) {
                (Ok(()), Ok(map)) => {
                    accepted += 1;
                    let back = support::read_text(ns.pid(), kind);
                    if back != map.to_text() {
                        failures.push(format!(
                            "{what}: read-back differs\n text: {}\n kernel: {back:?}\n lib:    {:?}",
                            show(&text),
                            map.to_text()
                        ));
                    }
                }
                (Err(ke), Err(le)) if ke == le => {}
                _ => failures.push(format!(
                    "{what}: kernel {kernel:?} lib {:?}\n text: {}",
                    lib.as_ref()
                        .map(|_| ())
                        .map_err(|_| IdMap::parse(&text).unwrap_err().to_string()),
                    show(&text)
                )),
            }
        }
    }
    eprintln!("kernel differential: {n} map texts, {accepted} accepted by both");
    assert!(
        failures.is_empty(),
        "{} of {n} differ:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}

/// Ids to probe around each extent of `v` on the lower side, and some random ones.
fn probe_ids(rng: &mut Rng, v: &[Extent], lower: bool) -> Vec<u32> {
    let mut ids = Vec::new();
    for e in v {
        let s = if lower { e.lower_first } else { e.first };
        let last = s + (e.count - 1);
        ids.extend([
            s,
            last,
            s.wrapping_sub(1),
            last.wrapping_add(1),
            s + (e.count / 2),
        ]);
    }
    for _ in 0..4 {
        ids.push(rng.below(1 << 20) as u32);
    }
    ids.retain(|&x| x != u32::MAX);
    ids.sort_unstable();
    ids.dedup();
    maps::shuffle(rng, &mut ids);
    ids.truncate(24);
    ids
}

fn valid_pair(rng: &mut Rng) -> (IdMap, IdMap) {
    // Maps that fit one write (random 340-extent maps rarely do).
    let mut one = |sizes: &[usize]| loop {
        let n = *rng.pick(sizes);
        let m = IdMap::new(&maps::many_or_random(rng, n)).unwrap();
        if m.to_compact_text().len() <= ipcns_idmap::MAX_WRITE {
            return m;
        }
    };
    let u = one(&[1, 2, 3, 5, 6, 12, 40, 200, 340]);
    let g = one(&[1, 4, 7, 60]);
    (u, g)
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ipcns-idmap-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
    d
}

#[test]
fn owners_seen_from_inside_match_map_up() {
    if !support::kernel_or_skip("owners_seen_from_inside_match_map_up") {
        return;
    }
    let mut rng = Rng::from_env(0x5747);
    let dir = temp_dir("up");
    let rounds = cases_from_env(4000) / 50;
    let mut checked = 0;
    for round in 0..rounds {
        let (u, g) = valid_pair(&mut rng);
        let uids = probe_ids(&mut rng, u.extents(), true);
        let gids = probe_ids(&mut rng, g.extents(), true);
        let mut files = Vec::new();
        for (k, (&kuid, &kgid)) in uids.iter().zip(gids.iter().cycle()).enumerate() {
            let f = dir.join(format!("r{round}-{k}"));
            std::fs::write(&f, b"").unwrap();
            std::os::unix::fs::chown(&f, Some(kuid), Some(kgid)).unwrap();
            files.push((f, kuid, kgid));
        }
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("read x; exec stat -c '%u %g' \"$@\"")
            .arg("sh");
        cmd.args(files.iter().map(|f| &f.0));
        let mut ns = NsProc::spawn_cmd(support::piped(&mut cmd)).unwrap();
        proc::write_maps(Pid::Id(ns.pid()), Some(&u), Some(&g), Setgroups::Leave).unwrap();
        ns.child().stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut out = String::new();
        ns.child()
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), files.len(), "stat output: {out}");
        for ((_, kuid, kgid), line) in files.iter().zip(lines) {
            let want = format!(
                "{} {}",
                u.map_up_or_overflow(*kuid),
                g.map_up_or_overflow(*kgid)
            );
            assert_eq!(line, want, "kuid {kuid} kgid {kgid} through\n{u}and\n{g}");
            checked += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("map_up: {checked} file owners seen from inside {rounds} namespaces");
}

#[test]
fn ids_taken_inside_match_map_down() {
    if !support::kernel_or_skip("ids_taken_inside_match_map_down") {
        return;
    }
    let mut rng = Rng::from_env(0xd0e);
    let dir = temp_dir("down");
    let rounds = cases_from_env(4000) / 100;
    let mut checked = 0;
    for round in 0..rounds {
        let (u, g) = valid_pair(&mut rng);
        let ns = NsProc::spawn().unwrap();
        proc::write_maps(Pid::Id(ns.pid()), Some(&u), Some(&g), Setgroups::Leave).unwrap();
        let uids = probe_ids(&mut rng, u.extents(), false);
        let gids = probe_ids(&mut rng, g.extents(), false);
        for (k, (&uid, &gid)) in uids.iter().zip(gids.iter().cycle()).enumerate().take(10) {
            let f = dir.join(format!("r{round}-{k}"));
            let pid = ns.pid();
            let code = support::fork_run(|| {
                if let Err(e) = support::setns_user(pid) {
                    return 200 + e.min(50);
                }
                if let Err(e) = support::set_ids(uid, gid) {
                    return e;
                }
                match std::fs::File::create(&f) {
                    Ok(_) => 0,
                    Err(_) => 199,
                }
            });
            match (u.map_down(uid), g.map_down(gid)) {
                (Some(ku), Some(kg)) => {
                    assert_eq!(
                        code, 0,
                        "setresuid({uid})/setresgid({gid}) inside\n{u}and\n{g}"
                    );
                    let m = std::fs::metadata(&f).unwrap();
                    assert_eq!((m.uid(), m.gid()), (ku, kg), "ids {uid}/{gid} inside");
                }
                _ => assert_eq!(
                    code,
                    Errno::EINVAL.raw(),
                    "ids {uid}/{gid}: one is unmapped in\n{u}and\n{g}"
                ),
            }
            checked += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("map_down: {checked} id pairs taken inside {rounds} namespaces");
}

/// A parent map for namespace A: `0 0 1` (so that a process in A keeps a
/// mapped uid and can create B) and random extents away from 0.
fn parent_map(rng: &mut Rng) -> IdMap {
    loop {
        let n = *rng.pick(&[2, 4, 5, 8, 30]);
        let mut v = maps::random_extents(rng, n);
        v.insert(0, Extent::new(0, 0, 1));
        if let Ok(m) = IdMap::new(&v) {
            return m;
        }
    }
}

/// Candidate maps for B, in A's ids: inside one parent extent, straddling
/// two, partly unmapped, or random.
fn child_candidates(rng: &mut Rng, parent: &IdMap) -> Vec<IdMap> {
    let ext = parent.extents();
    let mut out = Vec::new();
    for _ in 0..6 {
        let mut v = Vec::new();
        let mut next_first = 0u32;
        for _ in 0..(1 + rng.below(4)) {
            let p = rng.pick(ext);
            let off = rng.below(u64::from(p.count)) as u32;
            let max = u64::from(p.count - off);
            let count = match rng.below(3) {
                0 => 1 + rng.below(max) as u32,                       // inside
                1 => (max + 1 + rng.below(1000)).min(1 << 30) as u32, // past the end
                _ => max as u32,                                      // exactly to the end
            };
            v.push(Extent::new(next_first, p.first + off, count));
            next_first = next_first.saturating_add(count).saturating_add(1);
        }
        if let Ok(m) = IdMap::new(&v) {
            out.push(m);
        }
    }
    out
}

#[test]
fn nested_writes_compose_like_the_kernel() {
    if !support::kernel_or_skip("nested_writes_compose_like_the_kernel") {
        return;
    }
    let mut rng = Rng::from_env(0xc0);
    let rounds = cases_from_env(4000) / 200;
    let (mut composed, mut refused, mut split_ok) = (0, 0, 0);
    for _ in 0..rounds {
        let parent = parent_map(&mut rng);
        let a = NsProc::spawn().unwrap();
        proc::write_maps(
            Pid::Id(a.pid()),
            Some(&parent),
            Some(&IdMap::parse("0 0 1").unwrap()),
            Setgroups::Leave,
        )
        .unwrap();
        let mut cands = child_candidates(&mut rng, &parent);
        let splits: Vec<IdMap> = cands
            .iter()
            .filter_map(|m| m.split_for_parent(&parent).ok())
            .collect();
        cands.extend(splits);
        let texts: Vec<String> = cands.iter().map(IdMap::to_compact_text).collect();
        // A child in A creates each B and writes its uid map; it reports the
        // errno and B's pid, one line per candidate.
        let (mut r, mut w) = std::io::pipe().unwrap();
        let apid = a.pid();
        let code = support::fork_run(move || {
            if support::setns_user(apid).is_err() {
                return 3;
            }
            for t in &texts {
                let Ok(b) =
                    ipcns_idmap::userns::spawn_in_new_userns(Command::new("sleep").arg("600"))
                else {
                    return 4;
                };
                let e = support::write_text(b.id(), IdKind::Uid, t.as_bytes())
                    .err()
                    .unwrap_or(0);
                if writeln!(w, "{e} {}", b.id()).is_err() {
                    return 5;
                }
                std::mem::forget(b);
            }
            0
        });
        assert_eq!(code, 0, "writer in namespace A failed");
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), cands.len());
        for (m, line) in cands.iter().zip(lines) {
            let (e, bpid) = line.split_once(' ').unwrap();
            let (e, bpid): (i32, u32) = (e.parse().unwrap(), bpid.parse().unwrap());
            match m.compose(&parent) {
                Ok(kernel_view) => {
                    assert_eq!(e, 0, "kernel refused\n{m}through\n{parent}");
                    let back = support::read_text(bpid, IdKind::Uid);
                    assert_eq!(
                        back,
                        kernel_view.to_text(),
                        "composed map seen from the initial namespace"
                    );
                    composed += 1;
                }
                Err(me) => {
                    assert_eq!(e, me.errno.raw(), "{me}:\n{m}through\n{parent}");
                    refused += 1;
                    let split = m.split_for_parent(&parent);
                    if split.is_ok() {
                        split_ok += 1;
                    }
                }
            }
            support::kill(bpid);
        }
    }
    eprintln!(
        "composition: {composed} accepted, {refused} refused with EPERM ({split_ok} of those writable once split)"
    );
    assert!(
        composed > 0 && refused > 0,
        "the generator must exercise both outcomes"
    );
}

#[test]
fn library_writer_reader_and_errors() {
    if !support::kernel_or_skip("library_writer_reader_and_errors") {
        return;
    }
    let u = IdMap::parse("0 100000 65536\n").unwrap();
    let g = IdMap::new(&maps::many_small(&mut Rng::from_env(7), 8)).unwrap();
    let ns = NsProc::spawn().unwrap();
    let pid = Pid::Id(ns.pid());
    assert!(proc::read_map(pid, IdKind::Uid).unwrap().is_empty());
    proc::write_maps(pid, Some(&u), Some(&g), Setgroups::Auto).unwrap();
    assert_eq!(proc::read_map(pid, IdKind::Uid).unwrap(), u);
    assert_eq!(proc::read_map(pid, IdKind::Gid).unwrap(), g);
    // A second write: EPERM, explained.
    let e = proc::write_map(pid, IdKind::Uid, &u).unwrap_err();
    assert_eq!(e.errno, Some(Errno::EPERM));
    assert!(e.explanation.contains("already written"), "{e}");
    // setgroups cannot be denied once the gid map is written.
    let e = proc::write_setgroups(pid, false).unwrap_err();
    assert_eq!(e.errno, Some(Errno::EPERM));
    // Our own map (the initial namespace) is the identity.
    assert_eq!(
        proc::read_map(Pid::SelfProcess, IdKind::Uid).unwrap(),
        IdMap::identity()
    );
    // Too long to write in one go: refused before writing.
    let big: Vec<Extent> = (0..340u32)
        .map(|i| Extent::new(4_000_000_000 + i * 2, 3_000_000_000 + i * 3, 1))
        .collect();
    let big = IdMap::new(&big).unwrap();
    let ns2 = NsProc::spawn().unwrap();
    let e = proc::write_map(Pid::Id(ns2.pid()), IdKind::Uid, &big).unwrap_err();
    assert_eq!(e.errno, Some(Errno::EINVAL));
    // And the kernel agrees that text is too long.
    let t = big.to_compact_text();
    assert!(t.len() > 4095);
    assert_eq!(
        support::write_text(ns2.pid(), IdKind::Uid, t.as_bytes()),
        Err(libc::EINVAL)
    );
}
