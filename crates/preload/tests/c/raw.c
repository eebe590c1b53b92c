/* The system calls through syscall(2), as test suites make them: semctl
 * with the union passed by value, semtimedop, the *ctl calls with and
 * without IPC_64, shmat returning the address; and other numbers passed
 * through with their errno. */
#include "t.h"

int main(void)
{
	start();
	long s = syscall(SYS_semget, 0x5101, 2, IPC_CREAT | 0600);
	T(s);
	union semun u;
	u.val = 3;
	T(syscall(SYS_semctl, s, 0, SETVAL, u));
	T(syscall(SYS_semctl, s, 0, GETVAL, 0));
	/* The upper half of an int argument's register is ignored. */
	T(syscall(SYS_semctl, s | 0x7fffffff00000000L, 0, GETVAL, 0));
	struct semid_ds ds;
	u.buf = &ds;
	T(syscall(SYS_semctl, s, 0, IPC_STAT, u));
	SAY("nsems %lu", (unsigned long)ds.sem_nsems);
	T(syscall(SYS_semctl, s, 0, IPC_STAT | IPC_64, u));
	T(syscall(SYS_semctl, s, 0, GETVAL | IPC_64, 0));
	T(semctl((int)s, 0, IPC_STAT | IPC_64, u));
	struct sembuf op = { 0, -1, 0 };
	T(syscall(SYS_semop, s, &op, 1));
	struct timespec ts = { 0, 1000000 };
	op.sem_flg = 0;
	op.sem_op = -5;
	T(syscall(SYS_semtimedop, s, &op, 1, &ts));
	T(syscall(SYS_semtimedop, s, &op, 1, (void *)8));
	/* nsops is an unsigned int: the upper bits are dropped. */
	op.sem_op = 1;
	T(syscall(SYS_semtimedop, s, &op, 0x100000001L, NULL));
	T(syscall(SYS_semctl, s, 0, GETVAL, 0));
	long q = syscall(SYS_msgget, IPC_PRIVATE, 0600);
	T(q);
	struct { long mtype; char mtext[16]; } m = { 4, "raw" };
	T(syscall(SYS_msgsnd, q, &m, 4, 0));
	struct msqid_ds qs;
	T(syscall(SYS_msgctl, q, IPC_STAT, &qs));
	SAY("qnum %lu", (unsigned long)qs.msg_qnum);
	T(syscall(SYS_msgctl, q, IPC_STAT | IPC_64, &qs));
	memset(&m, 0, sizeof m);
	T(syscall(SYS_msgrcv, q, &m, 16, 0, IPC_NOWAIT));
	SAY("got %ld %s", m.mtype, m.mtext);
	T(syscall(SYS_msgrcv, q, &m, 16, 0, IPC_NOWAIT));
	T(syscall(SYS_msgctl, q, IPC_RMID, NULL));
	long h = syscall(SYS_shmget, IPC_PRIVATE, 4096, 0600);
	T(h);
	long a = syscall(SYS_shmat, h, NULL, 0);
	SAY("shmat page-aligned %d", a != -1 && (a & 4095) == 0);
	strcpy((char *)a, "raw shm");
	struct shmid_ds hs;
	T(syscall(SYS_shmctl, h, IPC_STAT, &hs));
	SAY("nattch %lu", (unsigned long)hs.shm_nattch);
	T(syscall(SYS_shmctl, h, IPC_STAT | IPC_64, &hs));
	T(syscall(SYS_shmctl, h, IPC_RMID | IPC_64, NULL));
	T(syscall(SYS_shmdt, a));
	T(syscall(SYS_shmdt, a));
	T(syscall(SYS_shmctl, h, IPC_RMID, NULL));
	T(syscall(SYS_semctl, s, 0, IPC_RMID, 0));
	/* Other numbers pass through, with their errno. */
	T(syscall(SYS_getpid) == getpid());
	T(syscall(SYS_close, -1));
	T(syscall(SYS_getppid) == getppid());
	T(syscall(100000));
	return 0;
}
