/* Processes: a fork child's inherited attachment counts in shm_nattch;
 * exit applies SEM_UNDO and drops attachments; exec keeps the undo
 * entries and drops the attachments; a removed set wakes a sleeper with
 * EIDRM; a blocked receiver is woken by a send. */
#include "t.h"

/* Waits (up to 5 s) until `n` processes sleep on semaphore `num` of `s`
 * (GETNCNT, or GETZCNT when `zero`). */
static int wait_sleepers(int s, int num, int n, int zero)
{
	for (int i = 0; i < 5000; i++) {
		if (semctl(s, num, zero ? GETZCNT : GETNCNT) == n)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* fork() with the child's standard output going to a pipe, which
 * relay() prints after the child is gone: the lines of a child woken by
 * the parent come after the parent's, whatever the scheduling. */
static pid_t fork_captured(int *fd)
{
	int p[2];
	if (pipe(p) != 0)
		exit(2);
	pid_t c = fork();
	if (c == 0) {
		close(p[0]);
		dup2(p[1], 1);
		close(p[1]);
		return 0;
	}
	close(p[1]);
	*fd = p[0];
	return c;
}

static void relay(pid_t c, int fd)
{
	waitpid(c, NULL, 0);
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (write(1, buf, n) != n)
			exit(2);
	close(fd);
}

/* Waits (up to 5 s) until process `pid` sleeps (state S in
 * /proc/PID/stat: blocked in a call, not spinning or running), then a
 * little longer. */
static int asleep(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		char buf[512] = "";
		if (f) {
			if (!fgets(buf, sizeof buf, f))
				buf[0] = 0;
			fclose(f);
		}
		char *p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'S') {
			usleep(20000);
			return 1;
		}
		usleep(1000);
	}
	return 0;
}

static unsigned long nattch(int h)
{
	struct shmid_ds ds;
	if (shmctl(h, IPC_STAT, &ds) == -1)
		return 99999;
	return ds.shm_nattch;
}

int main(int argc, char **argv)
{
	start();
	if (argc == 3 && strcmp(argv[1], "exec") == 0) {
		/* The image after an exec: the attachments went with the old
		 * image; the undo entry is still this process's. */
		int h = atoi(argv[2]);
		SAY("after exec: nattch %lu", nattch(h));
		int s = semget(0x5301, 1, 0);
		T(semctl(s, 0, GETVAL));
		exit(0);
	}
	int h = shmget(0x7301, 8192, IPC_CREAT | 0600);
	char *p = shmat(h, NULL, 0);
	strcpy(p, "parent wrote");
	SAY("attached: nattch %lu", nattch(h));
	pid_t c = fork();
	if (c == 0) {
		SAY("child sees: %s, nattch %lu", p, nattch(h));
		strcpy(p, "child wrote");
		exit(0);
	}
	waitpid(c, NULL, 0);
	SAY("after the child's exit: %s, nattch %lu", p, nattch(h));
	/* The child detaches its copy itself. */
	c = fork();
	if (c == 0) {
		T(shmdt(p));
		SAY("child detached: nattch %lu", nattch(h));
		_exit(0);
	}
	waitpid(c, NULL, 0);
	SAY("nattch %lu", nattch(h));

	/* SEM_UNDO at exit. */
	int s = semget(0x5301, 2, IPC_CREAT | 0600);
	c = fork();
	if (c == 0) {
		struct sembuf up[2] = { { 0, 5, SEM_UNDO }, { 1, 2, 0 } };
		T(semop(s, up, 2));
		SAY("child: %d %d", semctl(s, 0, GETVAL), semctl(s, 1, GETVAL));
		exit(0);
	}
	waitpid(c, NULL, 0);
	SAY("after exit: %d %d", semctl(s, 0, GETVAL), semctl(s, 1, GETVAL));

	/* A sleeper woken with EIDRM. */
	int s2 = semget(IPC_PRIVATE, 1, 0600);
	int fd;
	c = fork_captured(&fd);
	if (c == 0) {
		struct sembuf down = { 0, -1, 0 };
		T(semop(s2, &down, 1));
		exit(0);
	}
	SAY("sleeping: %d", wait_sleepers(s2, 0, 1, 0));
	T(semctl(s2, 0, IPC_RMID));
	relay(c, fd);

	/* A receiver woken by a send, and one by IPC_RMID. */
	int q = msgget(IPC_PRIVATE, 0600);
	c = fork_captured(&fd);
	if (c == 0) {
		struct { long mtype; char mtext[16]; } m;
		T(msgrcv(q, &m, 16, 7, 0));
		SAY("child got %ld %s", m.mtype, m.mtext);
		T(msgrcv(q, &m, 16, 0, 0));
		exit(0);
	}
	SAY("receiver asleep: %d", asleep(c));
	struct { long mtype; char mtext[16]; } m = { 7, "wake up" };
	T(msgsnd(q, &m, 8, 0));
	/* Asleep again, in its second msgrcv (its first receive done). */
	struct msqid_ds qs;
	for (int i = 0; i < 5000; i++) {
		msgctl(q, IPC_STAT, &qs);
		if (qs.msg_lrpid == c)
			break;
		usleep(1000);
	}
	SAY("receiver asleep again: %d", asleep(c));
	T(msgctl(q, IPC_RMID, NULL));
	relay(c, fd);

	/* exec: a SEM_UNDO entry made before it is applied when the new
	 * image exits; the attachment is gone at once. */
	c = fork();
	if (c == 0) {
		struct sembuf up = { 0, 3, SEM_UNDO };
		T(semop(s, &up, 1));
		SAY("before exec: nattch %lu", nattch(h));
		char arg[16];
		snprintf(arg, sizeof arg, "%d", h);
		execl("/proc/self/exe", argv[0], "exec", arg, (char *)NULL);
		_exit(1);
	}
	waitpid(c, NULL, 0);
	SAY("after the exec'd child's exit: %d, nattch %lu", semctl(s, 0, GETVAL), nattch(h));
	T(shmdt(p));
	T(shmctl(h, IPC_RMID, NULL));
	T(semctl(s, 0, IPC_RMID));
	return 0;
}
