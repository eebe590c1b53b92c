/* A second preloaded library that calls back into libipcns.so while the
 * latter is choosing its namespace: its getenv, asked for IPCNS_FD (as
 * the choice does), makes a System V call first. That inner call must
 * fail at once (ENOSYS) instead of waiting for the choice it is part of.
 * Built with -shared -fPIC; loaded after libipcns.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/sem.h>
#include <unistd.h>

char *getenv(const char *name)
{
	static char *(*next)(const char *);
	static int asked;
	if (!next)
		next = (char *(*)(const char *))dlsym(RTLD_NEXT, "getenv");
	if (name && strcmp(name, "IPCNS_FD") == 0 && !asked) {
		asked = 1;
		errno = 0;
		int r = semget(IPC_PRIVATE, 1, 0600);
		char line[96];
		int n = snprintf(line, sizeof line, "hook: semget inside the choice = %d %s\n", r,
				 r == -1 ? strerrorname_np(errno) : "0");
		if (write(1, line, n) < 0)
			return NULL;
	}
	return next ? next(name) : NULL;
}
