/* The life of an unshared namespace (the tests in it/lifetime.rs drive
 * it; the library only, the kernel's namespace leaves no file to see).
 *
 *   nslife parent MODE   unshares, makes a queue, a set and an attached
 *                        segment, prints "ns NAME", forks a child that
 *                        execs "nslife child MODE", and exits (first).
 *   nslife child MODE    prints "child PID", uses the namespace (the
 *                        queue is there), and with MODE "closed" closes
 *                        every descriptor from 3 up (the membership one
 *                        too) but keeps the arena mapped; then waits for
 *                        EOF on stdin, uses the namespace again, prints
 *                        "done" and exits.
 *                        MODE "late": the fork child closes every
 *                        descriptor from 3 up before its exec, and the
 *                        exec'd child makes no call for 2 s, then checks
 *                        that the set is there (semget) and prints
 *                        "late ok" before waiting for EOF.
 *                        MODE "leader": the fork child does not exec; it
 *                        closes every descriptor from 3 up, and its main
 *                        thread exits (pthread_exit) while a second one
 *                        waits for EOF, uses the namespace, prints "done".
 *   nslife waits         unshares, forks one child that exits, and
 *                        calls wait(NULL) twice and waitpid(-1, WNOHANG)
 *                        once: the child, then ECHILD twice; counts
 *                        SIGCHLD (one).
 *   nslife pidns         unshare(CLONE_NEWPID | CLONE_NEWIPC) (root): prints
 *                        "ns NAME", forks a child that prints "pid N" (1:
 *                        no guardian took the new pid namespace's first
 *                        pid) and uses the namespace; waits for it.
 *   nslife clonepid      clone(CLONE_NEWPID | CLONE_NEWIPC) (root): the
 *                        child (pid 1) prints "ns NAME" and "member
 *                        none|N" (its membership descriptor).
 *   nslife apart         unshare(CLONE_NEWPID), then unshare(CLONE_NEWIPC)
 *                        (root): prints "ns NAME", "member none|N".
 *   nslife refused       unshare(CLONE_NEWIPC | CLONE_PARENT), which the
 *                        kernel refuses: prints the result, errno and
 *                        $IPCNS.
 */
#include "t.h"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/shm.h>

#define KEY 0x7c01

static volatile sig_atomic_t chld;

static void on_chld(int s)
{
	(void)s;
	chld++;
}

static int waits(void)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	if (unshare(CLONE_NEWIPC) != 0) {
		printf("unshare = -1 %s\n", strerrorname_np(errno));
		return 1;
	}
	if (msgget(KEY, IPC_CREAT | 0600) < 0)
		return 2;
	fflush(stdout);
	pid_t c = fork();
	if (c == 0)
		_exit(7);
	int st = 0;
	pid_t w = wait(&st);
	printf("wait 1: %s status %d\n", w == c ? "the child" : "another", WEXITSTATUS(st));
	errno = 0;
	w = wait(NULL);
	printf("wait 2: %d %s\n", (int)w, strerrorname_np(errno));
	errno = 0;
	w = waitpid(-1, NULL, WNOHANG);
	printf("waitpid -1 WNOHANG: %d %s\n", (int)w, strerrorname_np(errno));
	/* A signal sent at the child's end was handled by now. */
	usleep(100000);
	printf("SIGCHLD %d\n", (int)chld);
	return 0;
}

static void use(void)
{
	int q = msgget(KEY, 0);
	if (q < 0) {
		printf("msgget = -1 %s\n", strerrorname_np(errno));
		fflush(stdout);
		_exit(3);
	}
	struct { long t; char b[4]; } m = { 1, "hi" };
	if (msgsnd(q, &m, 3, 0) != 0)
		_exit(4);
}

static void close_from_3(void)
{
	for (int fd = 3; fd < 4096; fd++)
		close(fd);
}

static void *last_thread(void *arg)
{
	(void)arg;
	char b[16];
	while (read(0, b, sizeof b) > 0)
		;
	use();
	printf("done\n");
	fflush(stdout);
	exit(0);
}

static void member(void)
{
	const char *m = getenv("IPCNS_MEMBER_FD");
	printf("ns %s\nmember %s\n", getenv("IPCNS"), m ? m : "none");
	fflush(stdout);
}

/* The root-only modes with CLONE_NEWPID. */
static int pidns(const char *how)
{
	if (!strcmp(how, "pidns")) {
		if (unshare(CLONE_NEWPID | CLONE_NEWIPC) != 0) {
			printf("unshare = -1 %s\n", strerrorname_np(errno));
			return 1;
		}
		if (msgget(KEY, IPC_CREAT | 0600) < 0)
			return 1;
		printf("ns %s\n", getenv("IPCNS"));
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			printf("pid %d\n", (int)getpid());
			use();
			fflush(stdout);
			_exit(0);
		}
		int st = 0;
		return c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	if (!strcmp(how, "clonepid")) {
		fflush(stdout);
		long c = syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD, 0, 0, 0, 0);
		if (c == 0) {
			if (getpid() != 1 || msgget(KEY, IPC_CREAT | 0600) < 0)
				_exit(3);
			use();
			member();
			_exit(0);
		}
		int st = 0;
		return c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	/* apart */
	if (unshare(CLONE_NEWPID) != 0 || unshare(CLONE_NEWIPC) != 0) {
		printf("unshare = -1 %s\n", strerrorname_np(errno));
		return 1;
	}
	if (msgget(KEY, IPC_CREAT | 0600) < 0)
		return 1;
	member();
	return 0;
}

/* The fork child's exec of "child MODE": for the late modes with every
 * descriptor from 3 up closed (its membership one too). latedot: the same
 * directory spelt another way; latedup: a second IPCNS after the first
 * (getenv reads the first). */
static void exec_child(char *argv0, const char *mode)
{
	if (!strncmp(mode, "late", 4))
		close_from_3();
	static char dot[4200];
	if (!strcmp(mode, "latedot") && getenv("IPCNS_DIR")) {
		snprintf(dot, sizeof dot, "%s/.", getenv("IPCNS_DIR"));
		setenv("IPCNS_DIR", dot, 1);
	}
	extern char **environ;
	static char *envp[4096];
	int n = 0;
	for (char **e = environ; *e && n < 4094; e++)
		envp[n++] = *e;
	if (!strcmp(mode, "latedup"))
		envp[n++] = "IPCNS=unshare-0-other";
	envp[n] = NULL;
	execve(argv0, (char *[]){ argv0, "child", (char *)mode, NULL }, envp);
	_exit(127);
}

int main(int argc, char **argv)
{
	start();
	if (argc == 2 && !strcmp(argv[1], "waits"))
		return waits();
	if (argc == 2 && (!strcmp(argv[1], "pidns") || !strcmp(argv[1], "clonepid") ||
			  !strcmp(argv[1], "apart")))
		return pidns(argv[1]);
	if (argc == 2 && !strcmp(argv[1], "refused")) {
		errno = 0;
		int r = unshare(CLONE_NEWIPC | CLONE_PARENT);
		printf("unshare = %d %s IPCNS=%s member %s\n", r, strerrorname_np(errno),
		       getenv("IPCNS"), getenv("IPCNS_MEMBER_FD") ? "set" : "none");
		T(msgget(KEY, IPC_CREAT | 0600) >= 0);
		return 0;
	}
	if (argc != 3)
		return 2;
	const char *mode = argv[2];
	if (!strcmp(argv[1], "child") && !strncmp(mode, "late", 4)) {
		printf("child %d\n", (int)getpid());
		fflush(stdout);
		if (!strcmp(mode, "latetitle")) {
			/* A process title, as PostgreSQL's ps_status and
			 * setproctitle make one: the environment moved to the
			 * heap, its first home (what /proc/PID/environ shows)
			 * overwritten. */
			extern char **environ;
			int n = 0;
			while (environ[n])
				n++;
			char **moved = calloc(n + 1, sizeof *moved);
			for (int i = 0; i < n; i++)
				moved[i] = strdup(environ[i]);
			char *first = environ[0], *last = environ[n - 1];
			char *end = last + strlen(last);
			environ = moved;
			memset(first, 0, end - first);
			strcpy(first, "postgres: title");
		}
		/* No IPC call yet: the library has not mapped the arena. */
		sleep(2);
		int s = semget(KEY, 0, 0);
		struct sembuf op = { 0, 1, 0 };
		if (s < 0 || semop(s, &op, 1) != 0 || semctl(s, 0, GETVAL) != 1) {
			printf("late semget = %d %s\n", s, strerrorname_np(errno));
			fflush(stdout);
			_exit(5);
		}
		use();
		printf("late ok\n");
		fflush(stdout);
		char b[16];
		while (read(0, b, sizeof b) > 0)
			;
		use();
		printf("done\n");
		return 0;
	}
	if (!strcmp(argv[1], "child")) {
		printf("child %d\n", (int)getpid());
		fflush(stdout);
		use();
		if (!strcmp(mode, "closed")) {
			for (int fd = 3; fd < 4096; fd++)
				close(fd);
		}
		char b[16];
		while (read(0, b, sizeof b) > 0)
			;
		use();
		printf("done\n");
		return 0;
	}
	if (unshare(CLONE_NEWIPC) != 0) {
		printf("unshare = -1 %s\n", strerrorname_np(errno));
		return 1;
	}
	if (!strncmp(mode, "early", 5)) {
		/* The child forked before this process makes any IPC call (so
		 * it has no record to take over at its exec: nothing maps the
		 * arena in it but what the library does at load). */
		static char late[32];
		snprintf(late, sizeof late, "late%s", mode + 5);
		printf("ns %s\n", getenv("IPCNS"));
		fflush(stdout);
		pid_t c = fork();
		if (c == 0)
			exec_child(argv[0], late);
		if (c < 0 || msgget(KEY, IPC_CREAT | 0600) < 0 || semget(KEY, 1, IPC_CREAT | 0600) < 0)
			return 1;
		int s = shmget(KEY, 65536, IPC_CREAT | 0600);
		return s < 0 || shmat(s, NULL, 0) == (void *)-1;
	}
	if (msgget(KEY, IPC_CREAT | 0600) < 0 || semget(KEY, 1, IPC_CREAT | 0600) < 0)
		return 1;
	int s = shmget(KEY, 65536, IPC_CREAT | 0600);
	if (s < 0 || shmat(s, NULL, 0) == (void *)-1)
		return 1;
	printf("ns %s\n", getenv("IPCNS"));
	fflush(stdout);
	pid_t c = fork();
	if (c == 0 && !strcmp(mode, "leader")) {
		printf("child %d\n", (int)getpid());
		fflush(stdout);
		use();
		close_from_3();
		pthread_t t;
		if (pthread_create(&t, NULL, last_thread, NULL) != 0)
			_exit(6);
		pthread_exit(NULL);
	}
	if (c == 0)
		exec_child(argv[0], mode);
	return c > 0 ? 0 : 1;
}
