//! Reading what `ipcs` prints (util-linux's and `ipcns ipcs`, which print
//! the same text): the default tables, `-c` (creators and owners) and
//! `-i ID` (one object's details).

/// One row of a default table: `key id owner perms ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub key: String,
    pub id: i32,
    pub owner: String,
    /// Octal digits as printed (`600`).
    pub perms: String,
    /// The columns after perms: bytes, nattch, status (segments);
    /// used-bytes, messages (queues); nsems (sets).
    pub rest: Vec<String>,
}

impl Row {
    /// Column `i` after perms, as a number.
    pub fn num(&self, i: usize) -> u64 {
        self.rest
            .get(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("ipcs row {self:?}: no number in column {i} after perms"))
    }
}

/// The three default tables of `ipcs` (those asked for; the others empty).
#[derive(Debug, Default)]
pub struct Tables {
    pub queues: Vec<Row>,
    pub segments: Vec<Row>,
    pub sets: Vec<Row>,
}

impl Tables {
    pub fn parse(text: &str) -> Tables {
        let mut t = Tables::default();
        let mut which: Option<&mut Vec<Row>> = None;
        for line in text.lines() {
            if line.starts_with("------ Message Queues") {
                which = Some(&mut t.queues);
            } else if line.starts_with("------ Shared Memory Segments") {
                which = Some(&mut t.segments);
            } else if line.starts_with("------ Semaphore Arrays") {
                which = Some(&mut t.sets);
            } else if line.starts_with("0x")
                && let Some(v) = which.as_deref_mut()
            {
                let f: Vec<&str> = line.split_whitespace().collect();
                assert!(f.len() >= 5, "ipcs row with too few columns: {line:?}");
                v.push(Row {
                    key: f[0].to_string(),
                    id: f[1]
                        .parse()
                        .unwrap_or_else(|_| panic!("ipcs row: bad id in {line:?}")),
                    owner: f[2].to_string(),
                    perms: f[3].to_string(),
                    rest: f[4..].iter().map(|s| s.to_string()).collect(),
                });
            }
        }
        t
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.segments.is_empty() && self.sets.is_empty()
    }
}

/// One row of `ipcs -c`: `id perms cuid cgid uid gid` (names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creator {
    pub id: i32,
    pub perms: String,
    pub cuid: String,
    pub cgid: String,
    pub uid: String,
    pub gid: String,
}

/// The rows of one `ipcs -X -c` table.
pub fn creators(text: &str) -> Vec<Creator> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 6 {
                return None;
            }
            Some(Creator {
                id: f[0].parse().ok()?,
                perms: f[1].to_string(),
                cuid: f[2].to_string(),
                cgid: f[3].to_string(),
                uid: f[4].to_string(),
                gid: f[5].to_string(),
            })
        })
        .collect()
}

/// One semaphore of `ipcs -s -i ID`: `semnum value ncount zcount pid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sem {
    pub value: i64,
    pub ncount: i64,
    pub zcount: i64,
    pub pid: u32,
}

/// The semaphores listed by `ipcs -s -i ID`, in order.
pub fn sems(text: &str) -> Vec<Sem> {
    let mut in_table = false;
    let mut v = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.first() == Some(&"semnum") {
            in_table = true;
            continue;
        }
        if !in_table || f.len() != 5 {
            continue;
        }
        let n: Vec<i64> = f.iter().filter_map(|x| x.parse().ok()).collect();
        if n.len() == 5 && n[0] == v.len() as i64 {
            v.push(Sem {
                value: n[1],
                ncount: n[2],
                zcount: n[3],
                pid: u32::try_from(n[4]).unwrap_or(0),
            });
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_tables() {
        let text = "\n------ Message Queues --------\nkey        msqid      owner      perms      used-bytes   messages    \n0x610a7234 0          root       644        0            0           \n\n------ Shared Memory Segments --------\nkey        shmid      owner      perms      bytes      nattch     status      \n0x9f3faabc 3          postgres   600        8192       2          dest        \n\n------ Semaphore Arrays --------\nkey        semid      owner      perms      nsems     \n0x20fd41c1 0          root       660        4         \n";
        let t = Tables::parse(text);
        assert_eq!(t.queues.len(), 1);
        assert_eq!(t.segments[0].id, 3);
        assert_eq!(t.segments[0].owner, "postgres");
        assert_eq!(t.segments[0].num(0), 8192);
        assert_eq!(t.segments[0].num(1), 2);
        assert_eq!(t.segments[0].rest[2], "dest");
        assert_eq!(t.sets[0].num(0), 4);
        let c = creators(
            "------ Semaphore Arrays Creators/Owners --------\nsemid      perms      cuid       cgid       uid        gid       \n1          600        root       root       nobody     nogroup   \n",
        );
        assert_eq!(c[0].uid, "nobody");
        assert_eq!(c[0].cuid, "root");
        let s = sems(
            "semnum     value      ncount     zcount     pid       \n0          0          3          0          1685      \n",
        );
        assert_eq!(
            s,
            vec![Sem {
                value: 0,
                ncount: 3,
                zcount: 0,
                pid: 1685
            }]
        );
    }
}
