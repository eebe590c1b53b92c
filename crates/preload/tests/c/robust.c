/* The library links an entry of its own into each participating thread's
 * robust futex list (glibc's), so that the kernel marks a word in the
 * arena when the thread dies. The program's own robust mutexes must work
 * around it exactly as without the library: locked and unlocked in any
 * order on the thread whose list holds the entry, an owner dying with a
 * mutex locked (thread and process), EOWNERDEAD to the next locker. */
#include "t.h"
#include <pthread.h>

static pthread_mutex_t m[4];

static void init(pthread_mutex_t *mx, int shared)
{
	pthread_mutexattr_t at;
	pthread_mutexattr_init(&at);
	pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
	if (shared)
		pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(mx, &at);
	pthread_mutexattr_destroy(&at);
}

static void *dies_holding(void *arg)
{
	pthread_mutex_lock(arg);
	return NULL;
}

static int s;

static void undo(int num)
{
	struct sembuf up = { num, 1, SEM_UNDO };
	if (semop(s, &up, 1) != 0)
		exit(3);
}

static void *worker(void *arg)
{
	(void)arg;
	/* This thread's own entry (its first SEM_UNDO in a fresh process
	 * is the main thread's; this one only locks around it). */
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&m[i % 4]);
		pthread_mutex_lock(&m[(i + 1) % 4]);
		pthread_mutex_unlock(&m[i % 4]);
		pthread_mutex_unlock(&m[(i + 1) % 4]);
	}
	return NULL;
}

int main(void)
{
	start();
	s = semget(IPC_PRIVATE, 2, 0600);
	for (int i = 0; i < 4; i++)
		init(&m[i], 0);
	/* Mutexes locked before the entry is linked, unlocked after. */
	T(pthread_mutex_lock(&m[0]));
	T(pthread_mutex_lock(&m[1]));
	undo(0);
	T(pthread_mutex_unlock(&m[0]));
	T(pthread_mutex_lock(&m[2]));
	T(pthread_mutex_unlock(&m[1]));
	T(pthread_mutex_unlock(&m[2]));
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&m[i % 4]);
		if (i % 3 == 0)
			undo(1);
		pthread_mutex_unlock(&m[i % 4]);
	}
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	SAY("after the workers");
	/* A thread that dies holding a mutex. */
	pthread_t d;
	pthread_create(&d, NULL, dies_holding, &m[3]);
	pthread_join(d, NULL);
	int r = pthread_mutex_lock(&m[3]);
	SAY("lock after its owner died: %s", r == EOWNERDEAD ? "EOWNERDEAD" : strerrorname_np(r));
	T(pthread_mutex_consistent(&m[3]));
	T(pthread_mutex_unlock(&m[3]));

	/* A process that dies holding a shared mutex, and a SEM_UNDO. */
	pthread_mutex_t *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	init(sh, 1);
	pid_t c = fork();
	if (c == 0) {
		undo(0);
		pthread_mutex_lock(&m[0]);
		pthread_mutex_lock(sh);
		pthread_mutex_unlock(&m[0]);
		_exit(0);
	}
	waitpid(c, NULL, 0);
	r = pthread_mutex_lock(sh);
	SAY("shared lock after its owner process died: %s", r == EOWNERDEAD ? "EOWNERDEAD" : strerrorname_np(r));
	T(pthread_mutex_consistent(sh));
	T(pthread_mutex_unlock(sh));
	c = fork();
	if (c == 0) {
		undo(0);
		pthread_mutex_lock(sh);
		raise(SIGKILL);
	}
	waitpid(c, NULL, 0);
	r = pthread_mutex_lock(sh);
	SAY("after a SIGKILL: %s", r == EOWNERDEAD ? "EOWNERDEAD" : strerrorname_np(r));
	T(pthread_mutex_consistent(sh));
	T(pthread_mutex_unlock(sh));
	T(semctl(s, 0, GETVAL));
	T(semctl(s, 0, IPC_RMID));
	return 0;
}
