/* /proc/sysvipc and the ipc sysctls through the open family, the
 * syscall() forms, stdio and write(2), as the kernel answers each. */
#include "t.h"
#include <fcntl.h>
#include <linux/openat2.h>

/* The first line of what `fd` reads (its newline dropped), or the errno. */
static void first_line(const char *what, int fd)
{
	char buf[256];
	if (fd < 0) {
		printf("%s: open -1 %s\n", what, strerrorname_np(errno));
		return;
	}
	ssize_t n = read(fd, buf, sizeof buf - 1);
	if (n < 0) {
		printf("%s: read -1 %s\n", what, strerrorname_np(errno));
		close(fd);
		return;
	}
	buf[n] = 0;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	printf("%s: [%s]\n", what, buf);
	close(fd);
}

static void show_sysctl(const char *name)
{
	char path[128];
	snprintf(path, sizeof path, "/proc/sys/kernel/%s", name);
	first_line(name, open(path, O_RDONLY));
}

int main(void)
{
	show_sysctl("msgmni");
	show_sysctl("sem");
	show_sysctl("shm_rmid_forced");
	first_line("sysvipc/msg", open("/proc/sysvipc/msg", O_RDONLY | O_CLOEXEC));
	first_line("open64 shm", open64("/proc/sysvipc/shm", O_RDONLY));
	T(open((char *)0, O_RDONLY));
	T(open((char *)1, O_RDONLY));
	T(open("/proc/sysvipc/sem", O_RDONLY | O_DIRECTORY));
	T(open("/proc/sys/kernel/msgmni", O_RDONLY | O_CREAT | O_EXCL, 0600));
	int dir = open("/proc/sys/kernel", O_RDONLY | O_DIRECTORY);
	first_line("openat kernel/msgmax", openat(dir, "msgmax", O_RDONLY));
	int proc = open("/proc", O_RDONLY | O_DIRECTORY);
	first_line("openat proc/sysvipc/sem", openat(proc, "sysvipc/sem", O_RDONLY));
	first_line("SYS_open", (int)syscall(SYS_open, "/proc/sys/kernel/msgmnb", O_RDONLY));
	first_line("SYS_openat", (int)syscall(SYS_openat, AT_FDCWD, "/proc/sys/kernel/shmmni", O_RDONLY));
	struct open_how how = { .flags = O_RDONLY };
	first_line("SYS_openat2", (int)syscall(SYS_openat2, AT_FDCWD, "/proc/sys/kernel/sem_next_id", &how, sizeof how));
	T(syscall(SYS_open, (char *)1, O_RDONLY));

	/* write(2): applied as it happens, EINVAL for bad text. */
	int w = open("/proc/sys/kernel/msgmni", O_WRONLY | O_TRUNC);
	T(w >= 0);
	T(write(w, "abc\n", 4));
	T(write(w, "", 0));
	T(write(w, "50\n", 3));
	show_sysctl("msgmni");
	T(write(w, "60\n", 3)); /* at offset 3: ignored (sysctl_writes_strict) */
	show_sysctl("msgmni");
	void *volatile bad = (void *)1;
	T(write(w, bad, 3));
	close(w);
	w = open("/proc/sys/kernel/msgmni", O_RDWR);
	T(pwrite(w, "7\n", 2, 0));
	show_sysctl("msgmni");
	T(pwrite(w, "8\n", 2, 1));
	T(pwrite64(w, "x\n", 2, 0));
	show_sysctl("msgmni");
	close(w);
	/* A duplicate, as a shell's redirection makes. */
	w = open("/proc/sys/kernel/msg_next_id", O_WRONLY);
	int d = dup(w);
	T(dup2(w, 40));
	close(w);
	T(write(40, "12\n", 3));
	T(msgget(IPC_PRIVATE, 0600));
	show_sysctl("msg_next_id");
	close(40);
	close(d);
	T(write(fcntl(open("/proc/sys/kernel/shmmni", O_WRONLY), F_DUPFD, 50), "99", 2));
	show_sysctl("shmmni");
	T(write(open("/proc/sys/kernel/sem", O_WRONLY), "250 32000 32 2\n", 15));
	show_sysctl("sem");
	T(semget(IPC_PRIVATE, 1, 0600));
	T(semget(IPC_PRIVATE, 1, 0600));
	T(semget(IPC_PRIVATE, 1, 0600));
	T(write(open("/proc/sys/kernel/sem", O_WRONLY), "250 32000 32 0x10\n", 18));
	T(write(open("/proc/sys/kernel/msgmax", O_WRONLY), "-5\n", 3));
	T(write(open("/proc/sys/kernel/shm_rmid_forced", O_WRONLY), "2\n", 2));

	/* stdio. */
	FILE *f = fopen("/proc/sys/kernel/msgmnb", "w");
	T(f != NULL);
	T(fprintf(f, "%d\n", 4096));
	T(fclose(f));
	show_sysctl("msgmnb");
	f = fopen("/proc/sys/kernel/msgmnb", "w");
	T(fprintf(f, "x\n"));
	errno = 0;
	T(fclose(f));
	f = fopen64("/proc/sysvipc/sem", "re");
	char line[512];
	int rows = 0;
	while (f && fgets(line, sizeof line, f))
		rows++;
	T(rows);
	T(fclose(f));
	T(fopen("/proc/sys/kernel/msgmni", "q") == NULL);
	return 0;
}
