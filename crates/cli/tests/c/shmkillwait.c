/* A static child attaches and detaches a segment in a loop (served by the
 * supervisor through ptrace) and is SIGKILLed: the parent's waitpid must
 * return (a review found the child left a zombie whose tracer was still
 * the supervisor: fixed, trace.rs `reap_lost`). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static pid_t child;
static void hung(int sig __attribute__((unused)))
{
	char b[256], path[64];
	snprintf(path, sizeof path, "/proc/%d/status", child);
	FILE *f = fopen(path, "r");
	printf("waitpid hung for 5 s on child %d:", child);
	while (f && fgets(b, sizeof b, f))
		if (!strncmp(b, "State", 5) || !strncmp(b, "TracerPid", 9))
			printf(" %s", strtok(b, "\n"));
	printf("\n");
	_exit(1);
}
int main(void)
{
	setvbuf(stdout, 0, _IONBF, 0);
	signal(SIGALRM, hung);
	int m = shmget(IPC_PRIVATE, 4096, 0600);
	for (int r = 0; r < 300; r++) {
		child = fork();
		if (!child)
			for (;;) {
				void *p = shmat(m, 0, 0);
				shmdt(p);
			}
		struct timespec ts = { 0, (r % 13) * 150000 + 100000 };
		nanosleep(&ts, 0);
		kill(child, SIGKILL);
		alarm(5);
		waitpid(child, 0, 0);
		alarm(0);
	}
	shmctl(m, IPC_RMID, 0);
	printf("300 rounds: every waitpid returned\n");
	return 0;
}
