/* execsleeper.c - the image execrace.c's second thread execs.
 *
 * usage: execsleeper a|b|c SEMID QID FD asleep|awake
 *
 * First writes "image leader=asleep" (or awake: whether the execing
 * thread saw the leader asleep) as a line on FD. Then, for c: GETVAL,
 * semop(+1, IPC_NOWAIT), semtimedop(-1, 20 ms), semop(+1, IPC_NOWAIT) on
 * SEMID, the results as a second line ("GETVAL=0 semop(+1,NOWAIT)=ok
 * semtimedop(-1,20ms)=ok semop(+1,NOWAIT)=ok" when all is well). Then it
 * sleeps 2 s; the parent ends it with SIGTERM before that.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <time.h>
#include <unistd.h>

static const char *res(int r)
{
	return r == 0 ? "ok" : strerrorname_np(errno);
}

int main(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	int sem = atoi(argv[2]), fd = atoi(argv[4]);
	char out[512];
	int l = snprintf(out, sizeof out, "image leader=%s\n", argv[5]);
	if (write(fd, out, l) < 0) {
	}
	if (argv[1][0] == 'c') {
		l = 0;
		int v = semctl(sem, 0, GETVAL);
		if (v == -1)
			l += snprintf(out + l, sizeof out - l, "GETVAL=%s", strerrorname_np(errno));
		else
			l += snprintf(out + l, sizeof out - l, "GETVAL=%d", v);
		struct sembuf up = { 0, 1, IPC_NOWAIT }, dn = { 0, -1, 0 };
		l += snprintf(out + l, sizeof out - l, " semop(+1,NOWAIT)=%s", res(semop(sem, &up, 1)));
		struct timespec ts = { 0, 20000000 };
		l += snprintf(out + l, sizeof out - l, " semtimedop(-1,20ms)=%s", res(semtimedop(sem, &dn, 1, &ts)));
		l += snprintf(out + l, sizeof out - l, " semop(+1,NOWAIT)=%s\n", res(semop(sem, &up, 1)));
		if (write(fd, out, l) < 0) {
		}
	}
	close(fd);
	struct timespec two = { 2, 0 };
	nanosleep(&two, NULL);
	return 0;
}
