/* A stop and a continue (SIGSTOP, then SIGCONT; no handler) of a process
 * blocked in System V IPC, as signal(7) says Linux answers it: semop and
 * semtimedop fail with EINTR (the stop wakes the sleeper with a signal
 * pending), msgrcv and msgsnd are restarted and go on waiting. Also: a
 * SIGCONT alone, to a process that was not stopped (ignored: the semop
 * goes on and gets its post); a stop of a process with two threads in
 * semop (both EINTR); a stop that outlasts a semtimedop's timeout (EINTR,
 * not EAGAIN); a SIGCONT handler (EINTR, and the handler ran once).
 *
 * The child reports through its exit status (which the parent prints):
 * nothing printed by the child, so the lines' order is the parent's. */
#include "t.h"
#include <pthread.h>

static int S, Q;

/* Until GETNCNT of semaphore 0 is n (or 5 s pass). */
static void until_waiting(int n)
{
	for (int k = 0; k < 5000; k++) {
		if (semctl(S, 0, GETNCNT) == n)
			return;
		usleep(1000);
	}
	SAY("GETNCNT never reached %d", n);
}

static void until_msg_waiting(int n)
{
	/* A receiver counts in no field of msqid_ds: give it time. */
	(void)n;
	usleep(100000);
}

/* The child's semtimedop, ms of timeout (0: semop); exit status: 0, or
 * errno. */
static int sem_wait_ms(int ms)
{
	struct sembuf op = { 0, -1, 0 };
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };
	int r = ms ? semtimedop(S, &op, 1, &t) : semop(S, &op, 1);
	return r == 0 ? 0 : errno;
}

static void show_exit(const char *what, int status)
{
	if (WIFEXITED(status))
		SAY("%s: exit %s", what,
		    WEXITSTATUS(status) ? strerrorname_np(WEXITSTATUS(status)) : "0");
	else
		SAY("%s: status %#x", what, status);
}

/* Stops the child, waits until it is stopped, continues it. */
static void stop_and_continue(pid_t c, int stopped_ms)
{
	int st;
	kill(c, SIGSTOP);
	if (waitpid(c, &st, WUNTRACED) != c || !WIFSTOPPED(st))
		SAY("not stopped: %#x", st);
	usleep(stopped_ms * 1000);
	kill(c, SIGCONT);
}

static void post(void)
{
	struct sembuf op = { 0, 1, 0 };
	T(semop(S, &op, 1));
}

/* waitpid, but a child still blocked after 2 s is said so and released
 * (posts to its semaphore and a message), so that a wrong answer is a
 * difference, never a hang. */
static void reap(pid_t c, int *st)
{
	for (int k = 0; k < 2000; k++) {
		if (waitpid(c, st, WNOHANG) == c)
			return;
		usleep(1000);
	}
	SAY("still blocked after 2 s");
	struct sembuf op = { 0, 2, 0 };
	semop(S, &op, 1);
	struct { long t; char x[8]; } m = { 1, "abc" };
	msgsnd(Q, &m, 3, IPC_NOWAIT);
	waitpid(c, st, 0);
}

static void *thread_wait(void *arg)
{
	(void)arg;
	return (void *)(long)sem_wait_ms(3000);
}

static volatile sig_atomic_t conts;
static void on_cont(int s)
{
	(void)s;
	conts++;
}

int main(void)
{
	int st;
	pid_t c;
	start();
	S = semget(IPC_PRIVATE, 1, 0600);
	Q = msgget(IPC_PRIVATE, 0600);
	SAY("objects %d", S >= 0 && Q >= 0);

	/* 1. semtimedop, stopped and continued: EINTR. */
	if ((c = fork()) == 0)
		_exit(sem_wait_ms(3000));
	until_waiting(1);
	usleep(50000);
	stop_and_continue(c, 50);
	reap(c, &st);
	show_exit("semtimedop, stop and continue", st);
	T(semctl(S, 0, GETNCNT));

	/* 2. semop (no timeout), the same. */
	if ((c = fork()) == 0)
		_exit(sem_wait_ms(0));
	until_waiting(1);
	usleep(50000);
	stop_and_continue(c, 50);
	reap(c, &st);
	show_exit("semop, stop and continue", st);

	/* 3. SIGCONT alone to a process that was not stopped: ignored, the
	 * semop goes on and takes the post. */
	if ((c = fork()) == 0)
		_exit(sem_wait_ms(3000));
	until_waiting(1);
	usleep(50000);
	kill(c, SIGCONT);
	usleep(100000);
	T(semctl(S, 0, GETNCNT));
	post();
	reap(c, &st);
	show_exit("semtimedop, SIGCONT alone, then a post", st);
	T(semctl(S, 0, GETVAL));

	/* 4. Two threads in semop, the process stopped and continued: both
	 * EINTR. */
	if ((c = fork()) == 0) {
		pthread_t a, b;
		void *ra, *rb;
		pthread_create(&a, NULL, thread_wait, NULL);
		pthread_create(&b, NULL, thread_wait, NULL);
		pthread_join(a, &ra);
		pthread_join(b, &rb);
		_exit((long)ra == EINTR && (long)rb == EINTR ? EINTR : 100 + (int)(long)ra);
	}
	until_waiting(2);
	usleep(50000);
	stop_and_continue(c, 50);
	reap(c, &st);
	show_exit("two threads in semtimedop, stop and continue", st);

	/* 5. Stopped for longer than the semtimedop's timeout: EINTR, not
	 * EAGAIN. */
	if ((c = fork()) == 0)
		_exit(sem_wait_ms(200));
	until_waiting(1);
	usleep(50000);
	stop_and_continue(c, 400);
	reap(c, &st);
	show_exit("semtimedop 200 ms, stopped 400 ms", st);

	/* 6. A SIGCONT handler: EINTR, and it ran once. */
	if ((c = fork()) == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_cont;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGCONT, &sa, NULL);
		int e = sem_wait_ms(3000);
		_exit(e == EINTR && conts == 1 ? EINTR : 100 + e);
	}
	until_waiting(1);
	usleep(50000);
	stop_and_continue(c, 50);
	reap(c, &st);
	show_exit("semtimedop with a SIGCONT handler, stop and continue", st);

	/* 7. msgrcv, stopped and continued: restarted, it gets the message
	 * sent after. */
	if ((c = fork()) == 0) {
		struct { long t; char x[8]; } m;
		ssize_t n = msgrcv(Q, &m, sizeof m.x, 0, 0);
		_exit(n == 3 && memcmp(m.x, "abc", 3) == 0 ? 0 : n < 0 ? errno : 100);
	}
	until_msg_waiting(1);
	stop_and_continue(c, 50);
	usleep(100000);
	struct { long t; char x[8]; } m = { 1, "abc" };
	T(msgsnd(Q, &m, 3, 0));
	reap(c, &st);
	show_exit("msgrcv, stop and continue, then a message", st);

	/* 8. msgsnd blocked on a full queue, stopped and continued:
	 * restarted, it sends once there is room. */
	struct msqid_ds ds;
	T(msgctl(Q, IPC_STAT, &ds));
	ds.msg_qbytes = 4;
	T(msgctl(Q, IPC_SET, &ds));
	T(msgsnd(Q, &m, 3, 0));
	if ((c = fork()) == 0) {
		struct { long t; char x[8]; } n = { 2, "xyz" };
		_exit(msgsnd(Q, &n, 3, 0) == 0 ? 0 : errno);
	}
	usleep(100000);
	stop_and_continue(c, 50);
	usleep(100000);
	T(msgctl(Q, IPC_STAT, &ds));
	SAY("messages before the receive: %lu", (unsigned long)ds.msg_qnum);
	T(msgrcv(Q, &m, sizeof m.x, 0, 0));
	reap(c, &st);
	show_exit("msgsnd, stop and continue, then room", st);
	T(msgrcv(Q, &m, sizeof m.x, 0, IPC_NOWAIT));
	SAY("received type %ld", m.t);

	T(semctl(S, 0, GETNCNT));
	T(semctl(S, 0, GETVAL));
	T(semctl(S, 0, IPC_RMID));
	T(msgctl(Q, IPC_RMID, NULL));
	return 0;
}
