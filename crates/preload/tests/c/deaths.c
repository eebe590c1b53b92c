/* A process's end and its exec, observed as programs observe them: by
 * another process right after it read EOF on a pipe the ending process
 * held, or right after a line written by the new image of an exec, never
 * after waitpid (the wait family finishes a reaped child itself). Linux
 * applies SEM_UNDO (sempid the dying process's pid) and drops the
 * attachments in do_exit before it closes the descriptors, and drops the
 * attachments in execve before the new image runs: the observer sees all
 * of it done. The ends: _exit, _Exit, syscall(SYS_exit_group), and exit
 * of an exec'd image that never calls System V IPC itself, and SIGKILL
 * (seen through the kernel's mark of a robust futex word of the dying
 * process's); a vfork child that execs leaves its parent's attachment
 * alone. */
#include "t.h"

static int s, h;
/* In a child made by child(): the write end of its pipe. */
static int wfd = -1;

static unsigned long nattch(void)
{
	struct shmid_ds ds;
	if (shmctl(h, IPC_STAT, &ds) == -1)
		return 99999;
	return ds.shm_nattch;
}

/* What a process about to end holds: +1 on semaphore `num` with
 * SEM_UNDO, and an attachment. */
static void take(int num)
{
	struct sembuf up = { num, 1, SEM_UNDO };
	if (semop(s, &up, 1) != 0 || shmat(h, NULL, 0) == (void *)-1)
		exit(3);
}

/* Reads `fd` to EOF; then prints what the observer sees of semaphore
 * `num`, whose last operation was `pid`'s (the dying process's). */
static void observe(const char *how, int fd, int num, pid_t pid)
{
	char buf[64];
	while (read(fd, buf, sizeof buf) > 0)
		;
	close(fd);
	/* In this order (shmctl may clean up after dead processes). */
	int val = semctl(s, num, GETVAL);
	int last = semctl(s, num, GETPID) == pid;
	unsigned long n = nattch();
	SAY("%s: value %d, sempid is the child's: %d, nattch %lu", how, val, last, n);
}

/* A child holding the write end of a pipe; `*fd` the read end. */
static pid_t child(int *fd)
{
	int p[2];
	if (pipe(p) != 0)
		exit(2);
	pid_t c = fork();
	if (c == 0) {
		close(p[0]);
		wfd = p[1];
		return 0;
	}
	close(p[1]);
	*fd = p[0];
	return c;
}

int main(int argc, char **argv)
{
	start();
	if (argc == 4 && strcmp(argv[1], "image") == 0) {
		/* The new image: no System V IPC call. It says it runs, waits
		 * for a byte, and exits (exit: atexit, destructors). */
		int out = atoi(argv[2]), in = atoi(argv[3]);
		const char *mark = getenv("IPCNS_EXEC_PID");
		char line[64];
		int n = snprintf(line, sizeof line, "ready, mark %s\n", mark ? "present" : "absent");
		if (write(out, line, n) != n)
			exit(2);
		char b;
		if (read(in, &b, 1) != 1)
			exit(2);
		exit(0);
	}
	if (argc == 2 && strcmp(argv[1], "bare") == 0) {
		/* An image exec'd with an empty environment (no library):
		 * nothing of ours left in it. */
		SAY("bare image: environment %s", environ && environ[0] ? environ[0] : "(empty)");
		return 0;
	}
	s = semget(0x5401, 4, IPC_CREAT | 0600);
	h = shmget(0x7401, 4096, IPC_CREAT | 0600);
	int fd;

	pid_t c = child(&fd);
	if (c == 0) {
		take(0);
		_exit(0);
	}
	observe("after _exit", fd, 0, c);
	waitpid(c, NULL, 0);

	c = child(&fd);
	if (c == 0) {
		take(1);
		_Exit(0);
	}
	observe("after _Exit", fd, 1, c);
	waitpid(c, NULL, 0);

	c = child(&fd);
	if (c == 0) {
		take(2);
		syscall(SYS_exit_group, 0);
		_exit(1);
	}
	observe("after exit_group", fd, 2, c);
	waitpid(c, NULL, 0);

	/* SIGKILL: no code of the process runs. Seen by a process that
	 * read EOF, then by a semop that would fail without the undo. */
	c = child(&fd);
	if (c == 0) {
		take(0);
		raise(SIGKILL);
		_exit(1);
	}
	observe("after SIGKILL", fd, 0, c);
	waitpid(c, NULL, 0);
	/* A lock (semaphore 1 at 1) taken with SEM_UNDO by a process
	 * killed holding it: a take with IPC_NOWAIT right after EOF gets it
	 * (Perl's IPC::Shareable: LOCK_EX|LOCK_NB). */
	semctl(s, 1, SETVAL, 1);
	c = child(&fd);
	if (c == 0) {
		struct sembuf lock = { 1, -1, SEM_UNDO };
		if (semop(s, &lock, 1) != 0)
			_exit(3);
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	{
		char buf[8];
		while (read(fd, buf, sizeof buf) > 0)
			;
		close(fd);
		struct sembuf take_it = { 1, -1, IPC_NOWAIT };
		T(semop(s, &take_it, 1));
		T(semctl(s, 1, GETVAL));
	}
	waitpid(c, NULL, 0);

	/* exec: the new image never calls System V IPC. */
	int go[2];
	if (pipe(go) != 0)
		return 2;
	c = child(&fd);
	if (c == 0) {
		close(go[1]);
		take(3);
		char out[16], in[16];
		snprintf(out, sizeof out, "%d", wfd);
		snprintf(in, sizeof in, "%d", go[0]);
		execl("/proc/self/exe", argv[0], "image", out, in, (char *)NULL);
		_exit(1);
	}
	close(go[0]);
	{
		/* The line the new image writes, then the observer's look. */
		char line[64] = "";
		ssize_t n = read(fd, line, sizeof line - 1);
		line[n > 0 ? n : 0] = 0;
		int val = semctl(s, 3, GETVAL);
		struct shmid_ds ds;
		shmctl(h, IPC_STAT, &ds);
		printf("image says: %s", line);
		SAY("after the exec: nattch %lu, lpid is the child's: %d, dtime set: %d, value %d",
		    ds.shm_nattch, ds.shm_lpid == c, ds.shm_dtime != 0, val);
	}
	if (write(go[1], "x", 1) != 1)
		return 2;
	close(go[1]);
	observe("after the new image's exit", fd, 3, c);
	waitpid(c, NULL, 0);

	/* A process with a record execs with a NULL environment (Linux
	 * takes it as empty), through execve and through syscall(). */
	for (int how = 0; how < 2; how++) {
		c = fork();
		if (c == 0) {
			take(3);
			char *av[] = { argv[0], "bare", NULL };
			if (how == 0)
				execve("/proc/self/exe", av, NULL);
			else
				syscall(SYS_execve, "/proc/self/exe", av, NULL);
			_exit(1);
		}
		int st;
		waitpid(c, &st, 0);
		SAY("exec with a NULL environment: exited %d, status %d", WIFEXITED(st), WEXITSTATUS(st));
	}

	/* A vfork child that execs: the parent's attachment stays counted. */
	char *mine = shmat(h, NULL, 0);
	SAY("attached: nattch %lu", nattch());
	c = vfork();
	if (c == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(1);
	}
	waitpid(c, NULL, 0);
	SAY("after the vfork child's exec: nattch %lu", nattch());
	T(shmdt(mine));
	T(shmctl(h, IPC_RMID, NULL));
	T(semctl(s, 0, IPC_RMID));
	return 0;
}
