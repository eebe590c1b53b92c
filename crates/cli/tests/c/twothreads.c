/* Two threads sleep in msgrcv on two queues; one process-directed SIGUSR1
 * (with a handler) is sent. The kernel delivers it to one thread: one
 * msgrcv ends with EINTR, the other keeps sleeping. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <unistd.h>
static int q[2];
static atomic_int eintr, handled;
static void on(int s __attribute__((unused))) { handled++; }
static void *rcv(void *a)
{
	struct { long t; char x[8]; } m;
	if (msgrcv(q[(long)a], &m, 8, 0, 0) < 0 && errno == EINTR)
		eintr++;
	return 0;
}
int main(void)
{
	setvbuf(stdout, 0, _IONBF, 0);
	signal(SIGUSR1, on);
	q[0] = msgget(IPC_PRIVATE, 0600);
	q[1] = msgget(IPC_PRIVATE, 0600);
	pthread_t t[2];
	pthread_create(&t[0], 0, rcv, (void *)0);
	pthread_create(&t[1], 0, rcv, (void *)1);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &s, 0); /* main never takes it */
	usleep(100000);
	kill(getpid(), SIGUSR1);
	usleep(100000);
	printf("handler ran %d time(s); msgrcv calls ended with EINTR: %d (kernel: 1)\n", handled, eintr);
	msgctl(q[0], IPC_RMID, 0);
	msgctl(q[1], IPC_RMID, 0);
	return 0;
}
