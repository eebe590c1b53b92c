/* many.c - many short-lived processes with a SEM_UNDO and an attachment.
 *
 * usage: many N PAR
 *
 * The parent makes a set of one semaphore (value 0) and a one-page
 * segment. N children, PAR at a time: each does semop(+1, SEM_UNDO) and
 * shmat of the segment and reports on a pipe; then a third of them
 * (index % 3 == 2) are SIGKILLed by the parent while parked in pause(),
 * the others exit(0). Every child's undo (-1) brings the value back and
 * its attachment goes with it: right after the last waitpid GETVAL must
 * be 0 and shm_nattch 0. The set and the segment are left in place.
 * Output: one line of key=value pairs (secs: from the first fork to the
 * last waitpid); exit status 0 when every check held, 1 otherwise, 2 on a
 * setup failure. Progress goes to stderr every 500 children.
 *
 * Before ipcns 59746a6 the value was left at 3 to 33 and nattch at up to
 * 25, the heap's free lists were corrupted (entries freed twice), 300
 * children took 20 to 175 s and 10,000 never finished.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "many: %s: %s\n", what, strerrorname_np(errno));
	exit(2);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int semid, shmid;

static void measure(int *val, long *nattch)
{
	*val = semctl(semid, 0, GETVAL);
	if (*val < 0)
		die("semctl(GETVAL)");
	struct shmid_ds ds;
	if (shmctl(shmid, IPC_STAT, &ds) < 0)
		die("shmctl(IPC_STAT)");
	*nattch = (long)ds.shm_nattch;
}

/* a child's report: its index, and the errno of its failed step (0 if none) */
struct msg { int idx; int err; int step; };

static void child(int idx, int wfd)
{
	struct msg m = { idx, 0, 0 };
	struct sembuf up = { 0, +1, SEM_UNDO };
	if (semop(semid, &up, 1) < 0) {
		m.err = errno;
		m.step = 1;
	} else if (shmat(shmid, NULL, 0) == (void *)-1) {
		m.err = errno;
		m.step = 2;
	}
	if (write(wfd, &m, sizeof m) != sizeof m)
		_exit(4);
	if (m.err)
		_exit(3);
	if (idx % 3 != 2)
		exit(0);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 300;
	int par = argc > 2 ? atoi(argv[2]) : 10;
	if (n < 1 || par < 1 || par > 1000) {
		fprintf(stderr, "usage: many N PAR(1-1000)\n");
		return 2;
	}
	semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
	if (semid < 0)
		die("semget");
	shmid = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	if (shmid < 0)
		die("shmget");
	int pfd[2];
	if (pipe(pfd) < 0)
		die("pipe");
	pid_t *pids = calloc(n, sizeof *pids);
	if (!pids)
		die("calloc");

	double t0 = now();
	long started = 0, done = 0, killed = 0, exited = 0, failed = 0, odd = 0;
	int inflight = 0;
	while (done < n) {
		while (inflight < par && started < n) {
			pid_t p = fork();
			if (p < 0)
				die("fork");
			if (p == 0) {
				close(pfd[0]);
				child((int)started, pfd[1]);
			}
			pids[started++] = p;
			inflight++;
		}
		struct msg m;
		ssize_t r = read(pfd[0], &m, sizeof m);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != sizeof m)
			die("read(pipe)");
		if (m.idx < 0 || m.idx >= started) {
			fprintf(stderr, "many: bad message\n");
			return 2;
		}
		pid_t p = pids[m.idx];
		int expect_kill = 0;
		if (m.err) {
			if (failed++ < 5)
				fprintf(stderr, "many: child %d: %s: %s\n", m.idx, m.step == 1 ? "semop(+1)" : "shmat",
					strerrorname_np(m.err));
		} else if (m.idx % 3 == 2) {
			if (kill(p, SIGKILL) < 0)
				die("kill");
			expect_kill = 1;
		}
		int st;
		while (waitpid(p, &st, 0) < 0)
			if (errno != EINTR)
				die("waitpid");
		if (expect_kill && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			killed++;
		else if (!expect_kill && !m.err && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			exited++;
		else if (!m.err) {
			odd++;
			fprintf(stderr, "many: child %d status 0x%x\n", m.idx, st);
		}
		inflight--;
		done++;
		if (done % 500 == 0) {
			int v;
			long na;
			measure(&v, &na);
			fprintf(stderr, "many: %ld/%ld reaped after %.2f s (value %d, nattch %ld, %d in flight)\n", done, n,
				now() - t0, v, na, inflight);
		}
	}
	double secs = now() - t0;
	/* right after the last waitpid */
	int v0;
	long na0;
	measure(&v0, &na0);
	printf("children=%ld exited=%ld killed=%ld failed=%ld odd=%ld secs=%.3f per_child_ms=%.3f getval=%d nattch=%ld\n",
	       n, exited, killed, failed, odd, secs, secs * 1000 / n, v0, na0);
	return (v0 == 0 && na0 == 0 && failed == 0 && odd == 0 && exited + killed == n) ? 0 : 1;
}
