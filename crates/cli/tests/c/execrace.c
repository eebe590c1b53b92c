/* execrace.c - a thread other than the leader calls execve while the
 * leader sleeps in semop or msgrcv.
 *
 * usage: execrace a|b|c RUNS SLEEPER
 *
 * Each run makes a set of one semaphore (value 0) and a queue, and forks
 * a child whose leader blocks in semop(-1) (a, c) or msgrcv (b). A second
 * thread waits until the leader sleeps (a, c: GETNCNT is 1; b: the
 * leader's state in /proc is S), 5 ms more, and execve()s SLEEPER
 * (execsleeper.c). The execve ends the leader's call without a return:
 * the kernel kills the other threads, and the new image has the leader's
 * pid. The image's first line on a pipe says it runs (and whether the
 * leader was seen asleep); then the parent checks:
 *   a: GETNCNT is 0; semtimedop(-1, 20 ms) fails with EAGAIN on time; a
 *      token posted with semop(+1) is then obtainable by
 *      semtimedop(-1, 500 ms) (nobody else may take it);
 *   b: GETNCNT is 0; semtimedop(-1, 20 ms) fails with EAGAIN on time; a
 *      message sent with msgsnd is still in the queue (msgrcv IPC_NOWAIT);
 *   c: the image itself calls GETVAL, semop(+1, IPC_NOWAIT),
 *      semtimedop(-1, 20 ms) and semop(+1, IPC_NOWAIT) on the set and
 *      reports; those must be ok, GETNCNT 0, the image's last token
 *      obtainable by the parent, after which semtimedop(-1, 20 ms) times
 *      out.
 * "On time": returned after 20 ms, within 250 ms. The child is then ended
 * with SIGTERM and reaped.
 * Output: one line of key=value pairs; exit status 0 when every check
 * held, 1 otherwise, 2 on a setup failure.
 *
 * Before ipcns 9681a85 the leader's sleep outlived the execve: the posted
 * token and the message went to it and were lost (10 runs out of 10), and
 * the image's semtimedop found its own token taken.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
	fprintf(stderr, "execrace: %s: %s\n", what, strerrorname_np(errno));
	exit(2);
}

static const char *ename(int e)
{
	return e ? strerrorname_np(e) : "0";
}

static int S, Q, wfd;
static char variant;
static char **envp_g;
static const char *sleeper;

/* The leader's scheduling state (R, S, ...), from /proc; '?' if unknown. */
static char leader_state(void)
{
	char path[64], b[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	ssize_t l = read(fd, b, sizeof b - 1);
	close(fd);
	if (l <= 0)
		return '?';
	b[l] = 0;
	char *p = strrchr(b, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Whether the leader sleeps in its call: GETNCNT 1 (a, c), or the state S
 * seen twice 1 ms apart (b). */
static int leader_asleep(void)
{
	if (variant != 'b')
		return semctl(S, 0, GETNCNT) == 1;
	if (leader_state() != 'S')
		return 0;
	sleep_ns(1000000);
	return leader_state() == 'S';
}

static void *execer(void *a)
{
	(void)a;
	int asleep = 0;
	for (uint64_t t0 = now_ns(); now_ns() - t0 < 2000000000ull; sleep_ns(200000))
		if ((asleep = leader_asleep()))
			break;
	sleep_ns(5000000);
	char s1[16], s2[16], s3[16], v[2] = { variant, 0 };
	snprintf(s1, sizeof s1, "%d", S);
	snprintf(s2, sizeof s2, "%d", Q);
	snprintf(s3, sizeof s3, "%d", wfd);
	char *av[] = { (char *)sleeper, v, s1, s2, s3, asleep ? "asleep" : "awake", NULL };
	execve(sleeper, av, envp_g);
	fprintf(stderr, "execrace: execve %s: %s\n", sleeper, strerrorname_np(errno));
	_exit(5);
}

static volatile int currun;
static void onalrm(int sig)
{
	(void)sig;
	char b[120];
	int l = snprintf(b, sizeof b, "execrace: run %d did not finish within 20 s\n", currun);
	if (write(2, b, l) < 0) {
	}
	_exit(3);
}

/* A line from fd (without its newline) within ms; "" if none came. */
static void readline(int fd, char *line, int size, int ms)
{
	int l = 0;
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	while (l < size - 1) {
		uint64_t t = now_ns();
		struct pollfd p = { fd, POLLIN, 0 };
		if (t >= end || poll(&p, 1, (int)((end - t) / 1000000) + 1) <= 0)
			break;
		if (read(fd, line + l, 1) != 1 || line[l] == '\n')
			break;
		l++;
	}
	line[l] = 0;
}

/* semtimedop(id, {0, op, 0}, ms): its result, errno kept; *took in ms */
static int tsop(int id, int op, long ms, double *took)
{
	struct sembuf b = { 0, op, 0 };
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	uint64_t t0 = now_ns();
	int r = semtimedop(id, &b, 1, &ts);
	int e = errno;
	*took = (now_ns() - t0) / 1e6;
	errno = e;
	return r;
}

/* the 20 ms timeout: EAGAIN, after 20 ms and within 250 ms */
static int on_time(int r, double took)
{
	return r == -1 && errno == EAGAIN && took >= 19.0 && took < 250.0;
}

int main(int argc, char **argv, char **envp)
{
	if (argc < 4 || !strchr("abc", argv[1][0])) {
		fprintf(stderr, "usage: execrace a|b|c RUNS SLEEPER\n");
		return 2;
	}
	variant = argv[1][0];
	int n = atoi(argv[2]);
	sleeper = argv[3];
	envp_g = envp;
	int not_asleep = 0, no_image = 0, bad_ncnt = 0, bad_to = 0, bad_tok = 0, bad_msg = 0, bad_image = 0;
	int leader_ret = 0, bad_exit = 0;
	double max_to = 0, max_tok = 0;
	signal(SIGALRM, onalrm);
	for (int i = 0; i < n; i++) {
		currun = i;
		alarm(20);
		S = semget(IPC_PRIVATE, 1, 0600);
		if (S == -1)
			die("semget");
		Q = msgget(IPC_PRIVATE, 0600);
		if (Q == -1)
			die("msgget");
		int p[2];
		if (pipe(p) == -1)
			die("pipe");
		wfd = p[1];
		fflush(stdout);
		pid_t c = fork();
		if (c == -1)
			die("fork");
		if (c == 0) {
			close(p[0]);
			pthread_t t;
			if (pthread_create(&t, NULL, execer, NULL))
				_exit(4);
			int r, e;
			if (variant == 'b') {
				struct smsg m;
				r = msgrcv(Q, &m, sizeof m.mtext, 0, 0);
			} else {
				struct sembuf b = { 0, -1, 0 };
				r = semop(S, &b, 1);
			}
			e = errno;
			fprintf(stderr, "execrace: run %d: the leader's call returned %d (%s)\n", i, r, ename(e));
			_exit(3);
		}
		close(p[1]);
		int bad_before = not_asleep + no_image + bad_ncnt + bad_to + bad_tok + bad_msg + bad_image;
		/* the image runs: the execve is over */
		char first[64], image[600] = "", what[400] = "";
		readline(p[0], first, sizeof first, 5000);
		if (!strcmp(first, "image leader=awake"))
			not_asleep++;
		else if (strcmp(first, "image leader=asleep"))
			no_image++;
		if (variant == 'c') {
			readline(p[0], image, sizeof image, 3000);
			if (strcmp(image, "GETVAL=0 semop(+1,NOWAIT)=ok semtimedop(-1,20ms)=ok semop(+1,NOWAIT)=ok"))
				bad_image++;
		}
		int ncnt = semctl(S, 0, GETNCNT);
		if (ncnt != 0)
			bad_ncnt++;
		double t1 = 0, t2 = 0;
		int r;
		if (variant == 'c') {
			r = tsop(S, -1, 500, &t2); /* the image's token */
			if (r != 0)
				bad_tok++;
			snprintf(what, sizeof what, "image's token: %s %.1fms", r == 0 ? "ok" : ename(errno), t2);
			r = tsop(S, -1, 20, &t1);
			if (!on_time(r, t1))
				bad_to++;
			snprintf(what + strlen(what), sizeof what - strlen(what), "; semtimedop(20ms): %s %.1fms",
				 r == 0 ? "ok" : ename(errno), t1);
		} else {
			r = tsop(S, -1, 20, &t1);
			if (!on_time(r, t1))
				bad_to++;
			snprintf(what, sizeof what, "semtimedop(20ms): %s %.1fms", r == 0 ? "ok" : ename(errno), t1);
			if (variant == 'a') {
				struct sembuf up = { 0, 1, 0 };
				if (semop(S, &up, 1) == -1)
					die("semop(+1)");
				r = tsop(S, -1, 500, &t2);
				if (r != 0)
					bad_tok++;
				snprintf(what + strlen(what), sizeof what - strlen(what),
					 "; posted +1, semtimedop(-1,500ms): %s %.1fms", r == 0 ? "ok" : ename(errno), t2);
			} else {
				struct smsg m = { 7, "hello" };
				if (msgsnd(Q, &m, 6, 0) == -1)
					die("msgsnd");
				r = msgrcv(Q, &m, sizeof m.mtext, 0, IPC_NOWAIT);
				if (r != 6 || m.mtype != 7)
					bad_msg++;
				snprintf(what + strlen(what), sizeof what - strlen(what), "; msgsnd, msgrcv(NOWAIT): %s",
					 r >= 0 ? "ok" : ename(errno));
			}
		}
		if (t1 > max_to)
			max_to = t1;
		if (t2 > max_tok)
			max_tok = t2;
		if (not_asleep + no_image + bad_ncnt + bad_to + bad_tok + bad_msg + bad_image != bad_before)
			fprintf(stderr, "execrace: run %d: %s; GETNCNT %d; %s%s%s\n", i, *first ? first : "(no image)", ncnt,
				what, *image ? "; image: " : "", image);
		kill(c, SIGTERM);
		int st;
		if (waitpid(c, &st, 0) < 0)
			die("waitpid");
		if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
			leader_ret++;
		else if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM))
			bad_exit++;
		close(p[0]);
		semctl(S, 0, IPC_RMID);
		msgctl(Q, IPC_RMID, NULL);
	}
	alarm(0);
	printf("variant=%c runs=%d leader_not_asleep=%d no_image=%d ncnt_not_0=%d timeout_wrong=%d max_timeout_ms=%.1f "
	       "token_lost=%d max_token_ms=%.1f message_lost=%d image_wrong=%d leader_returned=%d odd_exits=%d\n",
	       variant, n, not_asleep, no_image, bad_ncnt, bad_to, max_to, bad_tok, max_tok, bad_msg, bad_image, leader_ret,
	       bad_exit);
	return not_asleep || no_image || bad_ncnt || bad_to || bad_tok || bad_msg || bad_image || leader_ret || bad_exit
		       ? 1
		       : 0;
}
