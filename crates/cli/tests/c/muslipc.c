/* muslipc.c - System V IPC as a C program makes it, for the musl build
 * of libipcns.so (tests/cli/musl.rs): built with musl-gcc, run on the
 * kernel in a fresh IPC namespace and under `ipcns run --strict
 * --private`, with the same output expected line for line.
 *
 * usage: muslipc
 *
 * Each call prints its result (or -1 and errno's name); the *ctl
 * structures print the fields that do not hold times or pids. Also the
 * library's entry points that take structures musl lays out its own way
 * (struct ipc_perm's mode_t and int seq, semid_ds's short sem_nsems,
 * the semun union passed by value), and errnos of each family. Only
 * portable C: no glibc extension (strerrorname_np), so that it builds
 * with both C libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <unistd.h>

static const char *ename(int e)
{
	switch (e) {
	case EACCES: return "EACCES";
	case EEXIST: return "EEXIST";
	case EFAULT: return "EFAULT";
	case EIDRM: return "EIDRM";
	case EINVAL: return "EINVAL";
	case ENOENT: return "ENOENT";
	case ENOMSG: return "ENOMSG";
	case ENOSYS: return "ENOSYS";
	case E2BIG: return "E2BIG";
	case EAGAIN: return "EAGAIN";
	case ERANGE: return "ERANGE";
	default: return "other";
	}
}

/* Prints `what = r`, or `what = -1 ENAME`. */
static long show(const char *what, long r)
{
	if (r == -1)
		printf("%s = -1 %s\n", what, ename(errno));
	else
		printf("%s = %ld\n", what, r);
	return r;
}
#define T(call) show(#call, (long)(call))

union semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
};

static void perm(const char *what, const struct ipc_perm *p)
{
	printf("%s: key %#x uid %u gid %u cuid %u cgid %u mode %o\n", what, (unsigned)p->__key,
	       (unsigned)p->uid, (unsigned)p->gid, (unsigned)p->cuid, (unsigned)p->cgid,
	       (unsigned)p->mode);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Semaphores. */
	int s = T(semget(0x5a10, 3, IPC_CREAT | IPC_EXCL | 0640));
	T(semget(0x5a10, 3, IPC_CREAT | IPC_EXCL | 0640));
	T(semget(0x5a10, 4, 0));
	T(semget(0x5a11, 1, 0));
	T(semctl(s, 1, SETVAL, (union semun){.val = 5}));
	T(semctl(s, 1, SETVAL, (union semun){.val = -1}));
	T(semctl(s, 1, GETVAL));
	struct sembuf ops[2] = {{0, 2, 0}, {1, -3, SEM_UNDO}};
	T(semop(s, ops, 2));
	T(semop(s, ops, 0));
	struct sembuf nowait = {2, -1, IPC_NOWAIT};
	T(semop(s, &nowait, 1));
	struct timespec ts = {0, 1000000};
	T(semtimedop(s, &nowait, 1, &ts));
	unsigned short vals[3];
	T(semctl(s, 0, GETALL, (union semun){.array = vals}));
	printf("values %u %u %u\n", vals[0], vals[1], vals[2]);
	T(semctl(s, 0, GETPID) == getpid());
	T(semctl(s, 2, GETNCNT));
	struct semid_ds sd;
	memset(&sd, 0xa5, sizeof sd);
	T(semctl(s, 0, IPC_STAT, (union semun){.buf = &sd}));
	perm("sem", &sd.sem_perm);
	printf("sem_nsems %lu otime set %d\n", (unsigned long)sd.sem_nsems, sd.sem_otime != 0);
	sd.sem_perm.mode = 0600;
	T(semctl(s, 0, IPC_SET, (union semun){.buf = &sd}));
	T(semctl(s, 0, IPC_STAT, (union semun){.buf = &sd}));
	perm("sem after IPC_SET", &sd.sem_perm);
	struct seminfo si;
	T(semctl(s, 0, IPC_INFO, (union semun){.buf = (struct semid_ds *)&si}) >= 0);
	printf("semmsl %d semopm %d\n", si.semmsl, si.semopm);

	/* Messages. */
	int q = T(msgget(0x5a20, IPC_CREAT | 0600));
	struct {
		long type;
		char text[64];
	} m = {3, "hello"};
	T(msgsnd(q, &m, 6, 0));
	m.type = 7;
	strcpy(m.text, "seven");
	T(msgsnd(q, &m, 6, IPC_NOWAIT));
	m.type = 0;
	T(msgsnd(q, &m, 6, 0));
	struct msqid_ds mq;
	T(msgctl(q, IPC_STAT, &mq));
	perm("msg", &mq.msg_perm);
	printf("msg_qnum %lu msg_cbytes %lu msg_qbytes %lu\n", (unsigned long)mq.msg_qnum,
	       (unsigned long)mq.msg_cbytes, (unsigned long)mq.msg_qbytes);
	memset(&m, 0, sizeof m);
	T(msgrcv(q, &m, sizeof m.text, 7, 0));
	printf("got type %ld %s\n", m.type, m.text);
	T(msgrcv(q, &m, 2, 0, IPC_NOWAIT));
	T(msgrcv(q, &m, 2, 0, IPC_NOWAIT | MSG_NOERROR));
	printf("got type %ld %.2s\n", m.type, m.text);
	T(msgrcv(q, &m, sizeof m.text, 0, IPC_NOWAIT));
	mq.msg_qbytes = 1000;
	T(msgctl(q, IPC_SET, &mq));
	T(msgctl(q, IPC_STAT, &mq));
	printf("msg_qnum %lu msg_qbytes %lu\n", (unsigned long)mq.msg_qnum, (unsigned long)mq.msg_qbytes);

	/* Shared memory. */
	int h = T(shmget(0x5a30, 10000, IPC_CREAT | 0600));
	T(shmget(0x5a30, 20000, 0));
	char *p = shmat(h, NULL, 0);
	printf("shmat %s\n", p == (void *)-1 ? ename(errno) : "ok");
	strcpy(p, "written");
	char *r = shmat(h, NULL, SHM_RDONLY);
	printf("shmat rdonly %s: %s\n", r == (void *)-1 ? ename(errno) : "ok", r);
	struct shmid_ds hd;
	T(shmctl(h, IPC_STAT, &hd));
	perm("shm", &hd.shm_perm);
	printf("shm_segsz %lu shm_nattch %lu\n", (unsigned long)hd.shm_segsz, (unsigned long)hd.shm_nattch);
	T(shmdt(r));
	T(shmdt(r));
	T(shmctl(h, IPC_RMID, NULL));
	T(shmctl(h, IPC_STAT, &hd));
	printf("after IPC_RMID: mode %o nattch %lu\n", (unsigned)hd.shm_perm.mode & 01777,
	       (unsigned long)hd.shm_nattch);
	T(shmdt(p));
	T(shmctl(h, IPC_STAT, &hd));

	/* Removal. */
	T(semctl(s, 0, IPC_RMID));
	T(semop(s, ops, 1));
	T(msgctl(q, IPC_RMID, NULL));
	T(msgsnd(q, &m, 1, 0));
	return 0;
}
