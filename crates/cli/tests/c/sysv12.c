/* sysv12.c - all twelve System V IPC calls, as a transcript to compare.
 *
 * usage: sysv12               every scenario, one line per step
 *        sysv12 mixed-parent STATIC
 *                             make a set, a queue and a segment by key, then
 *                             fork and exec STATIC (this program built
 *                             statically) as mixed-child on them
 *        (exec-undo, exec-shm and mixed-child are its own exec'd modes)
 *
 * Made to be built every way a program escapes an LD_PRELOAD library
 * (gcc -static, musl-gcc, musl-gcc -static) as well as dynamically with
 * glibc: only libc, no glibc extension (errno and signal names are our
 * own tables). It is run on the kernel in a fresh IPC namespace and under
 * `ipcns run --strict --private --shared`, and the two transcripts must
 * be equal (crates/cli/tests/cli/static_programs.rs). So it prints
 * nothing that differs between two faithful runs: no pid, address or
 * time, only their relations (a pid is `0`, `me`, `parent` or the name
 * of a child; a time is `0` or `now`; an address is `aligned`, or the
 * one asked for or not).
 * Ids are printed as they are: ipcns numbers them as the kernel does, and
 * a fresh namespace on either side starts alike.
 *
 * Output order is deterministic: a parent prints nothing of its own while
 * a child it forked runs (its lines are held and printed after waitpid,
 * see `kid` and `reap`), and a child prints only while its parent waits.
 * A step whose failure makes the rest meaningless prints `FATAL: ...`
 * and exits 1. Nothing hangs: a parent's wait for a child's IPC call is
 * skipped if the child is gone and bounded by a 3 s alarm (see `guard`),
 * and every process has an alarm() watchdog. Exit status 0 when the
 * program ran through, whatever the values it printed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_EXCEPT
#define MSG_EXCEPT 020000
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif
#ifndef SHM_DEST
#define SHM_DEST 01000
#endif
#ifndef SHM_RND
#define SHM_RND 020000
#endif

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

/* The keys of the objects made by key (nothing else uses them in a
 * fresh namespace). */
#define KEY_SEM 0x5c120001
#define KEY_MSG 0x5c120002
#define KEY_SHM 0x5c120003
#define KEY_DENY_SEM 0x5c120011
#define KEY_DENY_MSG 0x5c120012
#define KEY_DENY_SHM 0x5c120013
#define KEY_MIX_SEM 0x5c120021
#define KEY_MIX_MSG 0x5c120022
#define KEY_MIX_SHM 0x5c120023
#define KEY_ABSENT 0x5c1200ff

/* ---- output ---------------------------------------------------------- */

static const char *part = "start"; /* the scenario, first on each line */
static const char *who = "";       /* "" in the main process, else its role */
static char held[1 << 16];         /* lines held while a child runs */
static size_t nheld;
static int holding;
static int kids; /* children forked and not yet reaped */

static void emit(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(1, s, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			_exit(3);
		}
		s += w;
		n -= (size_t)w;
	}
}

/* One line: `PART WHO: TEXT`; held while a child runs. Keeps errno. */
static void say(const char *fmt, ...)
{
	int saved = errno;
	char line[700];
	int n = snprintf(line, sizeof line, "%s%s%s: ", part, *who ? " " : "", who);
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	if (holding && nheld + (size_t)n <= sizeof held) {
		memcpy(held + nheld, line, (size_t)n);
		nheld += (size_t)n;
	} else {
		emit(line, (size_t)n);
	}
	errno = saved;
}

static void release(void)
{
	emit(held, nheld);
	nheld = 0;
	holding = 0;
}

static void fatal(const char *what)
{
	say("FATAL: %s", what);
	release();
	if (*who)
		_exit(1);
	exit(1);
}

static void need(int ok, const char *what)
{
	if (!ok)
		fatal(what);
}

static const char *errname(int e)
{
	switch (e) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EINTR: return "EINTR";
	case E2BIG: return "E2BIG";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EEXIST: return "EEXIST";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case EFBIG: return "EFBIG";
	case ERANGE: return "ERANGE";
	case ENOSYS: return "ENOSYS";
	case ENOMSG: return "ENOMSG";
	case EIDRM: return "EIDRM";
	case EOVERFLOW: return "EOVERFLOW";
	case ENOTSUP: return "ENOTSUP";
	}
	static char other[32];
	snprintf(other, sizeof other, "errno %d", e);
	return other;
}

static const char *signame(int s)
{
	switch (s) {
	case SIGKILL: return "SIGKILL";
	case SIGSEGV: return "SIGSEGV";
	case SIGBUS: return "SIGBUS";
	case SIGALRM: return "SIGALRM";
	case SIGUSR1: return "SIGUSR1";
	case SIGABRT: return "SIGABRT";
	case SIGSYS: return "SIGSYS";
	case SIGTERM: return "SIGTERM";
	}
	static char other[32];
	snprintf(other, sizeof other, "signal %d", s);
	return other;
}

/* The errno of the last call made through DO. */
static int err;
#define DO(call) ({ errno = 0; long r_ = (long)(call); err = errno; r_; })

/* A result: the value, or `-1 ENAME` (from `err`). Four rotating buffers. */
static const char *rv(long r)
{
	static char b[4][48];
	static int i;
	char *s = b[i++ % 4];
	if (r == -1)
		snprintf(s, 48, "-1 %s", errname(err));
	else
		snprintf(s, 48, "%ld", r);
	return s;
}

/* ---- pids, times, waiting -------------------------------------------- */

static struct {
	pid_t pid;
	const char *name;
} names[64];
static int nnames;

static void name_pid(pid_t p, const char *name)
{
	if (nnames < 64) {
		names[nnames].pid = p;
		names[nnames++].name = name;
	}
}

/* A pid as a relation: 0, me, parent, a child's name, or other. */
static const char *rel(pid_t p)
{
	if (p == 0)
		return "0";
	if (p == getpid())
		return "me";
	if (p == getppid())
		return "parent";
	for (int i = nnames - 1; i >= 0; i--)
		if (names[i].pid == p)
			return names[i].name;
	return "other";
}

/* A time: 0, now (within the last few seconds: the kernel's clock is
 * tick-granular and can lag), or other. */
static const char *when(time_t t)
{
	time_t now = time(NULL);
	if (t == 0)
		return "0";
	if (t <= now + 1 && t >= now - 5)
		return "now";
	return "other";
}

static void ms(long n)
{
	struct timespec ts = { n / 1000, (n % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The watchdogs: the whole run, and each child or exec'd image. */
#define WATCHDOG 30
#define KID_WATCHDOG 5

/* Set by SIGCHLD (cleared at each fork): a child ended. */
static volatile sig_atomic_t child_gone;
static void on_chld(int s) { (void)s; child_gone = 1; }

/* Set while a parent waits for a child's IPC call (see `guard`). */
static volatile sig_atomic_t guarding;

/* SIGALRM: ends a guarded wait with EINTR, else ends the process as the
 * default action does (the watchdog). */
static void on_alrm(int s)
{
	if (!guarding) {
		signal(s, SIG_DFL);
		raise(s);
	}
}

/* Before (on) and after (off) a parent's call that blocks until its
 * child's IPC call: whether to make it at all (not if the child already
 * ended), and 3 s at most (the call fails with EINTR). On the kernel the
 * child answers within milliseconds. */
static int guard(int on)
{
	if (on) {
		if (child_gone)
			return 0;
		guarding = 1;
		alarm(3);
	} else {
		alarm(WATCHDOG);
		guarding = 0;
	}
	return 1;
}

/* fork: the child prints at once as WHO, with its own watchdog; the
 * parent holds its lines until every child is reaped. */
static pid_t kid(const char *name)
{
	child_gone = 0;
	pid_t p = fork();
	need(p >= 0, "fork");
	if (p == 0) {
		nheld = 0;
		holding = 0;
		kids = 0;
		who = name;
		signal(SIGCHLD, SIG_DFL);
		alarm(KID_WATCHDOG);
		return 0;
	}
	name_pid(p, name);
	kids++;
	holding = 1;
	return p;
}

/* waitpid, and how the child ended; the held lines once none is left. */
static const char *reap(pid_t p)
{
	static char how[2][48];
	static int i;
	char *s = how[i++ % 2];
	int st;
	while (waitpid(p, &st, 0) < 0)
		need(errno == EINTR, "waitpid");
	if (--kids == 0)
		release();
	if (WIFEXITED(st))
		snprintf(s, 48, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(s, 48, "killed by %s", signame(WTERMSIG(st)));
	else
		snprintf(s, 48, "status %#x", st);
	return s;
}

/* Until semctl(id, num, cmd) gives `want` (3 s at most): the last value. */
static int await_count(int id, int num, int cmd, int want)
{
	int v = -1;
	for (int i = 0; i < 3000; i++) {
		v = semctl(id, num, cmd);
		if (v == want)
			break;
		ms(1);
	}
	return v;
}

/* Until process p sleeps (3 s at most), then 50 ms more: a child that
 * said it is about to block in msgsnd or msgrcv is blocked there then.
 * Nothing of it is printed: the transcript does not depend on it. */
static void await_sleep(pid_t p)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
	for (int i = 0; i < 3000; i++) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			break;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			break;
		buf[n] = 0;
		char *c = strrchr(buf, ')');
		if (c && c[1] == ' ' && c[2] == 'S')
			break;
		ms(1);
	}
	ms(50);
}

/* Until the other end of a pipe writes a byte or is closed. */
static void await_pipe(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

static void exec_self(const char *mode, long id)
{
	char arg[32];
	snprintf(arg, sizeof arg, "%ld", id);
	execl("/proc/self/exe", "sysv12", mode, arg, (char *)NULL);
	fatal("exec /proc/self/exe");
}

/* ---- status lines ------------------------------------------------------ */

static void sem_stat(int id)
{
	struct semid_ds ds;
	union semun u = { .buf = &ds };
	long r = DO(semctl(id, 0, IPC_STAT, u));
	if (r < 0) {
		say("semctl(%d, IPC_STAT) = %s", id, rv(r));
		return;
	}
	say("semctl(%d, IPC_STAT) = 0: key %#x nsems %lu mode %o uid %s cuid %s otime %s ctime %s",
	    id, (unsigned)ds.sem_perm.__key, (unsigned long)ds.sem_nsems,
	    (unsigned)ds.sem_perm.mode, ds.sem_perm.uid == getuid() ? "me" : "other",
	    ds.sem_perm.cuid == getuid() ? "me" : "other", when(ds.sem_otime),
	    when(ds.sem_ctime));
}

static void sem_vals(int id, int num)
{
	long v = DO(semctl(id, num, GETVAL));
	const char *sv = rv(v);
	long p = DO(semctl(id, num, GETPID));
	const char *sp = p < 0 ? rv(p) : rel((pid_t)p);
	long n = DO(semctl(id, num, GETNCNT));
	const char *sn = rv(n);
	long z = DO(semctl(id, num, GETZCNT));
	say("sem %d: GETVAL %s GETPID %s GETNCNT %s GETZCNT %s", num, sv, sp, sn, rv(z));
}

static void msg_stat(int id)
{
	struct msqid_ds ds;
	long r = DO(msgctl(id, IPC_STAT, &ds));
	if (r < 0) {
		say("msgctl(%d, IPC_STAT) = %s", id, rv(r));
		return;
	}
	say("msgctl(%d, IPC_STAT) = 0: key %#x mode %o qnum %lu cbytes %lu qbytes %lu lspid %s lrpid %s stime %s rtime %s ctime %s",
	    id, (unsigned)ds.msg_perm.__key, (unsigned)ds.msg_perm.mode,
	    (unsigned long)ds.msg_qnum, (unsigned long)ds.msg_cbytes,
	    (unsigned long)ds.msg_qbytes, rel(ds.msg_lspid), rel(ds.msg_lrpid),
	    when(ds.msg_stime), when(ds.msg_rtime), when(ds.msg_ctime));
}

static void shm_stat(int id)
{
	struct shmid_ds ds;
	long r = DO(shmctl(id, IPC_STAT, &ds));
	if (r < 0) {
		say("shmctl(%d, IPC_STAT) = %s", id, rv(r));
		return;
	}
	say("shmctl(%d, IPC_STAT) = 0: key %#x mode %o segsz %lu nattch %lu cpid %s lpid %s atime %s dtime %s ctime %s",
	    id, (unsigned)ds.shm_perm.__key, (unsigned)ds.shm_perm.mode,
	    (unsigned long)ds.shm_segsz, (unsigned long)ds.shm_nattch,
	    rel(ds.shm_cpid), rel(ds.shm_lpid), when(ds.shm_atime),
	    when(ds.shm_dtime), when(ds.shm_ctime));
}

static unsigned long nattch(int id)
{
	struct shmid_ds ds;
	if (shmctl(id, IPC_STAT, &ds) < 0)
		return (unsigned long)-1;
	return (unsigned long)ds.shm_nattch;
}

struct msgbuf_ {
	long mtype;
	char mtext[9000];
};

static long snd(int q, long type, const char *text, size_t len, int flg)
{
	static struct msgbuf_ m;
	m.mtype = type;
	memset(m.mtext, 'x', sizeof m.mtext);
	if (text)
		memcpy(m.mtext, text, strlen(text) + 1);
	return DO(msgsnd(q, &m, len, flg));
}

/* msgrcv into a static buffer; prints the call. */
static long rcv(int q, size_t size, long type, int flg, const char *desc)
{
	static struct msgbuf_ m;
	memset(&m, 0, sizeof m);
	long r = DO(msgrcv(q, &m, size, type, flg));
	if (r < 0)
		say("msgrcv(%s) = %s", desc, rv(r));
	else
		say("msgrcv(%s) = %ld: type %ld text \"%.*s\"", desc, r, m.mtype, (int)(r < 40 ? r : 40), m.mtext);
	return r;
}

static const char *aligned(const void *p)
{
	return ((unsigned long)p % SHMLBA) == 0 ? "aligned" : "unaligned";
}

/* shmat's result: an address's relation, or -1 ENAME. */
static const char *at(void *p, int e, const void *want)
{
	static char b[2][64];
	static int i;
	char *s = b[i++ % 2];
	if (p == (void *)-1)
		snprintf(s, 64, "-1 %s", errname(e));
	else if (want)
		snprintf(s, 64, "%s", p == want ? "the address asked" : "another address");
	else
		snprintf(s, 64, "an address (%s)", aligned(p));
	return s;
}

static volatile sig_atomic_t got_usr1;
static void on_usr1(int s) { (void)s; got_usr1 = 1; }

static void on_segv(int s)
{
	(void)s;
	say("write faulted");
	_exit(0);
}

/* ---- semaphores -------------------------------------------------------- */

static int sem_alone(void)
{
	part = "sem";
	int s = (int)DO(semget(IPC_PRIVATE, 3, IPC_CREAT | 0600));
	say("semget(IPC_PRIVATE, 3, IPC_CREAT|0600) = %s", rv(s));
	need(s >= 0, "semget IPC_PRIVATE");
	int k = (int)DO(semget(KEY_SEM, 2, IPC_CREAT | IPC_EXCL | 0640));
	say("semget(KEY_SEM, 2, IPC_CREAT|IPC_EXCL|0640) = %s", rv(k));
	need(k >= 0, "semget KEY_SEM");
	long r = DO(semget(KEY_SEM, 2, IPC_CREAT | IPC_EXCL | 0640));
	say("semget(KEY_SEM, 2, IPC_CREAT|IPC_EXCL|0640) again = %s", rv(r));
	r = DO(semget(KEY_SEM, 0, 0));
	say("semget(KEY_SEM, 0, 0) = %s", rv(r));
	r = DO(semget(KEY_SEM, 2, IPC_CREAT | 0600));
	say("semget(KEY_SEM, 2, IPC_CREAT|0600) = %s", rv(r));
	r = DO(semget(KEY_SEM, 5, 0));
	say("semget(KEY_SEM, 5, 0) = %s", rv(r));
	r = DO(semget(KEY_ABSENT, 1, 0));
	say("semget(KEY_ABSENT, 1, 0) = %s", rv(r));
	r = DO(semget(IPC_PRIVATE, 40000, 0600));
	say("semget(IPC_PRIVATE, 40000, 0600) = %s", rv(r));
	r = DO(semget(IPC_PRIVATE, 0, 0600));
	say("semget(IPC_PRIVATE, 0, 0600) = %s", rv(r));
	sem_stat(s);
	sem_stat(k);
	sem_vals(s, 0);

	union semun u = { .val = 5 };
	r = DO(semctl(s, 0, SETVAL, u));
	say("semctl(SETVAL 5) = %s", rv(r));
	sem_vals(s, 0);
	u.val = 40000;
	r = DO(semctl(s, 0, SETVAL, u));
	say("semctl(SETVAL 40000) = %s", rv(r));
	u.val = -1;
	r = DO(semctl(s, 0, SETVAL, u));
	say("semctl(SETVAL -1) = %s", rv(r));
	r = DO(semctl(s, 3, GETVAL));
	say("semctl(sem 3, GETVAL) = %s", rv(r));
	r = DO(semctl(s, 0, 4242));
	say("semctl(command 4242) = %s", rv(r));
	unsigned short all[3] = { 1, 2, 3 };
	u.array = all;
	r = DO(semctl(s, 0, SETALL, u));
	say("semctl(SETALL 1 2 3) = %s", rv(r));
	unsigned short got[3] = { 9, 9, 9 };
	u.array = got;
	r = DO(semctl(s, 0, GETALL, u));
	say("semctl(GETALL) = %s: %u %u %u", rv(r), got[0], got[1], got[2]);
	sem_vals(s, 2);
	unsigned short big[3] = { 1, 40000, 3 };
	u.array = big;
	r = DO(semctl(s, 0, SETALL, u));
	say("semctl(SETALL 1 40000 3) = %s", rv(r));
	sem_stat(s);

	struct sembuf op = { 0, -1, 0 };
	r = DO(semop(s, &op, 1));
	say("semop(sem 0 -1) = %s", rv(r));
	sem_vals(s, 0);
	sem_stat(s);
	op.sem_flg = IPC_NOWAIT;
	r = DO(semop(s, &op, 1));
	say("semop(sem 0 -1, IPC_NOWAIT) = %s", rv(r));
	struct sembuf far = { 7, 1, 0 };
	r = DO(semop(s, &far, 1));
	say("semop(sem 7 +1) = %s", rv(r));
	r = DO(semop(s, &op, 0));
	say("semop(0 operations) = %s", rv(r));
	struct sembuf two[2] = { { 1, -1, 0 }, { 2, -5, IPC_NOWAIT } };
	r = DO(semop(s, two, 2));
	say("semop(sem 1 -1, sem 2 -5 IPC_NOWAIT) = %s", rv(r));
	u.array = got;
	r = DO(semctl(s, 0, GETALL, u));
	say("semctl(GETALL) = %s: %u %u %u", rv(r), got[0], got[1], got[2]);
	struct sembuf zero = { 0, 0, IPC_NOWAIT };
	r = DO(semop(s, &zero, 1));
	say("semop(sem 0 wait-for-zero, IPC_NOWAIT) = %s", rv(r));
	zero.sem_num = 1;
	r = DO(semop(s, &zero, 1));
	say("semop(sem 1 wait-for-zero, IPC_NOWAIT) = %s", rv(r));

	struct timespec t = { 0, 100 * 1000000L };
	op.sem_flg = 0;
	double t0 = mono();
	r = DO(semtimedop(s, &op, 1, &t));
	double waited = mono() - t0;
	say("semtimedop(sem 0 -1, 100 ms) = %s, after 100 ms or more: %s", rv(r),
	    waited >= 0.099 ? "yes" : "no");
	struct timespec bad = { 0, 2000000000L };
	r = DO(semtimedop(s, &op, 1, &bad));
	say("semtimedop(tv_nsec 2000000000) = %s", rv(r));
	struct sembuf up = { 0, 1, 0 };
	r = DO(semtimedop(s, &up, 1, NULL));
	say("semtimedop(sem 0 +1, no timeout) = %s", rv(r));
	sem_vals(s, 0);

	struct semid_ds ds;
	u.buf = &ds;
	r = DO(semctl(k, 0, IPC_STAT, u));
	need(r == 0, "semctl IPC_STAT");
	ds.sem_perm.mode = 0604;
	r = DO(semctl(k, 0, IPC_SET, u));
	say("semctl(IPC_SET mode 0604) = %s", rv(r));
	sem_stat(k);
	r = DO(semctl(k, 0, IPC_RMID));
	say("semctl(IPC_RMID) = %s", rv(r));
	r = DO(semctl(k, 0, IPC_RMID));
	say("semctl(IPC_RMID) again = %s", rv(r));
	sem_stat(k);
	r = DO(semop(k, &up, 1));
	say("semop on the removed set = %s", rv(r));
	r = DO(semget(KEY_SEM, 0, 0));
	say("semget(KEY_SEM, 0, 0) = %s", rv(r));
	k = (int)DO(semget(KEY_SEM, 1, IPC_CREAT | 0600));
	say("semget(KEY_SEM, 1, IPC_CREAT|0600) = %s", rv(k));
	r = DO(semctl(k, 0, IPC_RMID));
	say("semctl(IPC_RMID) = %s", rv(r));
	r = DO(semctl(-1, 0, GETVAL));
	say("semctl(-1, GETVAL) = %s", rv(r));
	return s;
}

/* A child that takes sem 0 with SEM_UNDO and waits to be killed; returned
 * once it holds it (or ended). */
static pid_t holder(int s)
{
	int fd[2];
	need(pipe(fd) == 0, "pipe");
	pid_t c = kid("holder");
	if (c == 0) {
		close(fd[0]);
		struct sembuf op = { 0, -1, SEM_UNDO };
		long r = DO(semop(s, &op, 1));
		say("semop(sem 0 -1 SEM_UNDO) = %s", rv(r));
		need(write(fd[1], "h", 1) == 1, "write");
		for (;;)
			pause();
	}
	close(fd[1]);
	await_pipe(fd[0]);
	close(fd[0]);
	return c;
}

/* The undo of a process that exits, is killed or execs; waiters woken by
 * a child, interrupted by signals, and by the removal of their set. */
static void sem_processes(int s)
{
	part = "sem.fork";
	union semun u = { .val = 0 };
	for (int i = 0; i < 3; i++)
		semctl(s, i, SETVAL, u);
	pid_t c = kid("child");
	if (c == 0) {
		struct sembuf op = { 0, 2, 0 };
		long r = DO(semop(s, &op, 1));
		say("semop(sem 0 +2) = %s", rv(r));
		sem_vals(s, 0);
		_exit(0);
	}
	say("child: %s", reap(c));
	sem_vals(s, 0);

	part = "sem.undo-exit";
	c = kid("child");
	if (c == 0) {
		struct sembuf op[2] = { { 1, 1, SEM_UNDO }, { 0, -1, SEM_UNDO } };
		long r = DO(semop(s, op, 2));
		say("semop(sem 1 +1 SEM_UNDO, sem 0 -1 SEM_UNDO) = %s", rv(r));
		sem_vals(s, 0);
		sem_vals(s, 1);
		_exit(0);
	}
	say("child: %s", reap(c));
	sem_vals(s, 0);
	sem_vals(s, 1);

	part = "sem.undo-exec";
	c = kid("child");
	if (c == 0) {
		struct sembuf op = { 2, 1, SEM_UNDO };
		long r = DO(semop(s, &op, 1));
		say("semop(sem 2 +1 SEM_UNDO) = %s", rv(r));
		exec_self("exec-undo", s);
	}
	say("child: %s", reap(c));
	sem_vals(s, 2);

	part = "sem.undo-sigkill";
	u.val = 1;
	semctl(s, 0, SETVAL, u);
	c = holder(s);
	sem_vals(s, 0);
	kill(c, SIGKILL);
	say("holder: %s", reap(c));
	sem_vals(s, 0);

	part = "sem.undo-sigkill-wakes";
	c = holder(s);
	pid_t w = kid("waiter");
	if (w == 0) {
		struct sembuf op = { 0, -1, 0 };
		long r = DO(semop(s, &op, 1));
		_exit(r == 0 ? 0 : 10 + err);
	}
	say("GETNCNT while the waiter waits: %d", await_count(s, 0, GETNCNT, 1));
	kill(c, SIGKILL);
	say("holder: %s", reap(c));
	say("waiter: %s", reap(w));
	sem_vals(s, 0);

	part = "sem.wait-for-zero";
	u.val = 1;
	semctl(s, 1, SETVAL, u);
	c = kid("child");
	if (c == 0) {
		struct sembuf op = { 1, 0, 0 };
		long r = DO(semop(s, &op, 1));
		say("semop(sem 1 wait-for-zero) = %s", rv(r));
		_exit(0);
	}
	say("GETZCNT while the child waits: %d", await_count(s, 1, GETZCNT, 1));
	u.val = 0;
	long r = DO(semctl(s, 1, SETVAL, u));
	say("semctl(sem 1, SETVAL 0) = %s", rv(r));
	say("child: %s", reap(c));
	sem_vals(s, 1);

	for (int restart = 0; restart < 2; restart++) {
		part = restart ? "sem.eintr-sa_restart" : "sem.eintr";
		u.val = 0;
		semctl(s, 0, SETVAL, u);
		c = kid("child");
		if (c == 0) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_usr1;
			sa.sa_flags = restart ? SA_RESTART : 0;
			sigaction(SIGUSR1, &sa, NULL);
			struct sembuf op = { 0, -1, 0 };
			long r = DO(semop(s, &op, 1));
			say("semop(sem 0 -1) = %s, the handler ran: %s", rv(r), got_usr1 ? "yes" : "no");
			_exit(0);
		}
		say("GETNCNT while the child waits: %d", await_count(s, 0, GETNCNT, 1));
		kill(c, SIGUSR1);
		say("child: %s", reap(c));
		sem_vals(s, 0);
	}

	part = "sem.eidrm";
	int gone = (int)DO(semget(IPC_PRIVATE, 1, 0600));
	say("semget(IPC_PRIVATE, 1, 0600) = %s", rv(gone));
	c = kid("child");
	if (c == 0) {
		struct sembuf op = { 0, -1, 0 };
		long r = DO(semop(gone, &op, 1));
		say("semop(sem 0 -1) = %s", rv(r));
		_exit(0);
	}
	say("GETNCNT while the child waits: %d", await_count(gone, 0, GETNCNT, 1));
	r = DO(semctl(gone, 0, IPC_RMID));
	say("semctl(IPC_RMID) = %s", rv(r));
	say("child: %s", reap(c));
}

/* The exec'd image of sem.undo-exec: the undo is kept across exec. */
static void exec_undo(int s)
{
	part = "sem.undo-exec";
	who = "exec'd";
	alarm(KID_WATCHDOG);
	sem_vals(s, 2);
	exit(0);
}

/* ---- message queues --------------------------------------------------- */

static void msg_all(void)
{
	part = "msg";
	int q = (int)DO(msgget(IPC_PRIVATE, 0600));
	say("msgget(IPC_PRIVATE, 0600) = %s", rv(q));
	need(q >= 0, "msgget IPC_PRIVATE");
	int k = (int)DO(msgget(KEY_MSG, IPC_CREAT | IPC_EXCL | 0640));
	say("msgget(KEY_MSG, IPC_CREAT|IPC_EXCL|0640) = %s", rv(k));
	long r = DO(msgget(KEY_MSG, IPC_CREAT | IPC_EXCL | 0640));
	say("msgget(KEY_MSG, IPC_CREAT|IPC_EXCL|0640) again = %s", rv(r));
	r = DO(msgget(KEY_MSG, 0));
	say("msgget(KEY_MSG, 0) = %s", rv(r));
	r = DO(msgget(KEY_ABSENT, 0));
	say("msgget(KEY_ABSENT, 0) = %s", rv(r));
	msg_stat(q);

	r = snd(q, 1, "hello", 6, 0);
	say("msgsnd(type 1, 6 bytes) = %s", rv(r));
	r = snd(q, 2, "world!", 7, 0);
	say("msgsnd(type 2, 7 bytes) = %s", rv(r));
	msg_stat(q);
	r = snd(q, 0, "zero", 5, 0);
	say("msgsnd(type 0) = %s", rv(r));
	r = snd(q, 1, NULL, 8193, 0);
	say("msgsnd(8193 bytes) = %s", rv(r));
	rcv(q, 2, 1, 0, "size 2, type 1");
	rcv(q, 2, 1, MSG_NOERROR, "size 2, type 1, MSG_NOERROR");
	rcv(q, 100, 2, 0, "type 2");
	rcv(q, 100, 0, IPC_NOWAIT, "any type, IPC_NOWAIT");
	msg_stat(q);
	snd(q, 3, "three", 6, 0);
	snd(q, 1, "one", 4, 0);
	snd(q, 2, "two", 4, 0);
	snd(q, 4, "four", 5, 0);
	rcv(q, 100, -2, 0, "type -2");
	rcv(q, 100, 3, MSG_EXCEPT, "not type 3");
	rcv(q, 100, 0, 0, "any type");
	rcv(q, 100, 4, 0, "type 4");
	rcv(q, 100, -1, IPC_NOWAIT, "type -1, IPC_NOWAIT");

	struct msqid_ds ds;
	r = DO(msgctl(q, IPC_STAT, &ds));
	need(r == 0, "msgctl IPC_STAT");
	ds.msg_perm.mode = 0660;
	ds.msg_qbytes = 64;
	r = DO(msgctl(q, IPC_SET, &ds));
	say("msgctl(IPC_SET mode 0660, qbytes 64) = %s", rv(r));
	msg_stat(q);
	r = snd(q, 1, NULL, 65, IPC_NOWAIT);
	say("msgsnd(65 bytes, more than qbytes, IPC_NOWAIT) = %s", rv(r));
	r = snd(q, 1, "full", 64, 0);
	say("msgsnd(type 1, 64 bytes) = %s", rv(r));
	r = snd(q, 1, "more", 1, IPC_NOWAIT);
	say("msgsnd(1 byte, IPC_NOWAIT) = %s", rv(r));

	part = "msg.blocked-send";
	pid_t c = kid("child");
	if (c == 0) {
		r = snd(q, 9, "late", 5, 0);
		say("msgsnd(type 9, 5 bytes) = %s", rv(r));
		_exit(0);
	}
	await_sleep(c);
	rcv(q, 100, 1, 0, "type 1");
	say("child: %s", reap(c));
	msg_stat(q);
	rcv(q, 100, 9, 0, "type 9");

	part = "msg.blocked-receive";
	c = kid("child");
	if (c == 0) {
		rcv(q, 100, 5, 0, "type 5");
		_exit(0);
	}
	await_sleep(c);
	r = snd(q, 5, "wake up", 8, 0);
	say("msgsnd(type 5, 8 bytes) = %s", rv(r));
	say("child: %s", reap(c));
	msg_stat(q);

	part = "msg.parent-receives";
	/* The child lives on until the parent has its message (so that its
	 * end interrupts nothing): it waits for the pipe to close. */
	int fd[2];
	need(pipe(fd) == 0, "pipe");
	c = kid("child");
	if (c == 0) {
		close(fd[1]);
		ms(50);
		r = snd(q, 6, "from child", 11, 0);
		say("msgsnd(type 6, 11 bytes) = %s", rv(r));
		await_pipe(fd[0]);
		_exit(0);
	}
	close(fd[0]);
	if (guard(1))
		rcv(q, 100, 6, 0, "type 6");
	else
		say("msgrcv(type 6) not made: the child ended");
	guard(0);
	close(fd[1]);
	say("child: %s", reap(c));
	msg_stat(q);

	part = "msg.eidrm";
	int gone = (int)DO(msgget(IPC_PRIVATE, 0600));
	say("msgget(IPC_PRIVATE, 0600) = %s", rv(gone));
	c = kid("child");
	if (c == 0) {
		rcv(gone, 100, 0, 0, "any type");
		_exit(0);
	}
	await_sleep(c);
	r = DO(msgctl(gone, IPC_RMID, NULL));
	say("msgctl(IPC_RMID) = %s", rv(r));
	say("child: %s", reap(c));

	part = "msg.rmid";
	r = DO(msgctl(k, IPC_RMID, NULL));
	say("msgctl(IPC_RMID) = %s", rv(r));
	msg_stat(k);
	r = snd(k, 1, "x", 2, 0);
	say("msgsnd on the removed queue = %s", rv(r));
	r = DO(msgget(KEY_MSG, 0));
	say("msgget(KEY_MSG, 0) = %s", rv(r));
	r = DO(msgctl(q, IPC_RMID, NULL));
	say("msgctl(IPC_RMID) = %s", rv(r));
	r = DO(msgctl(-1, IPC_STAT, &ds));
	say("msgctl(-1, IPC_STAT) = %s", rv(r));
}

/* ---- shared memory ----------------------------------------------------- */

static void shm_all(void)
{
	part = "shm";
	int m = (int)DO(shmget(IPC_PRIVATE, 10000, 0600));
	say("shmget(IPC_PRIVATE, 10000, 0600) = %s", rv(m));
	need(m >= 0, "shmget IPC_PRIVATE");
	int k = (int)DO(shmget(KEY_SHM, 4096, IPC_CREAT | IPC_EXCL | 0640));
	say("shmget(KEY_SHM, 4096, IPC_CREAT|IPC_EXCL|0640) = %s", rv(k));
	long r = DO(shmget(KEY_SHM, 4096, IPC_CREAT | IPC_EXCL | 0640));
	say("shmget(KEY_SHM, 4096, IPC_CREAT|IPC_EXCL|0640) again = %s", rv(r));
	r = DO(shmget(KEY_SHM, 8192, 0));
	say("shmget(KEY_SHM, 8192, 0) = %s", rv(r));
	r = DO(shmget(KEY_SHM, 0, 0));
	say("shmget(KEY_SHM, 0, 0) = %s", rv(r));
	r = DO(shmget(KEY_ABSENT, 4096, 0));
	say("shmget(KEY_ABSENT, 4096, 0) = %s", rv(r));
	r = DO(shmget(IPC_PRIVATE, 0, 0600));
	say("shmget(IPC_PRIVATE, 0, 0600) = %s", rv(r));
	shm_stat(m);

	char *a = shmat(m, NULL, 0);
	int e = errno;
	say("shmat(NULL, 0) = %s", at(a, e, NULL));
	need(a != (char *)-1, "shmat");
	shm_stat(m);
	say("a fresh segment reads zero: %s", a[0] == 0 && a[9999] == 0 ? "yes" : "no");
	char *b = shmat(m, NULL, 0);
	e = errno;
	say("shmat(NULL, 0) again = %s, the first address: %s", at(b, e, NULL), b == a ? "yes" : "no");
	need(b != (char *)-1, "shmat");
	strcpy(a, "written through the first");
	strcpy(a + 9990, "end");
	say("through the second: \"%s\" \"%s\"", b, b + 9990);
	say("nattch %lu", nattch(m));

	/* A place for the segment: 16 pages reserved PROT_NONE. */
	char *place = mmap(NULL, 16 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(place != MAP_FAILED, "mmap");
	char *p = shmat(m, place, 0);
	e = errno;
	say("shmat(over a mapping, 0) = %s", at(p, e, place));
	p = shmat(m, place + 100, 0);
	e = errno;
	say("shmat(unaligned, 0) = %s", at(p, e, place));
	p = shmat(m, place + 100, SHM_RND | SHM_REMAP);
	e = errno;
	say("shmat(unaligned, SHM_RND|SHM_REMAP) = %s", at(p, e, place));
	if (p != (char *)-1) {
		say("reads \"%s\"", p);
		r = DO(shmdt(p));
		say("shmdt = %s", rv(r));
	}
	p = shmat(m, place, 0);
	e = errno;
	say("shmat(the address, now free, 0) = %s", at(p, e, place));
	if (p != (char *)-1) {
		say("nattch %lu, reads \"%s\"", nattch(m), p);
		r = DO(shmdt(p));
		say("shmdt = %s", rv(r));
	}
	r = DO(shmdt(place + 12 * 4096));
	say("shmdt(not attached) = %s", rv(r));
	r = DO(shmdt(a + 1));
	say("shmdt(unaligned) = %s", rv(r));
	munmap(place, 16 * 4096);
	p = shmat(-1, NULL, 0);
	e = errno;
	say("shmat(-1) = %s", at(p, e, NULL));
	shm_stat(m);

	part = "shm.fork";
	pid_t c = kid("child");
	if (c == 0) {
		say("nattch %lu (the two attachments inherited)", nattch(m));
		say("reads \"%s\"", a);
		strcpy(b, "written by the child");
		char *q = shmat(m, NULL, 0);
		e = errno;
		say("shmat(NULL, 0) = %s", at(q, e, NULL));
		say("nattch %lu", nattch(m));
		if (q != (char *)-1)
			strcpy(q + 5000, "middle");
		_exit(0);
	}
	say("child: %s", reap(c));
	say("reads \"%s\" \"%s\"", a, a + 5000);
	shm_stat(m);

	part = "shm.rdonly";
	c = kid("child");
	if (c == 0) {
		signal(SIGSEGV, on_segv);
		volatile char *q = shmat(m, NULL, SHM_RDONLY);
		e = errno;
		say("shmat(NULL, SHM_RDONLY) = %s", at((void *)q, e, NULL));
		if (q == (char *)-1)
			_exit(1);
		say("reads \"%s\"", (const char *)q);
		q[0] = 'X';
		say("write did not fault");
		_exit(1);
	}
	say("child: %s", reap(c));
	say("reads \"%s\"", a);

	part = "shm.exec";
	c = kid("child");
	if (c == 0) {
		char *q = shmat(m, NULL, 0);
		e = errno;
		say("shmat(NULL, 0) = %s", at(q, e, NULL));
		say("nattch %lu", nattch(m));
		exec_self("exec-shm", m);
	}
	say("child: %s", reap(c));
	shm_stat(m);

	part = "shm.rmid";
	struct shmid_ds ds;
	r = DO(shmctl(k, IPC_STAT, &ds));
	need(r == 0, "shmctl IPC_STAT");
	ds.shm_perm.mode = 0604;
	r = DO(shmctl(k, IPC_SET, &ds));
	say("shmctl(IPC_SET mode 0604) = %s", rv(r));
	char *kp = shmat(k, NULL, 0);
	e = errno;
	say("shmat(NULL, 0) = %s", at(kp, e, NULL));
	need(kp != (char *)-1, "shmat");
	strcpy(kp, "kept");
	r = DO(shmctl(k, IPC_RMID, NULL));
	say("shmctl(IPC_RMID) while attached = %s", rv(r));
	shm_stat(k);
	r = DO(shmget(KEY_SHM, 0, 0));
	say("shmget(KEY_SHM, 0, 0) = %s", rv(r));
	char *again = shmat(k, NULL, 0);
	e = errno;
	say("shmat(the removed segment) = %s", at(again, e, NULL));
	if (again != (char *)-1) {
		say("reads \"%s\", nattch %lu", again, nattch(k));
		shmdt(again);
	}
	r = DO(shmdt(kp));
	say("shmdt = %s", rv(r));
	shm_stat(k);
	r = DO(shmctl(m, IPC_RMID, NULL));
	say("shmctl(IPC_RMID) = %s", rv(r));
	shm_stat(m);
	r = DO(shmdt(a));
	say("shmdt = %s", rv(r));
	shm_stat(m);
	r = DO(shmdt(b));
	say("shmdt = %s", rv(r));
	shm_stat(m);
	r = DO(shmctl(m, IPC_RMID, NULL));
	say("shmctl(IPC_RMID) again = %s", rv(r));
}

/* The exec'd image of shm.exec: its attachment went with the old image. */
static void exec_shm(int m)
{
	part = "shm.exec";
	who = "exec'd";
	alarm(KID_WATCHDOG);
	shm_stat(m);
	exit(0);
}

/* ---- permissions ------------------------------------------------------- */

/* As root: a child that became uid and gid 65534 (without supplementary
 * groups) on objects of mode 0600 and 0604 owned by root. */
static void denied(void)
{
	part = "deny";
	if (getuid() != 0) {
		say("not root: skipped");
		return;
	}
	int s = (int)DO(semget(KEY_DENY_SEM, 1, IPC_CREAT | 0600));
	say("semget(KEY_DENY_SEM, 1, IPC_CREAT|0600) = %s", rv(s));
	int q = (int)DO(msgget(KEY_DENY_MSG, IPC_CREAT | 0600));
	say("msgget(KEY_DENY_MSG, IPC_CREAT|0600) = %s", rv(q));
	int m = (int)DO(shmget(KEY_DENY_SHM, 4096, IPC_CREAT | 0604));
	say("shmget(KEY_DENY_SHM, 4096, IPC_CREAT|0604) = %s", rv(m));
	need(s >= 0 && q >= 0 && m >= 0, "the objects to deny");
	snd(q, 1, "private", 8, 0);
	pid_t c = kid("uid 65534");
	if (c == 0) {
		need(setgroups(0, NULL) == 0, "setgroups");
		need(setresgid(65534, 65534, 65534) == 0, "setresgid");
		need(setresuid(65534, 65534, 65534) == 0, "setresuid");
		long r = DO(semget(KEY_DENY_SEM, 0, 0));
		say("semget(KEY_DENY_SEM, 0, 0) = %s", rv(r));
		r = DO(semget(KEY_DENY_SEM, 0, 0400));
		say("semget(KEY_DENY_SEM, 0, 0400) = %s", rv(r));
		struct sembuf op = { 0, 1, 0 };
		r = DO(semop(s, &op, 1));
		say("semop = %s", rv(r));
		r = DO(semctl(s, 0, GETVAL));
		say("semctl(GETVAL) = %s", rv(r));
		sem_stat(s);
		r = DO(semctl(s, 0, IPC_RMID));
		say("semctl(IPC_RMID) = %s", rv(r));
		r = DO(msgget(KEY_DENY_MSG, 0));
		say("msgget(KEY_DENY_MSG, 0) = %s", rv(r));
		r = DO(msgget(KEY_DENY_MSG, 0200));
		say("msgget(KEY_DENY_MSG, 0200) = %s", rv(r));
		r = snd(q, 1, "x", 2, IPC_NOWAIT);
		say("msgsnd = %s", rv(r));
		rcv(q, 100, 0, IPC_NOWAIT, "any type, IPC_NOWAIT");
		msg_stat(q);
		r = DO(msgctl(q, IPC_RMID, NULL));
		say("msgctl(IPC_RMID) = %s", rv(r));
		r = DO(shmget(KEY_DENY_SHM, 0, 0));
		say("shmget(KEY_DENY_SHM, 0, 0) = %s", rv(r));
		r = DO(shmget(KEY_DENY_SHM, 0, 0400));
		say("shmget(KEY_DENY_SHM, 0, 0400) = %s", rv(r));
		r = DO(shmget(KEY_DENY_SHM, 0, 0600));
		say("shmget(KEY_DENY_SHM, 0, 0600) = %s", rv(r));
		char *p = shmat(m, NULL, 0);
		int e = errno;
		say("shmat(NULL, 0) = %s", at(p, e, NULL));
		p = shmat(m, NULL, SHM_RDONLY);
		e = errno;
		say("shmat(NULL, SHM_RDONLY) = %s", at(p, e, NULL));
		shm_stat(m);
		r = DO(shmctl(m, IPC_RMID, NULL));
		say("shmctl(IPC_RMID) = %s", rv(r));
		_exit(0);
	}
	say("uid 65534: %s", reap(c));
	sem_vals(s, 0);
	msg_stat(q);
	shm_stat(m);
	semctl(s, 0, IPC_RMID);
	msgctl(q, IPC_RMID, NULL);
	shmctl(m, IPC_RMID, NULL);
}

/* ---- a dynamic parent and a static child -------------------------------- */

/* The parent (built dynamically: the library serves it) makes the three
 * objects by key, then runs STATIC as mixed-child on them: a ping-pong of
 * messages, a semaphore each way (the child's with SEM_UNDO), and data
 * through the segment. */
static void mixed_parent(const char *prog)
{
	part = "mixed";
	int s = (int)DO(semget(KEY_MIX_SEM, 2, IPC_CREAT | IPC_EXCL | 0600));
	say("semget(KEY_MIX_SEM, 2, IPC_CREAT|IPC_EXCL|0600) = %s", rv(s));
	int q = (int)DO(msgget(KEY_MIX_MSG, IPC_CREAT | IPC_EXCL | 0600));
	say("msgget(KEY_MIX_MSG, IPC_CREAT|IPC_EXCL|0600) = %s", rv(q));
	int m = (int)DO(shmget(KEY_MIX_SHM, 4096, IPC_CREAT | IPC_EXCL | 0600));
	say("shmget(KEY_MIX_SHM, 4096, IPC_CREAT|IPC_EXCL|0600) = %s", rv(m));
	need(s >= 0 && q >= 0 && m >= 0, "the objects");
	unsigned short vals[2] = { 1, 0 };
	union semun u = { .array = vals };
	long r = DO(semctl(s, 0, SETALL, u));
	say("semctl(SETALL 1 0) = %s", rv(r));
	char *p = shmat(m, NULL, 0);
	int e = errno;
	say("shmat(NULL, 0) = %s", at(p, e, NULL));
	need(p != (char *)-1, "shmat");
	strcpy(p, "the parent was here");
	r = snd(q, 1, "ping", 5, 0);
	say("msgsnd(type 1, 5 bytes) = %s", rv(r));

	pid_t c = kid("static child");
	if (c == 0) {
		char a[3][32];
		snprintf(a[0], 32, "%d", s);
		snprintf(a[1], 32, "%d", q);
		snprintf(a[2], 32, "%d", m);
		execl(prog, "sysv12", "mixed-child", a[0], a[1], a[2], (char *)NULL);
		fatal("exec of the static program");
	}
	if (guard(1))
		rcv(q, 100, 2, 0, "type 2");
	else
		say("msgrcv(type 2) not made: the child ended");
	guard(0);
	struct sembuf op = { 1, -1, 0 };
	if (guard(1)) {
		r = DO(semop(s, &op, 1));
		say("semop(sem 1 -1) = %s", rv(r));
	} else {
		say("semop(sem 1 -1) not made: the child ended");
	}
	guard(0);
	r = snd(q, 3, "bye", 4, 0);
	say("msgsnd(type 3, 4 bytes) = %s", rv(r));
	say("static child: %s", reap(c));
	sem_vals(s, 0);
	sem_vals(s, 1);
	msg_stat(q);
	say("reads \"%s\"", p);
	shm_stat(m);
	shmdt(p);
	semctl(s, 0, IPC_RMID);
	msgctl(q, IPC_RMID, NULL);
	shmctl(m, IPC_RMID, NULL);
	say("done");
}

static void mixed_child(char **ids)
{
	part = "mixed";
	who = "static child";
	alarm(KID_WATCHDOG);
	int s = atoi(ids[0]), q = atoi(ids[1]), m = atoi(ids[2]);
	long r = DO(semget(KEY_MIX_SEM, 0, 0));
	say("semget(KEY_MIX_SEM, 0, 0) = %s, the parent's: %s", rv(r), r == s ? "yes" : "no");
	r = DO(msgget(KEY_MIX_MSG, 0));
	say("msgget(KEY_MIX_MSG, 0) = %s, the parent's: %s", rv(r), r == q ? "yes" : "no");
	r = DO(shmget(KEY_MIX_SHM, 0, 0));
	say("shmget(KEY_MIX_SHM, 0, 0) = %s, the parent's: %s", rv(r), r == m ? "yes" : "no");
	need(r == m, "the parent's segment");
	rcv(q, 100, 1, 0, "type 1");
	r = snd(q, 2, "pong", 5, 0);
	say("msgsnd(type 2, 5 bytes) = %s", rv(r));
	struct sembuf take = { 0, -1, SEM_UNDO };
	r = DO(semop(s, &take, 1));
	say("semop(sem 0 -1 SEM_UNDO) = %s", rv(r));
	char *p = shmat(m, NULL, 0);
	int e = errno;
	say("shmat(NULL, 0) = %s", at(p, e, NULL));
	if (p != (char *)-1) {
		say("reads \"%s\"", p);
		strcpy(p, "the static child was here");
	}
	shm_stat(m);
	struct sembuf give = { 1, 1, 0 };
	r = DO(semop(s, &give, 1));
	say("semop(sem 1 +1) = %s", rv(r));
	rcv(q, 100, 3, 0, "type 3");
	sem_vals(s, 0);
	exit(0);
}

int main(int argc, char **argv)
{
	alarm(WATCHDOG);
	/* Without SA_RESTART: a parent's guarded wait ends with EINTR. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = on_alrm;
	sigaction(SIGALRM, &sa, NULL);
	if (argc == 3 && strcmp(argv[1], "exec-undo") == 0)
		exec_undo(atoi(argv[2]));
	if (argc == 3 && strcmp(argv[1], "exec-shm") == 0)
		exec_shm(atoi(argv[2]));
	if (argc == 5 && strcmp(argv[1], "mixed-child") == 0)
		mixed_child(argv + 2);
	if (argc == 3 && strcmp(argv[1], "mixed-parent") == 0) {
		mixed_parent(argv[2]);
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: sysv12 [mixed-parent STATIC]\n");
		return 2;
	}
	int s = sem_alone();
	sem_processes(s);
	part = "sem";
	long r = DO(semctl(s, 0, IPC_RMID));
	say("semctl(IPC_RMID) = %s", rv(r));
	msg_all();
	shm_all();
	denied();
	part = "end";
	say("ran through");
	return 0;
}
