//! `getopt_long(3)` as glibc runs it for util-linux: argument permutation,
//! short clusters, `--name=value`, unique-prefix abbreviations, and glibc's
//! own diagnostics word for word (posix/getopt.c `process_long_option`,
//! `_getopt_internal_r`), so that a bad command line reads exactly as it
//! does under the real tools.

/// Whether an option takes an argument (`no_argument`, `required_argument`,
/// `optional_argument`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HasArg {
    No,
    Required,
    Optional,
}

/// A long option: name, argument kind, and the value `getopt_long` returns
/// for it (a short option's letter, or a private code above 255).
pub struct Long {
    pub name: &'static str,
    pub has_arg: HasArg,
    pub val: u32,
}

/// One result of `getopt_long`.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    /// An option and its argument.
    Opt(u32, Option<Vec<u8>>),
    /// getopt printed this message and returned `'?'`.
    Bad(Vec<u8>),
}

/// Every option up to and including the first error, and the non-option
/// arguments (`argv[optind..]` after permutation), in order.
pub struct Parsed {
    pub items: Vec<Item>,
    pub operands: Vec<Vec<u8>>,
}

/// `strchr(optstring, c)`: whether short option `c` exists and what it takes.
fn short_kind(shorts: &[u8], c: u8) -> Option<HasArg> {
    if c == b':' {
        return None;
    }
    let i = shorts.iter().position(|&s| s == c)?;
    let rest = &shorts[i + 1..];
    Some(if rest.starts_with(b"::") {
        HasArg::Optional
    } else if rest.starts_with(b":") {
        HasArg::Required
    } else {
        HasArg::No
    })
}

/// A getopt message: `prog`, then the parts (bytes of the arguments as
/// given: glibc prints them with `%s` and `%c`).
fn msg(prog: &str, parts: &[&[u8]]) -> Item {
    let mut m = format!("{prog}: ").into_bytes();
    for p in parts {
        m.extend_from_slice(p);
    }
    m.push(b'\n');
    Item::Bad(m)
}

/// Parses `args` (without the program name, as the bytes the program got)
/// as `getopt_long(argc, argv, shorts, longs)` would, `prog` naming the
/// program in messages.
pub fn parse(prog: &str, args: &[Vec<u8>], shorts: &str, longs: &[Long]) -> Parsed {
    let shorts = shorts.as_bytes();
    let mut items = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == b"--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(body) = a.strip_prefix(b"--") {
            let item = long(prog, body, longs, args, &mut i);
            let bad = matches!(item, Item::Bad(_));
            items.push(item);
            if bad {
                break;
            }
            continue;
        }
        if a.len() < 2 || a[0] != b'-' {
            operands.push(a.clone());
            continue;
        }
        // A cluster of short options, byte by byte as glibc reads it.
        let cluster = &a[1..];
        let mut k = 0;
        while k < cluster.len() {
            let c = cluster[k];
            k += 1;
            let rest = &cluster[k..];
            match short_kind(shorts, c) {
                None => {
                    items.push(msg(prog, &[b"invalid option -- '", &[c], b"'"]));
                    return Parsed { items, operands };
                }
                Some(HasArg::No) => items.push(Item::Opt(u32::from(c), None)),
                Some(HasArg::Optional) => {
                    items.push(Item::Opt(
                        u32::from(c),
                        (!rest.is_empty()).then(|| rest.to_vec()),
                    ));
                    break;
                }
                Some(HasArg::Required) => {
                    if !rest.is_empty() {
                        items.push(Item::Opt(u32::from(c), Some(rest.to_vec())));
                    } else if i < args.len() {
                        items.push(Item::Opt(u32::from(c), Some(args[i].clone())));
                        i += 1;
                    } else {
                        items.push(msg(
                            prog,
                            &[b"option requires an argument -- '", &[c], b"'"],
                        ));
                        return Parsed { items, operands };
                    }
                    break;
                }
            }
        }
    }
    Parsed { items, operands }
}

/// `process_long_option`: exact match, else a unique prefix (or several
/// entries that all return the same thing), else ambiguous.
fn long(prog: &str, body: &[u8], longs: &[Long], args: &[Vec<u8>], i: &mut usize) -> Item {
    let (name, value) = match body.iter().position(|&b| b == b'=') {
        Some(eq) => (&body[..eq], Some(body[eq + 1..].to_vec())),
        None => (body, None),
    };
    let found = match longs.iter().find(|l| l.name.as_bytes() == name) {
        Some(l) => l,
        None => {
            let cands: Vec<&Long> = longs
                .iter()
                .filter(|l| l.name.as_bytes().starts_with(name))
                .collect();
            match cands.as_slice() {
                [] => return msg(prog, &[b"unrecognized option '--", body, b"'"]),
                [one] => *one,
                [first, rest @ ..] => {
                    if rest
                        .iter()
                        .all(|l| l.has_arg == first.has_arg && l.val == first.val)
                    {
                        *first
                    } else {
                        let mut m = format!("{prog}: option '--").into_bytes();
                        m.extend_from_slice(body);
                        m.extend_from_slice(b"' is ambiguous; possibilities:");
                        for l in &cands {
                            m.extend_from_slice(format!(" '--{}'", l.name).as_bytes());
                        }
                        m.push(b'\n');
                        return Item::Bad(m);
                    }
                }
            }
        }
    };
    let name = found.name.as_bytes();
    match found.has_arg {
        HasArg::No if value.is_some() => {
            msg(prog, &[b"option '--", name, b"' doesn't allow an argument"])
        }
        HasArg::No => Item::Opt(found.val, None),
        HasArg::Optional => Item::Opt(found.val, value),
        HasArg::Required => match value {
            Some(v) => Item::Opt(found.val, Some(v)),
            None if *i < args.len() => {
                *i += 1;
                Item::Opt(found.val, Some(args[*i - 1].clone()))
            }
            None => msg(prog, &[b"option '--", name, b"' requires an argument"]),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONGS: &[Long] = &[
        Long {
            name: "shmem-id",
            has_arg: HasArg::Required,
            val: 'm' as u32,
        },
        Long {
            name: "shmem-key",
            has_arg: HasArg::Required,
            val: 'M' as u32,
        },
        Long {
            name: "all",
            has_arg: HasArg::Optional,
            val: 'a' as u32,
        },
        Long {
            name: "verbose",
            has_arg: HasArg::No,
            val: 'v' as u32,
        },
    ];

    fn p(args: &[&str]) -> Parsed {
        let v: Vec<Vec<u8>> = args.iter().map(|s| s.as_bytes().to_vec()).collect();
        parse("ipcrm", &v, "m:M:a::v", LONGS)
    }

    #[test]
    fn clusters_permutation_and_arguments() {
        let r = p(&[
            "x",
            "-vm3",
            "--all=shm",
            "-a",
            "--shmem-id",
            "4",
            "--",
            "-v",
        ]);
        assert_eq!(
            r.items,
            vec![
                Item::Opt('v' as u32, None),
                Item::Opt('m' as u32, Some(b"3".to_vec())),
                Item::Opt('a' as u32, Some(b"shm".to_vec())),
                Item::Opt('a' as u32, None),
                Item::Opt('m' as u32, Some(b"4".to_vec())),
            ]
        );
        assert_eq!(r.operands, vec![b"x".to_vec(), b"-v".to_vec()]);
    }

    #[test]
    fn glibc_messages() {
        let msg = |args: &[&str]| match p(args).items.pop() {
            Some(Item::Bad(m)) => String::from_utf8(m).unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            msg(&["--shm", "1"]),
            "ipcrm: option '--shm' is ambiguous; possibilities: '--shmem-id' '--shmem-key'\n"
        );
        assert_eq!(msg(&["--foo=3"]), "ipcrm: unrecognized option '--foo=3'\n");
        assert_eq!(
            msg(&["--verb=1"]),
            "ipcrm: option '--verbose' doesn't allow an argument\n"
        );
        assert_eq!(
            msg(&["--shmem-id"]),
            "ipcrm: option '--shmem-id' requires an argument\n"
        );
        assert_eq!(msg(&["-x"]), "ipcrm: invalid option -- 'x'\n");
        assert_eq!(msg(&["-m"]), "ipcrm: option requires an argument -- 'm'\n");
    }

    #[test]
    fn bytes_as_given() {
        let v = |a: &[&[u8]]| a.iter().map(|s| s.to_vec()).collect::<Vec<_>>();
        // glibc reads a cluster byte by byte and quotes the one it refuses.
        let r = parse("ipcrm", &v(&[b"-v\xc3\xa9"]), "m:M:a::v", LONGS);
        assert_eq!(
            r.items,
            vec![
                Item::Opt('v' as u32, None),
                Item::Bad(b"ipcrm: invalid option -- '\xc3'\n".to_vec())
            ]
        );
        let r = parse("ipcrm", &v(&[b"-m\xff", b"\xfe"]), "m:M:a::v", LONGS);
        assert_eq!(r.items, vec![Item::Opt('m' as u32, Some(b"\xff".to_vec()))]);
        assert_eq!(r.operands, vec![b"\xfe".to_vec()]);
    }
}
