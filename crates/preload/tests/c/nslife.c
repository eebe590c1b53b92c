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
 *   nslife waits         unshares, forks one child that exits, and
 *                        calls wait(NULL) twice and waitpid(-1, WNOHANG)
 *                        once: the child, then ECHILD twice; counts
 *                        SIGCHLD (one).
 */
#include "t.h"
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

int main(int argc, char **argv)
{
	start();
	if (argc == 2 && !strcmp(argv[1], "waits"))
		return waits();
	if (argc != 3)
		return 2;
	const char *mode = argv[2];
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
	if (msgget(KEY, IPC_CREAT | 0600) < 0 || semget(KEY, 1, IPC_CREAT | 0600) < 0)
		return 1;
	int s = shmget(KEY, 65536, IPC_CREAT | 0600);
	if (s < 0 || shmat(s, NULL, 0) == (void *)-1)
		return 1;
	printf("ns %s\n", getenv("IPCNS"));
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		execl(argv[0], argv[0], "child", mode, (char *)0);
		_exit(127);
	}
	return c > 0 ? 0 : 1;
}
