/* A static lister of /proc/sysvipc (what a static ipcs reads), for the
 * supervisor's --serve-proc (tests/cli/static_programs.rs): for each of
 * sem, msg and shm, the header's first three columns and each object's
 * id and permissions (keys and times differ between runs); then the IPC
 * sysctls it reads as `ipcs -l` would. Opened with open, openat and
 * fopen (openat), and a write refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void list(const char *which, int how)
{
	char path[64], buf[8192];
	snprintf(path, sizeof path, "/proc/sysvipc/%s", which);
	int fd = how == 0 ? open(path, O_RDONLY) : openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		printf("%s: %s\n", which, strerror(errno));
		return;
	}
	ssize_t n = 0, r;
	while ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += r;
	close(fd);
	buf[n] = 0;
	int line = 0;
	for (char *l = strtok(buf, "\n"); l; l = strtok(0, "\n"), line++) {
		char a[32], b[32], c[32];
		if (sscanf(l, "%31s %31s %31s", a, b, c) != 3)
			continue;
		if (line == 0)
			printf("%s: header %s %s %s\n", which, a, b, c);
		else
			printf("%s: id %s perms %s\n", which, b, c);
	}
}

int main(void)
{
	list("sem", 0);
	list("msg", 1);
	list("shm", 0);
	const char *names[] = { "msgmni", "msgmax", "msgmnb", "shmmni", "sem" };
	for (unsigned i = 0; i < sizeof names / sizeof *names; i++) {
		char path[64], v[128] = "";
		snprintf(path, sizeof path, "/proc/sys/kernel/%s", names[i]);
		FILE *f = fopen(path, "r");
		if (!f) {
			printf("%s: %s\n", names[i], strerror(errno));
			continue;
		}
		if (!fgets(v, sizeof v, f))
			v[0] = 0;
		fclose(f);
		v[strcspn(v, "\n")] = 0;
		printf("%s = %s\n", names[i], v);
	}
	int w = open("/proc/sysvipc/sem", O_WRONLY);
	printf("open for writing: %s\n", w < 0 ? strerror(errno) : "ok");
	printf("end: ran through\n");
	return 0;
}
