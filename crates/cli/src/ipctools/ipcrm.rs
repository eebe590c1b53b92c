//! `ipcrm`: util-linux 2.38.1's sys-utils/ipcrm.c over a [`SysV`]: removal
//! by id or key, `-a` by category, and the old `ipcrm shm|msg|sem ID...`.
//! Options are acted on in order; any failure makes the exit status 1.

use super::getopt::{self, HasArg, Item, Long};
use super::{Exit, Tool, cnum};
use ipcns::abi;
use ipcns::sysv::{self, SysV};
use std::io::Write;

pub const USAGE: &str = "
Usage:
 ipcrm [options]
 ipcrm shm|msg|sem <id>...

Remove certain IPC resources (of an ipcns namespace: --ns NAME).

Options:
 -m, --shmem-id <id>        remove shared memory segment by id
 -M, --shmem-key <key>      remove shared memory segment by key
 -q, --queue-id <id>        remove message queue by id
 -Q, --queue-key <key>      remove message queue by key
 -s, --semaphore-id <id>    remove semaphore by id
 -S, --semaphore-key <key>  remove semaphore by key
 -a, --all[=shm|msg|sem]    remove all (in the specified category)
 -v, --verbose              explain what is being done

 -h, --help                 display this help
 -V, --version              display version

For more details see ipcrm(1).
";

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
        name: "queue-id",
        has_arg: HasArg::Required,
        val: 'q' as u32,
    },
    Long {
        name: "queue-key",
        has_arg: HasArg::Required,
        val: 'Q' as u32,
    },
    Long {
        name: "semaphore-id",
        has_arg: HasArg::Required,
        val: 's' as u32,
    },
    Long {
        name: "semaphore-key",
        has_arg: HasArg::Required,
        val: 'S' as u32,
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
    Long {
        name: "version",
        has_arg: HasArg::No,
        val: 'V' as u32,
    },
    Long {
        name: "help",
        has_arg: HasArg::No,
        val: 'h' as u32,
    },
];

/// `type_id`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Shm,
    Sem,
    Msg,
    All,
}

/// One thing the command line asks for, in its order.
enum Step {
    /// `-v`: say what is removed from here on.
    Verbose,
    /// `-m|-q|-s ID`, and the ids of the old form.
    Id(Type, i32),
    /// `-M|-Q|-S KEY`: the key, and its text as given (for messages).
    Key(Type, i32, Vec<u8>),
    /// A failure known from the text alone (`illegal key (0)`, the old
    /// form's `invalid id: X`): this warning, and exit status 1.
    Failed(Vec<u8>),
}

/// How the command line ends once its steps (and `-a`) ran.
enum End {
    /// Exit 0 if every step succeeded, else 1.
    Status,
    /// The old form: `resource(s) deleted` if every step succeeded, else 1.
    Deleted,
    /// `-h`: the help on standard output, exit 0.
    Help,
    /// `-V`.
    Version,
    /// getopt's message, then `Try 'ipcrm --help'`.
    BadOption(Vec<u8>),
    /// `warnx(msg)`, then `Try 'ipcrm --help'`.
    Usage(Vec<u8>),
    /// `errx(msg)`.
    Errx(Vec<u8>),
    /// A number that did not parse: `failed to parse argument: 'X'`.
    Number(cnum::NumError, Vec<u8>),
}

/// The command line, read: ipcrm.c acts on each option as getopt returns
/// it, so this is the list of those actions, then `-a`, then how it ends.
pub struct Plan {
    steps: Vec<Step>,
    all: Option<Type>,
    end: End,
}

impl Plan {
    /// Whether running the plan touches the namespace (otherwise it only
    /// prints).
    pub fn needs_namespace(&self) -> bool {
        self.all.is_some()
            || self
                .steps
                .iter()
                .any(|s| matches!(s, Step::Id(..) | Step::Key(..)))
    }
}

/// The plan of the old form `ipcrm shm|msg|sem ID...` (`deprecated_main`);
/// `None` when argv[1] is not one of those words.
fn deprecated(args: &[Vec<u8>]) -> Option<Plan> {
    let ty = match args.first()?.as_slice() {
        b"shm" => Type::Shm,
        b"msg" => Type::Msg,
        b"sem" => Type::Sem,
        _ => return None,
    };
    if args.len() < 2 {
        return Some(Plan {
            steps: Vec::new(),
            all: None,
            end: End::Usage(b"not enough arguments".to_vec()),
        });
    }
    let steps = args[1..]
        .iter()
        .map(|a| {
            // strtoul(argv, &end, 10), taken as an int.
            let r = cnum::strtoul(a, 10);
            if r.erange || r.end != a.len() {
                Step::Failed([b"invalid id: ".as_slice(), a].concat())
            } else {
                Step::Id(ty, r.value as i32)
            }
        })
        .collect();
    Some(Plan {
        steps,
        all: None,
        end: End::Deleted,
    })
}

/// Reads the command line as ipcrm.c's `main` does, without acting on it.
pub fn parse(args: &[Vec<u8>]) -> Plan {
    // Without arguments, nothing to do.
    if args.is_empty() {
        return Plan {
            steps: Vec::new(),
            all: None,
            end: End::Status,
        };
    }
    if let Some(plan) = deprecated(args) {
        return plan;
    }
    let mut steps = Vec::new();
    let mut all = None;
    let ended = |steps, end| Plan {
        steps,
        all: None,
        end,
    };
    let parsed = getopt::parse("ipcrm", args, "q:m:s:Q:M:S:a::vhV", LONGS);
    for item in parsed.items {
        let (opt, arg) = match item {
            Item::Opt(o, a) => (o, a),
            Item::Bad(m) => return ended(steps, End::BadOption(m)),
        };
        let c = char::from_u32(opt).unwrap_or('\0');
        match c {
            'M' | 'Q' | 'S' | 'm' | 'q' | 's' => {
                let arg = arg.unwrap_or_default();
                let ty = match c.to_ascii_lowercase() {
                    'm' => Type::Shm,
                    'q' => Type::Msg,
                    _ => Type::Sem,
                };
                if c.is_ascii_lowercase() {
                    match cnum::strtos32(&arg) {
                        Ok(id) => steps.push(Step::Id(ty, id)),
                        Err(e) => return ended(steps, End::Number(e, arg)),
                    }
                    continue;
                }
                // `key_to_id`: a key in hex or decimal; 0 is refused.
                let r = cnum::strtoul(&arg, 0);
                if arg.is_empty() || r.erange || r.end == 0 || r.end != arg.len() {
                    let e = if r.erange {
                        cnum::NumError::Errno(libc::ERANGE)
                    } else {
                        cnum::NumError::Invalid
                    };
                    return ended(steps, End::Number(e, arg));
                }
                let key = r.value as i32;
                if key == 0 {
                    steps.push(Step::Failed([b"illegal key (", &arg[..], b")"].concat()));
                } else {
                    steps.push(Step::Key(ty, key, arg));
                }
            }
            'a' => {
                all = Some(match arg.as_deref() {
                    None => Type::All,
                    Some(b"shm") => Type::Shm,
                    Some(b"msg") => Type::Msg,
                    Some(b"sem") => Type::Sem,
                    Some(other) => {
                        let m = [b"unknown argument: ".as_slice(), other].concat();
                        return ended(steps, End::Errx(m));
                    }
                });
            }
            'v' => steps.push(Step::Verbose),
            'h' => return ended(steps, End::Help),
            'V' => return ended(steps, End::Version),
            _ => return ended(steps, End::BadOption(Vec::new())),
        }
    }
    let end = match parsed.operands.first() {
        Some(extra) => End::Usage([b"unknown argument: ".as_slice(), extra].concat()),
        None => End::Status,
    };
    Plan { steps, all, end }
}

/// Runs a plan; `sys` is the namespace, given when the plan
/// [needs one](Plan::needs_namespace).
pub fn run(t: &mut Tool, sys: Option<&dyn SysV>, plan: Plan) -> Result<(), Exit> {
    let mut rm = Rm {
        sys,
        verbose: false,
    };
    let mut failed = 0;
    for step in plan.steps {
        let ok = match step {
            Step::Verbose => {
                rm.verbose = true;
                true
            }
            Step::Failed(m) => {
                t.warnx(m);
                false
            }
            Step::Id(ty, id) => rm.remove_id(t, ty, false, id)?,
            Step::Key(ty, key, text) => match rm.key_to_id(t, ty, key, &text)? {
                Some(id) => rm.remove_id(t, ty, true, id)?,
                None => false,
            },
        };
        failed += usize::from(!ok);
    }
    if let Some(ty) = plan.all {
        failed += usize::from(!rm.remove_all(t, ty)?);
    }
    let status = if failed == 0 {
        Ok(())
    } else {
        Err(super::FAILURE)
    };
    match plan.end {
        End::Status => status,
        End::Deleted => status.map(|()| {
            let _ = writeln!(t.out, "resource(s) deleted");
        }),
        End::Help => {
            t.out.extend_from_slice(USAGE.as_bytes());
            Ok(())
        }
        End::Version => Err(t.version()),
        End::BadOption(m) => {
            t.stderr(&m);
            Err(t.errtryhelp())
        }
        End::Usage(m) => {
            t.warnx(m);
            Err(t.errtryhelp())
        }
        End::Errx(m) => Err(t.errx(m)),
        End::Number(e, arg) => Err(t.num_err(e, "failed to parse argument", &arg)),
    }
}

struct Rm<'a> {
    sys: Option<&'a dyn SysV>,
    verbose: bool,
}

impl<'a> Rm<'a> {
    /// The namespace: present whenever a step that removes runs.
    fn sys(&self) -> &'a dyn SysV {
        self.sys
            .expect("Plan::needs_namespace gives a namespace to plans that remove")
    }

    /// `remove_id`: `*ctl(id, IPC_RMID)`; false (after a warning) on
    /// failure; an errno outside the expected ones ends the program.
    fn remove_id(&self, t: &mut Tool, ty: Type, iskey: bool, id: i32) -> Result<bool, Exit> {
        let r = match ty {
            Type::Shm => {
                if self.verbose {
                    let _ = writeln!(t.out, "removing shared memory segment id `{id}'");
                }
                self.sys()
                    .shmctl(id, abi::IPC_RMID, ipcns::shm::ShmArg::None)
            }
            Type::Msg => {
                if self.verbose {
                    let _ = writeln!(t.out, "removing message queue id `{id}'");
                }
                self.sys()
                    .msgctl(id, abi::IPC_RMID, ipcns::msg::MsgArg::None)
            }
            Type::Sem => {
                if self.verbose {
                    let _ = writeln!(t.out, "removing semaphore id `{id}'");
                }
                self.sys()
                    .semctl(id, 0, abi::IPC_RMID, ipcns::sem::SemArg::Val(0))
            }
            Type::All => return Err(t.errx("impossible occurred")),
        };
        let Err(e) = r else {
            return Ok(true);
        };
        let what = if iskey { "key" } else { "id" };
        let msg = match e.raw() {
            libc::EACCES | libc::EPERM => format!("permission denied for {what}"),
            libc::EINVAL => format!("invalid {what}"),
            libc::EIDRM => format!("already removed {what}"),
            n => return Err(t.err(n, format!("{what} failed"))),
        };
        t.warnx(format!("{msg} ({id})"));
        Ok(false)
    }

    /// `key_to_id`: the id under `key` (`text` as given), or `None` after
    /// a warning.
    fn key_to_id(
        &self,
        t: &mut Tool,
        ty: Type,
        key: i32,
        text: &[u8],
    ) -> Result<Option<i32>, Exit> {
        let got = match ty {
            Type::Shm => self.sys().shmget(key, 0, 0),
            Type::Msg => self.sys().msgget(key, 0),
            _ => self.sys().semget(key, 0, 0),
        };
        match got {
            Ok(id) => Ok(Some(id)),
            Err(e) => {
                let msg = match e.raw() {
                    libc::EACCES => "permission denied for key",
                    libc::EIDRM => "already removed key",
                    libc::ENOENT => "invalid key",
                    n => return Err(t.err(n, "key failed")),
                };
                t.warnx([msg.as_bytes(), b" (", text, b")"].concat());
                Ok(None)
            }
        }
    }

    /// `remove_all`: every object of the category readable with `*_STAT`
    /// (indexes 0 to the `*_INFO` maximum), segments, then sets, then queues.
    fn remove_all(&self, t: &mut Tool, ty: Type) -> Result<bool, Exit> {
        let mut ok = true;
        if ty == Type::Shm || ty == Type::All {
            let Ok((maxid, _)) = sysv::shm_shm_info(self.sys()) else {
                return Err(t.errx("kernel not configured for shared memory"));
            };
            for idx in 0..=maxid {
                if let Ok((id, _)) = sysv::shm_stat(self.sys(), idx, abi::SHM_STAT) {
                    ok &= self.remove_id(t, Type::Shm, false, id)?;
                }
            }
        }
        if ty == Type::Sem || ty == Type::All {
            let Ok((maxid, _)) = sysv::sem_info(self.sys(), abi::SEM_INFO) else {
                return Err(t.errx("kernel not configured for semaphores"));
            };
            for idx in 0..=maxid {
                if let Ok((id, _)) = sysv::sem_stat(self.sys(), idx, abi::SEM_STAT) {
                    ok &= self.remove_id(t, Type::Sem, false, id)?;
                }
            }
        }
        if ty == Type::Msg || ty == Type::All {
            let Ok((maxid, _)) = sysv::msg_info(self.sys(), abi::MSG_INFO) else {
                return Err(t.errx("kernel not configured for message queues"));
            };
            for idx in 0..=maxid {
                if let Ok((id, _)) = sysv::msg_stat(self.sys(), idx, abi::MSG_STAT) {
                    ok &= self.remove_id(t, Type::Msg, false, id)?;
                }
            }
        }
        Ok(ok)
    }
}
