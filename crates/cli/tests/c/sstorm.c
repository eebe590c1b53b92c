/* Many callers blocked at once, and a kill storm on one set, for the
 * supervisor (tests/cli/static_programs.rs): 40 processes blocked in
 * msgrcv, each woken by one message (the sum of what they got is exact);
 * then 20 rounds of a SEM_UNDO holder and five sleepers on the same set,
 * all killed with SIGKILL while the sleepers sleep: once they are reaped,
 * nothing of them is left (the value back to 0, nobody counted waiting,
 * no message left). Built static: every call reaches the kernel, or the
 * supervisor. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

struct m {
	long t;
	int v;
};

int main(void)
{
	alarm(60);
	setvbuf(stdout, 0, _IONBF, 0);
	int q = msgget(IPC_PRIVATE, 0600), s = semget(IPC_PRIVATE, 1, 0600);
	enum { N = 40 };
	pid_t kids[N];
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		if (!kids[i]) {
			struct m r;
			if (msgrcv(q, &r, sizeof r.v, 0, 0) < 0)
				_exit(100);
			_exit(r.v % 64);
		}
	}
	int sum = 0;
	for (int i = 0; i < N; i++) {
		struct m a = { 1, i };
		msgsnd(q, &a, sizeof a.v, 0);
	}
	for (int i = 0; i < N; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		sum += WEXITSTATUS(st);
	}
	printf("received: %d (want %d)\n", sum, N * (N - 1) / 2);
	for (int round = 0; round < 20; round++) {
		pid_t h = fork();
		if (!h) {
			struct sembuf up = { 0, 1, SEM_UNDO };
			semop(s, &up, 1);
			pause();
			_exit(0);
		}
		pid_t w[5];
		for (int j = 0; j < 5; j++) {
			w[j] = fork();
			if (!w[j]) {
				struct sembuf dn = { 0, -2, 0 };
				semop(s, &dn, 1);
				_exit(7);
			}
		}
		usleep(2000 + (round % 5) * 1000);
		kill(h, SIGKILL);
		for (int j = 0; j < 5; j++)
			kill(w[j], SIGKILL);
		waitpid(h, 0, 0);
		for (int j = 0; j < 5; j++)
			waitpid(w[j], 0, 0);
	}
	printf("after the storm: semval %d GETNCNT %d GETZCNT %d\n", semctl(s, 0, GETVAL),
	       semctl(s, 0, GETNCNT), semctl(s, 0, GETZCNT));
	struct msqid_ds ds;
	msgctl(q, IPC_STAT, &ds);
	printf("messages left: %lu\n", (unsigned long)ds.msg_qnum);
	semctl(s, 0, IPC_RMID);
	msgctl(q, IPC_RMID, 0);
	printf("end: ran through\n");
	return 0;
}
