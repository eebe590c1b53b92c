/* A thread sleeps in semop while another thread execs: the kernel kills the
 * sleeper (no operation made), keeps the process's semadj across the exec
 * (semop(2)), and applies it only at the final exit. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>
static int s;
static void *sleeper(void *a __attribute__((unused)))
{
	struct sembuf dn = { 1, -1, 0 };
	semop(s, &dn, 1);
	printf("sleeper woke?!\n");
	return 0;
}
int main(int argc, char **argv)
{
	setvbuf(stdout, 0, _IONBF, 0);
	if (argc > 2) {
		s = atoi(argv[2]);
		usleep(100000);
		printf("after exec: sem0=%d (want 1: semadj kept across exec) sem1=%d ncnt1=%d\n",
		       semctl(s, 0, GETVAL), semctl(s, 1, GETVAL), semctl(s, 1, GETNCNT));
		return 0;
	}
	s = semget(IPC_PRIVATE, 2, 0600);
	pid_t c = fork();
	if (!c) {
		struct sembuf up = { 0, 1, SEM_UNDO };
		semop(s, &up, 1);
		pthread_t t;
		pthread_create(&t, 0, sleeper, 0);
		usleep(100000);
		char b[16];
		snprintf(b, sizeof b, "%d", s);
		execl("/proc/self/exe", argv[0], "after", b, (char *)0);
		_exit(99);
	}
	int st;
	waitpid(c, &st, 0);
	printf("after exit: sem0=%d (want 0) sem1=%d\n", semctl(s, 0, GETVAL), semctl(s, 1, GETVAL));
	semctl(s, 0, IPC_RMID);
	return 0;
}
