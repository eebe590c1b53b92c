/* The C side of php_sysv.php's messages: a dynamically linked glibc
 * program, whose System V IPC calls libipcns.so serves under ipcns run.
 *
 * php_peer KEY: prints the library msgrcv binds to, then "ready"; sleeps
 * in msgrcv for PHP's type 1 and answers on type 2 with its length and
 * upper-case text; waits until its parent (PHP) sleeps in msgrcv, sends
 * it bytes 0 to 255 twice on type 3; takes "bye" on type 4.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <time.h>
#include <unistd.h>

struct message {
	long mtype;
	char mtext[4096];
};

static void fail(const char *what)
{
	printf("peer: FAIL: %s: %s\n", what, strerror(errno));
	exit(1);
}

static ssize_t receive(int q, struct message *m, long type)
{
	ssize_t n;
	while ((n = msgrcv(q, m, sizeof m->mtext, type, 0)) < 0 && errno == EINTR)
		;
	return n;
}

/* Whether process pid is in system call nr (/proc/PID/syscall). */
static int in_syscall(pid_t pid, int nr)
{
	char path[64], buf[64];
	snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int got = -1;
	if (fgets(buf, sizeof buf, f))
		got = atoi(buf);
	fclose(f);
	return got == nr;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	/* Never left waiting for a PHP that failed. */
	alarm(60);
	Dl_info info;
	if (!dladdr(dlsym(RTLD_DEFAULT, "msgrcv"), &info) || !info.dli_fname)
		fail("dladdr");
	printf("peer: msgrcv and msgsnd bound to %s\nready\n", basename((char *)info.dli_fname));
	fflush(stdout);
	int q = msgget((key_t)strtol(argv[1], NULL, 0), 0);
	if (q < 0)
		fail("msgget");

	static struct message m, r;
	ssize_t n = receive(q, &m, 1);
	if (n < 0)
		fail("msgrcv of type 1");
	r.mtype = 2;
	int len = snprintf(r.mtext, sizeof r.mtext, "%zd:", n);
	for (ssize_t i = 0; i < n && len < (int)sizeof r.mtext; i++)
		r.mtext[len++] = toupper((unsigned char)m.mtext[i]);
	if (msgsnd(q, &r, len, 0) < 0)
		fail("msgsnd of type 2");
	ssize_t first = n;

	/* x86-64's msgrcv: 70, through the kernel or the supervisor. */
	struct timespec pause = {0, 1000000};
	for (int i = 0; !in_syscall(getppid(), 70); i++) {
		if (i == 10000)
			fail("php never sleeps in msgrcv");
		nanosleep(&pause, NULL);
	}
	/* Under ipcns run the supervisor takes the call a few µs later:
	 * time for it to be asleep there too. */
	pause.tv_nsec = 50000000;
	nanosleep(&pause, NULL);
	r.mtype = 3;
	for (int i = 0; i < 512; i++)
		r.mtext[i] = (char)i;
	if (msgsnd(q, &r, 512, 0) < 0)
		fail("msgsnd of type 3");
	n = receive(q, &m, 4);
	if (n != 3 || memcmp(m.mtext, "bye", 3) != 0)
		fail("msgrcv of bye");
	printf("peer: %zd bytes from php while asleep, answered; 512 bytes to php while it slept; bye\n", first);
	return 0;
}
