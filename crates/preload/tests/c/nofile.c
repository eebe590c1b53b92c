/* System V IPC with no descriptor to spare: RLIMIT_NOFILE lowered to the
 * descriptors the program has (the kernel needs none for System V IPC).
 * Semaphores and messages; with the argument "early", after a first call
 * made before the limit is lowered (the library then has the namespace
 * mapped already), else the first call is made at the limit (through the
 * library, the namespace handed down as IPCNS_FD, which it then maps
 * without a duplicate). With "shm", segments (what the library does
 * differs from the kernel there: see crates/preload/README.md). */
#include "t.h"
#include <fcntl.h>
#include <sys/resource.h>

/* The soft limit lowered to the lowest free descriptor: no new one can
 * be had. */
static void lower(void)
{
	int fd = 0;
	while (fcntl(fd, F_GETFD) != -1)
		fd++;
	struct rlimit r;
	getrlimit(RLIMIT_NOFILE, &r);
	r.rlim_cur = fd;
	T(setrlimit(RLIMIT_NOFILE, &r));
	T(open("/dev/null", O_RDONLY));
}

static void sem(void)
{
	struct sembuf up = { 0, 2, 0 }, down = { 0, -1, 0 };
	int id = semget(0x4e4f, 2, IPC_CREAT | 0600);
	T(id >= 0);
	T(semop(id, &up, 1));
	T(semop(id, &down, 1));
	T(semctl(id, 0, GETVAL));
	T(semget(0x4e4f, 2, 0) == id);
	T(semctl(id, 0, IPC_RMID));
}

static void msg(void)
{
	struct { long mtype; char mtext[32]; } m = { 5, "no descriptor" }, r;
	int id = msgget(IPC_PRIVATE, 0600);
	T(id >= 0);
	T(msgsnd(id, &m, 14, 0));
	T(msgsnd(id, &m, 14, IPC_NOWAIT));
	struct msqid_ds ds;
	T(msgctl(id, IPC_STAT, &ds));
	T(ds.msg_qnum);
	T(msgrcv(id, &r, sizeof r.mtext, 0, 0));
	T(r.mtype);
	T(strcmp(r.mtext, "no descriptor"));
	T(msgctl(id, IPC_RMID, 0));
}

static void shm(void)
{
	T(shmget(IPC_PRIVATE, 4096, 0600));
	int id = shmget(IPC_PRIVATE, 4096, SHM_NORESERVE | 0600);
	T(id >= 0);
	TP(shmat(id, 0, 0));
	SAY("one descriptor more");
	struct rlimit r;
	getrlimit(RLIMIT_NOFILE, &r);
	r.rlim_cur++;
	T(setrlimit(RLIMIT_NOFILE, &r));
	char *p = shmat(id, 0, 0);
	TP(p);
	if (p != (void *)-1) {
		p[4095] = 1;
		T(p[4095]);
		T(shmdt(p));
	}
	T(shmctl(id, IPC_RMID, 0));
}

int main(int argc, char **argv)
{
	int early = 0, segments = 0;
	start();
	for (int i = 1; i < argc; i++) {
		early |= !strcmp(argv[i], "early");
		segments |= !strcmp(argv[i], "shm");
	}
	if (early)
		T(semget(0x4e4f, 1, 0));
	lower();
	sem();
	msg();
	if (segments)
		shm();
	return 0;
}
