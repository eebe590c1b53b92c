/* unshare(CLONE_NEWIPC) in one thread of a process with several: Linux
 * moves the calling thread alone (gVisor's SemaphoreTest.SemOpNamespace):
 * it no longer sees the process's objects, the threads it creates and
 * the children it forks see its new namespace, and the other threads
 * keep theirs (the main thread's IPC_RMID of its set succeeds). */
#include "t.h"
#include <pthread.h>
#include <sched.h>

#define KEY 0x7b01

static int S;

static void *grandchild(void *arg)
{
	(void)arg;
	/* Created by the thread that unshared: its namespace. */
	T(semget(KEY, 0, 0) >= 0);
	T(semctl(S, 0, GETVAL));
	return NULL;
}

static void *unsharer(void *arg)
{
	(void)arg;
	T(unshare(CLONE_NEWIPC));
	struct sembuf op = { 0, 1, 0 };
	T(semop(S, &op, 1));
	T(semctl(S, 0, GETVAL));
	T(semget(KEY, 1, IPC_CREAT | 0600));
	T(semget(KEY, 0, 0) >= 0);
	pthread_t g;
	pthread_create(&g, NULL, grandchild, NULL);
	pthread_join(g, NULL);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		/* A child of this thread: its namespace. */
		_exit(semget(KEY, 0, 0) >= 0 ? 0 : errno);
	}
	int st;
	waitpid(c, &st, 0);
	SAY("child of the thread: exit %d", WEXITSTATUS(st));
	T(semctl(semget(KEY, 0, 0), 0, IPC_RMID));
	return NULL;
}

static void *bystander(void *arg)
{
	(void)arg;
	/* Another thread, after the unshare: the process's namespace. */
	T(semctl(S, 0, GETVAL));
	T(semget(KEY, 0, 0));
	return NULL;
}

int main(void)
{
	start();
	S = semget(IPC_PRIVATE, 1, 0600);
	SAY("set %d", S >= 0);
	T(semget(KEY, 0, 0));
	pthread_t a, b;
	pthread_create(&a, NULL, unsharer, NULL);
	pthread_join(a, NULL);
	pthread_create(&b, NULL, bystander, NULL);
	pthread_join(b, NULL);
	/* The main thread: its own set is still there. */
	struct sembuf op = { 0, 1, 0 };
	T(semop(S, &op, 1));
	T(semctl(S, 0, GETVAL));
	T(semget(KEY, 0, 0));
	T(semctl(S, 0, IPC_RMID));
	return 0;
}
