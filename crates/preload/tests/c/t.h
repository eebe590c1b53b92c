/* What every test program shares: each call is printed with its result
 * and, on failure, errno's name, one line per call, so that a run on the
 * kernel and a run through libipcns.so can be compared line by line.
 * Nothing that differs between two correct runs is printed (pids,
 * addresses, times). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef IPC_64
#define IPC_64 0x0100 /* <linux/ipc.h>: or-ed into a command by libc on some arches */
#endif

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
	struct seminfo *__buf;
};

static __attribute__((unused)) void show(const char *what, long r)
{
	if (r == -1)
		printf("%s = -1 %s\n", what, strerrorname_np(errno));
	else
		printf("%s = %ld\n", what, r);
}

/* A call returning an int or a long. */
#define T(call) do { errno = 0; long r_ = (long)(call); show(#call, r_); } while (0)
/* A call returning a pointer ((void *)-1 on failure): only whether it
 * failed is printed. */
#define TP(call) do { errno = 0; void *r_ = (void *)(call); \
	if (r_ == (void *)-1) show(#call, -1); else printf("%s = ok\n", #call); } while (0)
/* A line of text. */
#define SAY(...) do { printf(__VA_ARGS__); printf("\n"); } while (0)

/* Four pages made at once (so that no later mapping lands in the hole):
 * a read-write page whose last bytes are `edge` (a buffer there runs off
 * into the next page), an unmapped page (`gone`), a read-only page
 * (`ro`, zeroed) and an inaccessible one (`none`). */
struct pages {
	char *edge;
	void *gone, *ro, *none;
};

static __attribute__((unused)) struct pages pages(void)
{
	char *p = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(p, 0, 4 * 4096);
	munmap(p + 4096, 4096);
	mprotect(p + 2 * 4096, 4096, PROT_READ);
	mprotect(p + 3 * 4096, 4096, PROT_NONE);
	return (struct pages){ p + 4096 - 16, p + 4096, p + 2 * 4096, p + 3 * 4096 };
}

static void start(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
}
