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
    Opt(u32, Option<String>),
    /// getopt printed this message and returned `'?'`.
    Bad(String),
}

/// Every option up to and including the first error, and the non-option
/// arguments (`argv[optind..]` after permutation), in order.
pub struct Parsed {
    pub items: Vec<Item>,
    pub operands: Vec<String>,
}

fn short_kind(shorts: &str, c: char) -> Option<HasArg> {
    if c == ':' {
        return None;
    }
    let i = shorts.find(c)?;
    let rest = &shorts[i + c.len_utf8()..];
    Some(if rest.starts_with("::") {
        HasArg::Optional
    } else if rest.starts_with(':') {
        HasArg::Required
    } else {
        HasArg::No
    })
}

/// Parses `args` (without the program name) as `getopt_long(argc, argv,
/// shorts, longs)` would, `prog` naming the program in messages.
pub fn parse(prog: &str, args: &[String], shorts: &str, longs: &[Long]) -> Parsed {
    let mut items = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let item = long(prog, body, longs, args, &mut i);
            let bad = matches!(item, Item::Bad(_));
            items.push(item);
            if bad {
                break;
            }
            continue;
        }
        if a.len() < 2 || !a.starts_with('-') {
            operands.push(a.clone());
            continue;
        }
        // A cluster of short options.
        let cluster: Vec<char> = a[1..].chars().collect();
        let mut k = 0;
        while k < cluster.len() {
            let c = cluster[k];
            k += 1;
            let rest: String = cluster[k..].iter().collect();
            match short_kind(shorts, c) {
                None => {
                    items.push(Item::Bad(format!("{prog}: invalid option -- '{c}'\n")));
                    return Parsed { items, operands };
                }
                Some(HasArg::No) => items.push(Item::Opt(c as u32, None)),
                Some(HasArg::Optional) => {
                    items.push(Item::Opt(c as u32, (!rest.is_empty()).then_some(rest)));
                    break;
                }
                Some(HasArg::Required) => {
                    if !rest.is_empty() {
                        items.push(Item::Opt(c as u32, Some(rest)));
                    } else if i < args.len() {
                        items.push(Item::Opt(c as u32, Some(args[i].clone())));
                        i += 1;
                    } else {
                        items.push(Item::Bad(format!(
                            "{prog}: option requires an argument -- '{c}'\n"
                        )));
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
fn long(prog: &str, body: &str, longs: &[Long], args: &[String], i: &mut usize) -> Item {
    let (name, value) = match body.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (body, None),
    };
    let found = match longs.iter().find(|l| l.name == name) {
        Some(l) => l,
        None => {
            let cands: Vec<&Long> = longs.iter().filter(|l| l.name.starts_with(name)).collect();
            match cands.as_slice() {
                [] => return Item::Bad(format!("{prog}: unrecognized option '--{body}'\n")),
                [one] => *one,
                [first, rest @ ..] => {
                    if rest
                        .iter()
                        .all(|l| l.has_arg == first.has_arg && l.val == first.val)
                    {
                        *first
                    } else {
                        let mut m =
                            format!("{prog}: option '--{body}' is ambiguous; possibilities:");
                        for l in &cands {
                            m.push_str(&format!(" '--{}'", l.name));
                        }
                        m.push('\n');
                        return Item::Bad(m);
                    }
                }
            }
        }
    };
    match found.has_arg {
        HasArg::No if value.is_some() => Item::Bad(format!(
            "{prog}: option '--{}' doesn't allow an argument\n",
            found.name
        )),
        HasArg::No => Item::Opt(found.val, None),
        HasArg::Optional => Item::Opt(found.val, value),
        HasArg::Required => match value {
            Some(v) => Item::Opt(found.val, Some(v)),
            None if *i < args.len() => {
                *i += 1;
                Item::Opt(found.val, Some(args[*i - 1].clone()))
            }
            None => Item::Bad(format!(
                "{prog}: option '--{}' requires an argument\n",
                found.name
            )),
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
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
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
                Item::Opt('m' as u32, Some("3".into())),
                Item::Opt('a' as u32, Some("shm".into())),
                Item::Opt('a' as u32, None),
                Item::Opt('m' as u32, Some("4".into())),
            ]
        );
        assert_eq!(r.operands, vec!["x", "-v"]);
    }

    #[test]
    fn glibc_messages() {
        let msg = |args: &[&str]| match p(args).items.pop() {
            Some(Item::Bad(m)) => m,
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
}
