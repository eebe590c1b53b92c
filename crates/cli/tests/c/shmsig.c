/* A child attaches/detaches in a loop while its parent sigqueue()s it
 * SIGRTMIN with values 1..N: each value must arrive once, with si_code
 * SI_QUEUE and the sender's pid. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>
enum { N = 2000 };
static volatile int got[N + 1], badcode, badpid, n;
static pid_t parent;
static void on(int s __attribute__((unused)), siginfo_t *si, void *c __attribute__((unused)))
{
	int v = si->si_value.sival_int;
	if (si->si_code != SI_QUEUE)
		badcode++;
	if (si->si_pid != parent)
		badpid++;
	if (v >= 0 && v <= N)
		got[v]++;
	n++;
}
int main(void)
{
	setvbuf(stdout, 0, _IONBF, 0);
	int m = shmget(IPC_PRIVATE, 4096, 0600);
	parent = getpid();
	int p[2];
	pipe(p);
	pid_t c = fork();
	if (!c) {
		struct sigaction sa = { 0 };
		sa.sa_sigaction = on;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigaction(SIGRTMIN, &sa, 0);
		write(p[1], "r", 1);
		long loops = 0;
		while (n < N && loops < 2000000) {
			void *a = shmat(m, 0, 0);
			if (a == (void *)-1) { printf("shmat failed\n"); _exit(1); }
			shmdt(a);
			loops++;
		}
		int missing = 0, dup = 0, zero = got[0];
		for (int i = 1; i <= N; i++)
			missing += got[i] == 0, dup += got[i] > 1;
		printf("child: %d signals taken, %d values missing, %d doubled, %d with value 0, si_code not SI_QUEUE %d, si_pid wrong %d\n",
		       n, missing, dup, zero, badcode, badpid);
		_exit(0);
	}
	char x;
	read(p[0], &x, 1);
	for (int i = 1; i <= N; i++) {
		union sigval v = { .sival_int = i };
		while (sigqueue(c, SIGRTMIN, v) < 0)
			usleep(100);
		if (i % 50 == 0)
			usleep(1000);
	}
	waitpid(c, 0, 0);
	shmctl(m, IPC_RMID, 0);
	return 0;
}
