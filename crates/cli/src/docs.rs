//! `ipcns man` and `ipcns completions bash|zsh|fish`: the manual page and
//! the shell completions, made from the help texts themselves (`help.rs`
//! and each command's USAGE), so that they cannot say other than `--help`
//! says. The manual is ipcns(1): the overview, then one section per
//! command with its help as it prints. The completions offer the
//! commands, each command's subcommands (the words after `ipcns CMD` on
//! its usage lines) and its options (every `-x` and `--long` its help
//! names).

use crate::help;

/// The commands, in the order of `ipcns help`.
pub const COMMANDS: [&str; 10] = [
    "run", "ipcs", "ipcmk", "ipcrm", "sysctl", "proc", "top", "ns", "idmap", "bench",
];

/// The commands that are not topics of their own.
const OTHERS: [&str; 4] = ["help", "man", "completions", "--version"];

/// Escapes a line of text for roff: backslashes, and a leading `.` or `'`.
fn roff_line(l: &str) -> String {
    let l = l.replace('\\', "\\e").replace('-', "\\-");
    if l.starts_with('.') || l.starts_with('\'') {
        format!("\\&{l}")
    } else {
        l
    }
}

/// ipcns(1) in roff (man(7) macros).
pub fn man() -> String {
    let mut m = String::new();
    m.push_str(&format!(
        ".TH IPCNS 1 \"\" \"ipcns {}\" \"User Commands\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    let overview = help::USAGE;
    let first = overview.lines().next().unwrap_or("ipcns");
    let what = first.strip_prefix("ipcns: ").unwrap_or(first);
    m.push_str(".SH NAME\nipcns \\- ");
    m.push_str(&roff_line(what.trim_end_matches(',')));
    m.push('\n');
    m.push_str(".SH SYNOPSIS\n.B ipcns\n.I COMMAND\n[\\fIARGS\\fR]\n");
    m.push_str(".SH DESCRIPTION\n.nf\n");
    for l in overview.lines() {
        m.push_str(&roff_line(l));
        m.push('\n');
    }
    m.push_str(".fi\n");
    for c in COMMANDS {
        let text = help::topic(c).unwrap_or_default();
        m.push_str(&format!(".SH \"IPCNS {}\"\n.nf\n", c.to_uppercase()));
        for l in text.lines() {
            m.push_str(&roff_line(l));
            m.push('\n');
        }
        m.push_str(".fi\n");
    }
    m.push_str(
        ".SH ENVIRONMENT\n.nf\n\
         IPCNS          the namespace when no \\-\\-ns is given (default: default)\n\
         IPCNS_DIR      the namespaces' directory (default: /dev/shm/ipcns\\-UID)\n\
         IPCNS_PRELOAD  the library ipcns run preloads\n\
         IPCNS_PRELOAD_MUSL  its musl build, for programs whose interpreter is musl's\n\
         IPCNS_SHARED   1: attach to namespaces other users created shared\n\
         .fi\n\
         .SH \"SEE ALSO\"\n\
         .BR ipcs (1),\n\
         .BR ipcmk (1),\n\
         .BR ipcrm (1),\n\
         .BR sysvipc (7),\n\
         .BR ipc_namespaces (7)\n",
    );
    m
}

/// The subcommands and options a command's help names.
fn words(c: &str) -> (Vec<String>, Vec<String>) {
    let text = help::topic(c).unwrap_or_default();
    let mut subs = Vec::new();
    let mut opts = Vec::new();
    for l in text.lines() {
        // A line about building or running something else names its
        // options, not ours.
        if l.contains("cargo ") {
            continue;
        }
        // "usage: ipcns CMD SUB ..." and "       ipcns CMD SUB ..." (not
        // prose that starts with "ipcns CMD").
        let usage_line = l.starts_with("usage:") || l.starts_with(' ');
        let t = l.trim_start().trim_start_matches("usage:").trim_start();
        if let Some(rest) = t
            .strip_prefix(&format!("ipcns {c} "))
            .filter(|_| usage_line)
        {
            for w in rest.split(['|', ' ']) {
                if !w.is_empty()
                    && w.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
                    && !w.starts_with('-')
                    && !subs.iter().any(|s| s == w)
                {
                    subs.push(w.to_string());
                }
                if w.starts_with('[') || w.starts_with('-') || w.chars().any(char::is_uppercase) {
                    break;
                }
            }
        }
        for tok in l.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-')) {
            let long = tok.len() > 2
                && tok.starts_with("--")
                && tok[2..]
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-');
            let short =
                tok.len() == 2 && tok.starts_with('-') && tok.as_bytes()[1].is_ascii_alphabetic();
            if (long || short) && !opts.iter().any(|o| o == tok) {
                opts.push(tok.to_string());
            }
        }
    }
    if c == "bench" {
        // Its benchmarks are the first usage line's alternatives.
        subs = text
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(3))
            .map(|alts| alts.split('|').map(str::to_string).collect())
            .unwrap_or_default();
    }
    (subs, opts)
}

/// The completion script for `shell`.
pub fn completions(shell: &str) -> anyhow::Result<String> {
    let all: Vec<&str> = COMMANDS.iter().chain(OTHERS.iter()).copied().collect();
    let per: Vec<(&str, Vec<String>, Vec<String>)> = COMMANDS
        .iter()
        .map(|c| {
            let (s, o) = words(c);
            (*c, s, o)
        })
        .collect();
    Ok(match shell {
        "bash" => {
            let mut s = String::from(
                "# bash completion for ipcns (made by 'ipcns completions bash')\n\
                 _ipcns() {\n\
                 \x20   local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} words\n\
                 \x20   if [ \"$COMP_CWORD\" -eq 1 ]; then\n",
            );
            s.push_str(&format!(
                "        COMPREPLY=($(compgen -W '{}' -- \"$cur\")); return\n    fi\n    case $cmd in\n",
                all.join(" ")
            ));
            for (c, subs, opts) in &per {
                let mut w = subs.clone();
                w.extend(opts.iter().cloned());
                s.push_str(&format!("        {c}) words='{}' ;;\n", w.join(" ")));
            }
            s.push_str(&format!(
                "        help) words='{}' ;;\n        completions) words='bash zsh fish' ;;\n        *) words='' ;;\n    esac\n",
                COMMANDS.join(" ")
            ));
            s.push_str(
                "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -o default -F _ipcns ipcns\n",
            );
            s
        }
        "zsh" => {
            let mut s = String::from(
                "#compdef ipcns\n# zsh completion for ipcns (made by 'ipcns completions zsh')\n\
                 _ipcns() {\n  local -a words_\n  if (( CURRENT == 2 )); then\n",
            );
            s.push_str(&format!(
                "    compadd -- {}\n    return\n  fi\n  case ${{words[2]}} in\n",
                all.join(" ")
            ));
            for (c, subs, opts) in &per {
                let mut w = subs.clone();
                w.extend(opts.iter().cloned());
                s.push_str(&format!("    {c}) words_=({}) ;;\n", w.join(" ")));
            }
            s.push_str(&format!(
                "    help) words_=({}) ;;\n    completions) words_=(bash zsh fish) ;;\n  esac\n  compadd -- $words_\n  _files\n}}\n_ipcns \"$@\"\n",
                COMMANDS.join(" ")
            ));
            s
        }
        "fish" => {
            let mut s = String::from(
                "# fish completion for ipcns (made by 'ipcns completions fish')\ncomplete -c ipcns -f\n",
            );
            s.push_str(&format!(
                "complete -c ipcns -n __fish_use_subcommand -a '{}'\n",
                all.join(" ")
            ));
            for (c, subs, opts) in &per {
                let mut w = subs.clone();
                w.extend(opts.iter().cloned());
                s.push_str(&format!(
                    "complete -c ipcns -n '__fish_seen_subcommand_from {c}' -a '{}'\n",
                    w.join(" ")
                ));
            }
            s.push_str(&format!(
                "complete -c ipcns -n '__fish_seen_subcommand_from help' -a '{}'\n\
                 complete -c ipcns -n '__fish_seen_subcommand_from completions' -a 'bash zsh fish'\n",
                COMMANDS.join(" ")
            ));
            s
        }
        other => anyhow::bail!(
            "completions: {other:?} is not bash, zsh or fish\nTry 'ipcns help' for more information."
        ),
    })
}
