/* cross.c - one System V IPC namespace across exec from a glibc program
 * to a musl program and back (tests/cli/musl.rs). Built twice, with gcc
 * and with musl-gcc (LIBC names which), and run as
 *
 *   cross 0 FIRST SECOND
 *
 * where FIRST and SECOND are the two builds: step 0 runs in FIRST, 1 in
 * SECOND, 2 in FIRST, 3 in SECOND, each image exec'ing the next.
 *
 * Step 0 makes a set of one semaphore, a queue and a segment (by key),
 * forks a child that runs steps 1 to 3 by exec, waits for it, and shows
 * what the chain left: the semaphore back at 0 (the chain's SEM_UNDO
 * adjustments, +2 then -1, made in two images of two C libraries,
 * applied at its exit), the queue's last message, the segment's text
 * and no attachment left. Step 1 takes 2 with SEM_UNDO, sends a
 * message, attaches the segment and writes into it (the attachment
 * dropped by the exec); step 2 reads both and answers, takes 1 back
 * with SEM_UNDO; step 3 reads the answers and exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef LIBC
#define LIBC "?"
#endif

struct msg {
	long type;
	char text[64];
};

static void die(const char *what)
{
	printf("step failed: %s: errno %d\n", what, errno);
	exit(1);
}

static void next(char **argv, int step)
{
	char s[8];
	snprintf(s, sizeof s, "%d", step);
	char *args[] = {step % 2 ? argv[3] : argv[2], s, argv[2], argv[3], NULL};
	execv(args[0], args);
	die("execv");
}

static void receive(int q)
{
	struct msg m;
	if (msgrcv(q, &m, sizeof m.text, 0, IPC_NOWAIT) < 0)
		die("msgrcv");
	printf("  received: %s\n", m.text);
}

static void send(int q, const char *text)
{
	struct msg m = {1, ""};
	snprintf(m.text, sizeof m.text, "%s", text);
	if (msgsnd(q, &m, strlen(m.text) + 1, 0) < 0)
		die("msgsnd");
}

static void take(int s, int n)
{
	struct sembuf op = {0, (short)n, SEM_UNDO};
	if (semop(s, &op, 1) < 0)
		die("semop");
	printf("  semop %+d with SEM_UNDO: value %d\n", n, semctl(s, 0, GETVAL));
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 4)
		return 2;
	int step = atoi(argv[1]);
	printf("step %d (%s)\n", step, LIBC);
	int flags = step == 0 ? IPC_CREAT | IPC_EXCL | 0600 : 0;
	int s = semget(0x5c10, 1, flags), q = msgget(0x5c20, flags), h = shmget(0x5c30, 4096, flags);
	if (s < 0 || q < 0 || h < 0)
		die("get");
	char *p = shmat(h, NULL, 0);
	if (p == (void *)-1)
		die("shmat");
	struct shmid_ds ds;
	switch (step) {
	case 0: {
		pid_t c = fork();
		if (c == 0)
			next(argv, 1);
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("the chain");
		printf("  after the chain: value %d\n", semctl(s, 0, GETVAL));
		receive(q);
		printf("  segment: %s\n", p);
		shmdt(p);
		shmctl(h, IPC_STAT, &ds);
		printf("  nattch %lu\n", (unsigned long)ds.shm_nattch);
		semctl(s, 0, IPC_RMID);
		msgctl(q, IPC_RMID, NULL);
		shmctl(h, IPC_RMID, NULL);
		return 0;
	}
	case 1:
		take(s, 2);
		send(q, "from step 1 (" LIBC ")");
		snprintf(p, 64, "written by step 1 (%s)", LIBC);
		shmctl(h, IPC_STAT, &ds);
		printf("  nattch %lu\n", (unsigned long)ds.shm_nattch);
		next(argv, 2);
		break;
	case 2:
		shmctl(h, IPC_STAT, &ds);
		printf("  nattch %lu (step 1's dropped at its exec)\n", (unsigned long)ds.shm_nattch);
		receive(q);
		printf("  segment: %s\n", p);
		send(q, "from step 2 (" LIBC ")");
		snprintf(p, 64, "written by step 2 (%s)", LIBC);
		take(s, -1);
		next(argv, 3);
		break;
	case 3:
		printf("  value %d\n", semctl(s, 0, GETVAL));
		receive(q);
		printf("  segment: %s\n", p);
		send(q, "from step 3 (" LIBC ")");
		return 0;
	}
	return 1;
}
