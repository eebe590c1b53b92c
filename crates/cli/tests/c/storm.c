/* storm.c - a SEM_UNDO mutex under a SIGKILL storm.
 *
 * usage: storm KILLS WORKERS   (environment: STORM_NOWAIT=1 for the
 *        IPC_NOWAIT|SEM_UNDO variant)
 *
 * One semaphore (value 1) is a mutex taken (-1) and released (+1) with
 * SEM_UNDO by WORKERS forked processes. The parent SIGKILLs a random
 * worker every 0-2 ms, reaps it and forks a replacement, KILLS times.
 * Exclusivity is checked with an owner word in MAP_SHARED memory:
 *   on entry   old = xchg(owner, me): old must be 0, or a pid the parent
 *              marked as killed before sending SIGKILL (a holder killed
 *              inside its critical section leaves its pid there);
 *   inside     owner stays me during a short spin, and GETVAL reads 0;
 *   on exit    cas(owner, me -> 0) succeeds.
 * With STORM_NOWAIT=1 a worker takes with IPC_NOWAIT|SEM_UNDO and calls
 * sched_yield() on EAGAIN, so it never sleeps in semop.
 *
 * At the end every worker is SIGKILLed and reaped; right after the last
 * waitpid the value must be exactly 1 (every holder's undo applied, none
 * twice). Then semtimedop(-1, 2 s) must succeed at once and a second
 * semtimedop(-1, 100 ms) must fail with EAGAIN. The set is left in place
 * for inspection. Output: one line of key=value pairs; exit status 0 when
 * every check held, 1 otherwise, 2 on a setup failure.
 *
 * Before ipcns 59746a6 two reapers could finish one dead worker: its undo
 * was applied twice (value 2, two holders at once) or a freed entry was
 * applied (value 0 forever, every worker asleep).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

union semun { int val; struct semid_ds *buf; unsigned short *array; };

#define RING 256
struct shared {
	volatile int owner;        /* pid of the holder, 0 if none */
	volatile long takes;       /* successful takes */
	volatile long violations;  /* exclusivity broken */
	volatile long errors;      /* semop or semctl failures in workers */
	volatile int first_errno;
	volatile long val_nonzero; /* GETVAL != 0 read while holding */
	volatile int max_val;      /* the largest such value */
	volatile int killed[RING]; /* pids the parent is killing or killed */
};
static struct shared *sh;
static int semid, nowait;

static void die(const char *what)
{
	fprintf(stderr, "storm: %s: %s\n", what, strerrorname_np(errno));
	exit(2);
}

static int was_killed(int pid)
{
	for (int i = 0; i < RING; i++)
		if (sh->killed[i] == pid)
			return 1;
	return 0;
}

static void failed(const char *what)
{
	if (__sync_fetch_and_add(&sh->errors, 1) == 0)
		sh->first_errno = errno;
	fprintf(stderr, "storm: worker %d: %s: %s\n", getpid(), what, strerrorname_np(errno));
	_exit(3);
}

static void worker(void)
{
	int me = getpid();
	struct sembuf take = { 0, -1, SEM_UNDO | (nowait ? IPC_NOWAIT : 0) };
	struct sembuf give = { 0, +1, SEM_UNDO };
	for (;;) {
		if (semop(semid, &take, 1) < 0) {
			if (errno == EINTR)
				continue;
			if (nowait && errno == EAGAIN) {
				sched_yield();
				continue;
			}
			failed("semop(-1)");
		}
		int old = __sync_lock_test_and_set(&sh->owner, me);
		if (old != 0 && !was_killed(old))
			__sync_fetch_and_add(&sh->violations, 1);
		__sync_fetch_and_add(&sh->takes, 1);
		int v = semctl(semid, 0, GETVAL);
		if (v < 0)
			failed("semctl(GETVAL)");
		if (v != 0) {
			__sync_fetch_and_add(&sh->val_nonzero, 1);
			int m;
			while ((m = sh->max_val) < v && !__sync_bool_compare_and_swap(&sh->max_val, m, v))
				;
		}
		for (int i = 0; i < 5000; i++) {
			if (sh->owner != me) {
				__sync_fetch_and_add(&sh->violations, 1);
				break;
			}
		}
		if (!__sync_bool_compare_and_swap(&sh->owner, me, 0))
			__sync_fetch_and_add(&sh->violations, 1);
		if (semop(semid, &give, 1) < 0)
			failed("semop(+1)");
	}
}

static pid_t spawn(void)
{
	pid_t p = fork();
	if (p < 0)
		die("fork");
	if (p == 0)
		worker();
	return p;
}

static void reap(pid_t p, long *odd)
{
	int st;
	while (waitpid(p, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
		(*odd)++;
		fprintf(stderr, "storm: worker %d ended with status 0x%x\n", (int)p, st);
	}
}

static int getval(void)
{
	int v = semctl(semid, 0, GETVAL);
	if (v < 0)
		die("semctl(GETVAL)");
	return v;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* semtimedop(-1) with a timeout of ms: "ok" or the errno's name; *secs the time taken */
static const char *timed_take(long ms, double *secs)
{
	struct sembuf take = { 0, -1, 0 };
	struct timespec to = { ms / 1000, (ms % 1000) * 1000000 };
	double s = now();
	int r = semtimedop(semid, &take, 1, &to);
	*secs = now() - s;
	return r == 0 ? "ok" : strerrorname_np(errno);
}

int main(int argc, char **argv)
{
	long kills = argc > 1 ? atol(argv[1]) : 1000;
	int nw = argc > 2 ? atoi(argv[2]) : 6;
	if (kills < 0 || nw < 1 || nw > 64) {
		fprintf(stderr, "usage: storm KILLS WORKERS(1-64)\n");
		return 2;
	}
	nowait = getenv("STORM_NOWAIT") && !strcmp(getenv("STORM_NOWAIT"), "1");
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (semid < 0)
		die("semget");
	union semun a = { .val = 1 };
	if (semctl(semid, 0, SETVAL, a) < 0)
		die("semctl(SETVAL)");

	srand(getpid() ^ time(NULL));
	pid_t w[64];
	for (int i = 0; i < nw; i++)
		w[i] = spawn();

	double t0 = now();
	long odd = 0, holder_kills = 0, last_progress = -1, prev_takes = 0;
	for (long k = 0; k < kills; k++) {
		long t = sh->takes;
		if (t != prev_takes) {
			last_progress = k;
			prev_takes = t;
		}
		usleep(rand() % 2001);
		int i = rand() % nw;
		sh->killed[k % RING] = w[i];
		__sync_synchronize();
		if (sh->owner == w[i])
			holder_kills++;
		if (kill(w[i], SIGKILL) < 0)
			die("kill");
		reap(w[i], &odd);
		w[i] = spawn();
	}
	double storm_s = now() - t0;
	if (sh->takes != prev_takes)
		last_progress = kills;

	/* stop everything */
	for (int i = 0; i < nw; i++) {
		sh->killed[(kills + i) % RING] = w[i];
		__sync_synchronize();
		if (kill(w[i], SIGKILL) < 0)
			die("kill");
	}
	for (int i = 0; i < nw; i++)
		reap(w[i], &odd);

	/* right after the last waitpid */
	int v0 = getval();
	int ncnt = semctl(semid, 0, GETNCNT);
	int v1 = -1;
	if (v0 != 1) { /* diagnostic only: lost, or only late? */
		sleep(1);
		v1 = getval();
	}
	double d1, d2;
	const char *t1 = timed_take(2000, &d1);
	t1 = strdup(t1);
	const char *t2 = timed_take(100, &d2);
	int vend = getval();

	printf("mode=%s kills=%ld workers=%d takes=%ld violations=%ld worker_errors=%ld", nowait ? "nowait" : "blocking",
	       kills, nw, sh->takes, sh->violations, sh->errors);
	if (sh->errors)
		printf(" first_errno=%s", strerrorname_np(sh->first_errno));
	printf(" val_nonzero_in_cs=%ld max_val_in_cs=%d holder_kills=%ld odd_exits=%ld storm_s=%.2f last_progress_at_kill=%ld",
	       sh->val_nonzero, sh->max_val, holder_kills, odd, storm_s, last_progress);
	printf(" getval=%d ncnt=%d", v0, ncnt);
	if (v1 >= 0)
		printf(" getval_after_1s=%d", v1);
	printf(" take=%s(%.3fs) take_again=%s(%.3fs) getval_end=%d\n", t1, d1, t2, d2, vend);
	int okay = v0 == 1 && ncnt == 0 && sh->violations == 0 && sh->val_nonzero == 0 && sh->errors == 0 && odd == 0 &&
		   !strcmp(t1, "ok") && d1 < 1.0 && !strcmp(t2, "EAGAIN") && vend == 0;
	return okay ? 0 : 1;
}
