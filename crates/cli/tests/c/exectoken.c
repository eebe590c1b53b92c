/* A thread sleeps in semop(-1) while another thread execs; the new image at
 * once posts +1. The kernel killed the sleeper at the exec: the token stays
 * (value 1). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>
static int s;
static void *sleeper(void *a __attribute__((unused)))
{
	struct sembuf dn = { 0, -1, 0 };
	semop(s, &dn, 1);
	printf("sleeper woke?!\n");
	return 0;
}
int main(int argc, char **argv)
{
	setvbuf(stdout, 0, _IONBF, 0);
	if (argc > 2) {
		s = atoi(argv[2]);
		struct sembuf up = { 0, 1, 0 };
		semop(s, &up, 1);
		usleep(50000);
		printf("after exec and +1: value %d (want 1)\n", semctl(s, 0, GETVAL));
		return 0;
	}
	s = semget(IPC_PRIVATE, 1, 0600);
	pthread_t t;
	pthread_create(&t, 0, sleeper, 0);
	usleep(100000);
	char b[16];
	snprintf(b, sizeof b, "%d", s);
	execl("/proc/self/exe", argv[0], "after", b, (char *)0);
	return 99;
}
