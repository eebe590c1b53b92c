/* unshare(CLONE_NEWIPC) and a fork-like clone with CLONE_NEWIPC: the
 * caller (or the child) starts over in a fresh namespace: keys of the old
 * one are gone, ids start at 0, /proc/sysvipc shows the new one, a
 * program it execs stays in it, the clone's parent keeps its own. */
#include "t.h"
#include <sched.h>

/* Rows of /proc/sysvipc/msg (the header excluded). */
static int rows(void)
{
	FILE *f = fopen("/proc/sysvipc/msg", "r");
	char line[512];
	int n = -1;
	if (!f)
		return -2;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		/* exec'd after unshare: the same (new) namespace. */
		T(msgget(0x7a01, 0));
		T(msgget(0x7a02, 0));
		T(rows());
		return 0;
	}
	T(msgget(0x7a01, IPC_CREAT | 0600));
	T(msgget(0x7a02, IPC_CREAT | 0600));
	T(semget(0x7a03, 1, IPC_CREAT | 0600));
	T(rows());
	T(unshare(CLONE_NEWIPC));
	T(msgget(0x7a01, 0));
	T(msgget(0x7a02, 0));
	T(semget(0x7a03, 0, 0));
	T(rows());
	T(msgget(0x7a01, IPC_CREAT | 0600));
	T(msgget(IPC_PRIVATE, 0600));
	T(rows());
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		execl(argv[0], argv[0], "child", (char *)0);
		_exit(127);
	}
	int st;
	T(waitpid(p, &st, 0) == p);
	T(WEXITSTATUS(st));
	/* The system call form; other flags are left to the kernel. */
	T(syscall(SYS_unshare, CLONE_NEWIPC));
	T(msgget(0x7a01, 0));
	T(rows());
	T(msgget(0x7a05, IPC_CREAT | 0600));
	fflush(stdout);
	long c = syscall(SYS_clone, CLONE_NEWIPC | SIGCHLD, 0, 0, 0, 0);
	if (c == 0) {
		T(msgget(0x7a05, 0));
		T(msgget(0x7a06, IPC_CREAT | 0600));
		T(rows());
		fflush(stdout);
		_exit(0);
	}
	T(c > 0);
	T(waitpid(c, &st, 0) == c);
	T(msgget(0x7a05, 0));
	T(msgget(0x7a06, 0));
	T(rows());
	return 0;
}
