/* Threads: sixteen threads make the process's first IPC calls at once
 * (the namespace is chosen once), then each works on its own set and
 * queue with operations and messages on its stack and on the heap; then
 * 300 short-lived threads, one after another, each make a call from their
 * own stack. */
#include "t.h"
#include <pthread.h>

#define THREADS 16
#define ROUNDS 2000

static pthread_barrier_t go;
static int sets[THREADS], queues[THREADS];
static long done[THREADS];

static void *worker(void *arg)
{
	long me = (long)arg;
	pthread_barrier_wait(&go);
	sets[me] = semget(0x5500 + me, 1, IPC_CREAT | 0600);
	queues[me] = msgget(0x6500 + me, IPC_CREAT | 0600);
	struct sembuf *heap_op = malloc(sizeof *heap_op);
	struct { long mtype; char mtext[32]; } *heap_msg = malloc(sizeof *heap_msg);
	for (int i = 0; i < ROUNDS; i++) {
		struct sembuf op = { 0, 1, 0 };
		if (semop(sets[me], &op, 1) == 0)
			done[me]++;
		*heap_op = (struct sembuf){ 0, -1, 0 };
		if (i % 8 == 0 && semop(sets[me], heap_op, 1) == 0)
			done[me]++;
		struct { long mtype; char mtext[32]; } m = { 1 + i % 3 };
		snprintf(m.mtext, sizeof m.mtext, "%ld:%d", me, i);
		if (msgsnd(queues[me], &m, strlen(m.mtext) + 1, 0) == 0)
			done[me]++;
		if (msgrcv(queues[me], heap_msg, sizeof heap_msg->mtext, 0, 0) > 0 &&
		    strcmp(heap_msg->mtext, m.mtext) == 0)
			done[me]++;
	}
	free(heap_op);
	free(heap_msg);
	return NULL;
}

static int shortlived_ok;
static int probe_set;

static void *shortlived(void *arg)
{
	(void)arg;
	struct sembuf op = { 0, 1, 0 };
	struct { long mtype; char mtext[8]; } m = { 1, "x" };
	if (semop(probe_set, &op, 1) == 0 && msgsnd(queues[0], &m, 2, 0) == 0 &&
	    msgrcv(queues[0], &m, 8, 0, 0) == 2)
		__atomic_fetch_add(&shortlived_ok, 1, __ATOMIC_RELAXED);
	return NULL;
}

int main(void)
{
	start();
	pthread_t t[THREADS];
	pthread_barrier_init(&go, NULL, THREADS);
	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	long total = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += done[i];
	}
	SAY("calls that succeeded: %ld of %d", total, THREADS * (ROUNDS * 3 + ROUNDS / 8));
	for (int i = 0; i < THREADS; i++) {
		if (sets[i] < 0 || queues[i] < 0)
			SAY("thread %d: no objects", i);
		int v = semctl(sets[i], 0, GETVAL);
		if (v != ROUNDS - ROUNDS / 8)
			SAY("thread %d: value %d", i, v);
	}
	probe_set = semget(IPC_PRIVATE, 1, 0600);
	for (int i = 0; i < 300; i++) {
		pthread_t s;
		pthread_create(&s, NULL, shortlived, NULL);
		pthread_join(s, NULL);
	}
	SAY("short-lived threads: %d ok, value %d", shortlived_ok, semctl(probe_set, 0, GETVAL));
	return 0;
}
