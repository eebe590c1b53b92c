/* exitrace.c - exit(0) in main while other threads are inside SysV IPC calls.
 *
 * usage: exitrace RUNS THREADS
 *
 * Each run makes a set of one semaphore (value 100), a queue and a
 * one-page segment, and forks a child that starts THREADS threads looping
 * on semop(-1, SEM_UNDO) then semop(+1, SEM_UNDO), msgsnd then msgrcv, and
 * shmat, a write, shmdt; 1 to 10 ms later the child's main thread calls
 * exit(0). Right after waitpid the value must be exactly 100 (the undo of
 * a thread stopped between its two semops applied once, none of a thread
 * that had released) and shm_nattch 0. A child that has not ended 5 s
 * after its fork is counted hung and killed; a worker whose call fails
 * reports it on a pipe. The parent's own calls are watched too: no
 * progress for 15 s ends the program with status 3.
 * Output: one line of key=value pairs; exit status 0 when every check
 * held, 1 otherwise, 2 on a setup failure.
 *
 * Before ipcns 9681a85 the value was 99 or 101 in some runs, nattch 1,
 * some children hung at exit, and the parent's own calls could loop
 * forever on corrupted heap lists.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

union semun { int val; struct semid_ds *buf; unsigned short *array; };
struct smsg { long mtype; char mtext[16]; };

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { ns / 1000000000ull, ns % 1000000000ull };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
	}
}

static void die(const char *what)
{
	fprintf(stderr, "exitrace: %s: %s\n", what, strerrorname_np(errno));
	exit(2);
}

static int semid, qid, shmid, errfd;

/* A worker whose call fails reports it and parks, so that the child's
 * exit status stays that of main's exit(0). */
static void wfail(const char *what)
{
	char b[96];
	int l = snprintf(b, sizeof b, "%s %s\n", what, strerrorname_np(errno));
	if (write(errfd, b, l) < 0) {
	}
	for (;;)
		pause();
}

static void *worker(void *arg)
{
	(void)arg;
	struct sembuf dn = { 0, -1, SEM_UNDO }, up = { 0, +1, SEM_UNDO };
	struct smsg m = { 1, "x" };
	for (;;) {
		if (semop(semid, &dn, 1) == -1)
			wfail("semop(-1)");
		if (semop(semid, &up, 1) == -1)
			wfail("semop(+1)");
		if (msgsnd(qid, &m, 2, 0) == -1)
			wfail("msgsnd");
		if (msgrcv(qid, &m, sizeof m.mtext, 0, 0) == -1)
			wfail("msgrcv");
		void *p = shmat(shmid, NULL, 0);
		if (p == (void *)-1)
			wfail("shmat");
		((volatile char *)p)[0]++;
		if (shmdt(p) == -1)
			wfail("shmdt");
	}
	return NULL;
}

/* histograms of small values */
struct hist { int val[32], cnt[32], n; };
static void count(struct hist *h, int v)
{
	for (int i = 0; i < h->n; i++)
		if (h->val[i] == v) {
			h->cnt[i]++;
			return;
		}
	if (h->n < 32) {
		h->val[h->n] = v;
		h->cnt[h->n++] = 1;
	}
}
static void show(const char *name, struct hist *h)
{
	printf(" %s=", name);
	for (int i = 0; i < h->n; i++)
		printf("%s%d:x%d", i ? "," : "", h->val[i], h->cnt[i]);
}

static struct hist hsem, hshm;
static int runs_done, hung, abnormal, werr, slow, badsem, badshm, nruns, nthreads;
static double max_run_s;

static void summary(void)
{
	printf("runs=%d threads=%d hung=%d abnormal=%d worker_errors=%d slow_runs=%d semval_not_100=%d nattch_not_0=%d max_run_s=%.3f",
	       runs_done, nthreads, hung, abnormal, werr, slow, badsem, badshm, max_run_s);
	show("semval", &hsem);
	show("nattch", &hshm);
	printf("\n");
	fflush(stdout);
}

static _Atomic uint64_t progress;
static _Atomic int stuck_run;
static void *watchdog(void *a)
{
	(void)a;
	for (;;) {
		sleep_ns(250000000ull);
		if (now_ns() - progress > 15000000000ull) {
			fprintf(stderr, "exitrace: the parent's own call in run %d has not returned for 15 s\n", stuck_run);
			printf("parent_stuck_in_run=%d ", stuck_run);
			summary();
			_exit(3);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	nruns = argc > 1 ? atoi(argv[1]) : 100;
	nthreads = argc > 2 ? atoi(argv[2]) : 4;
	if (nruns < 1 || nthreads < 1) {
		fprintf(stderr, "usage: exitrace RUNS THREADS\n");
		return 2;
	}
	srand(getpid() ^ time(NULL));
	progress = now_ns();
	pthread_t wd;
	if (pthread_create(&wd, NULL, watchdog, NULL))
		die("pthread_create");
	for (int i = 0; i < nruns; i++) {
		stuck_run = i;
		progress = now_ns();
		semid = semget(IPC_PRIVATE, 1, 0600);
		if (semid == -1)
			die("semget");
		union semun u = { .val = 100 };
		if (semctl(semid, 0, SETVAL, u) == -1)
			die("semctl(SETVAL)");
		qid = msgget(IPC_PRIVATE, 0600);
		if (qid == -1)
			die("msgget");
		shmid = shmget(IPC_PRIVATE, 4096, 0600);
		if (shmid == -1)
			die("shmget");
		int delay_us = 1000 + rand() % 9000;
		int pfd[2];
		if (pipe2(pfd, O_CLOEXEC) == -1)
			die("pipe2");
		fflush(stdout);
		uint64_t t0 = now_ns();
		pid_t c = fork();
		if (c == -1)
			die("fork");
		if (c == 0) {
			close(pfd[0]);
			errfd = pfd[1];
			pthread_t t;
			for (int k = 0; k < nthreads; k++)
				if (pthread_create(&t, NULL, worker, NULL))
					_exit(4);
			sleep_ns((uint64_t)delay_us * 1000);
			exit(0);
		}
		close(pfd[1]);
		int st = 0, was_hung = 0;
		pid_t w;
		while ((w = waitpid(c, &st, WNOHANG)) == 0) {
			progress = now_ns();
			if (now_ns() - t0 > 5000000000ull) {
				was_hung = 1;
				hung++;
				fprintf(stderr, "exitrace: run %d: the child has not ended 5 s after its fork (exit after %d ms)\n",
					i, delay_us / 1000);
				kill(c, SIGKILL);
				waitpid(c, &st, 0);
				break;
			}
			sleep_ns(200000);
		}
		if (w < 0)
			die("waitpid");
		/* right after waitpid */
		progress = now_ns();
		int sv = semctl(semid, 0, GETVAL);
		struct shmid_ds sd;
		int na = shmctl(shmid, IPC_STAT, &sd) == -1 ? -1 : (int)sd.shm_nattch;
		double secs = (now_ns() - t0) / 1e9;
		if (secs > max_run_s)
			max_run_s = secs;
		if (secs > 1.0)
			slow++;
		count(&hsem, sv);
		count(&hshm, na);
		badsem += sv != 100;
		badshm += na != 0;
		if (sv != 100 || na != 0)
			fprintf(stderr, "exitrace: run %d: semval %d nattch %d right after waitpid\n", i, sv, na);
		char b[1024];
		int l = read(pfd[0], b, sizeof b - 1);
		close(pfd[0]);
		if (l > 0) {
			werr++;
			b[l] = 0;
			fprintf(stderr, "exitrace: run %d: a worker's call failed: %s", i, b);
		}
		if (!was_hung && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			abnormal++;
			fprintf(stderr, "exitrace: run %d: the child ended with status 0x%x\n", i, st);
		}
		semctl(semid, 0, IPC_RMID);
		msgctl(qid, IPC_RMID, NULL);
		shmctl(shmid, IPC_RMID, NULL);
		runs_done = i + 1;
	}
	summary();
	return hung || abnormal || werr || badsem || badshm ? 1 : 0;
}
