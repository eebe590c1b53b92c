/* Bad pointers where the kernel gives EFAULT (and where it does not: a
 * pointer it never reads), into unmapped pages, read-only pages, a
 * buffer that runs into an unmapped page, and read-only data of the
 * program itself. Nothing may fault. */
#include "t.h"

static const struct { long mtype; char mtext[8]; } rodata_msg = { 9, "rodata" };

int main(void)
{
	start();
	struct pages pg = pages();
	void *gone = pg.gone, *ro = pg.ro, *none = pg.none;
	char *edge = pg.edge;

	int s = semget(IPC_PRIVATE, 2, 0600);
	T(semop(s, NULL, 1));
	T(semop(s, gone, 1));
	T(semop(s, (void *)-1, 1));
	T(semop(s, none, 1));
	T(semop(s, NULL, 0));
	T(semop(s, NULL, 600));
	T(semop(-1, gone, 1));
	/* 16 bytes fit: two operations; three run off. */
	memset(edge, 0, 16);
	T(semop(s, (struct sembuf *)(edge + 4), 2));
	T(semop(s, (struct sembuf *)(edge + 4), 3));
	struct sembuf op = { 0, 0, 0 };
	T(semtimedop(s, &op, 1, gone));
	T(semtimedop(s, &op, 1, ro));
	union semun u;
	u.buf = gone;
	T(semctl(s, 0, IPC_STAT, u));
	u.buf = ro;
	T(semctl(s, 0, IPC_STAT, u));
	T(semctl(s, 0, IPC_SET, u));
	u.buf = gone;
	T(semctl(s, 0, IPC_SET, u));
	T(semctl(-1, 0, IPC_SET, u));
	T(semctl(s, 0, IPC_INFO, u));
	T(semctl(s, 0, SEM_INFO, u));
	u.array = ro;
	T(semctl(s, 0, GETALL, u));
	T(semctl(s, 0, SETALL, u));
	u.array = gone;
	T(semctl(s, 0, SETALL, u));
	u.array = (unsigned short *)(edge + 14);
	T(semctl(s, 0, GETALL, u));
	T(semctl(s, 0, SETALL, u));
	/* No pointer read: no EFAULT. */
	u.buf = gone;
	T(semctl(s, 0, GETVAL, u));

	int q = msgget(IPC_PRIVATE, 0600);
	T(msgsnd(q, NULL, 1, 0));
	T(msgsnd(q, gone, 1, 0));
	T(msgsnd(q, ro, 1, 0));
	T(msgsnd(q, none, 1, 0));
	T(msgsnd(q, &rodata_msg, 7, 0));
	/* mtype readable, the text not. */
	*(long *)edge = 2;
	T(msgsnd(q, edge, 8, 0));
	T(msgsnd(q, edge, 9, 0));
	T(msgsnd(q, edge, 9000, 0));
	T(msgsnd(-1, edge, 9, 0));
	struct msqid_ds qs;
	T(msgctl(q, IPC_STAT, &qs));
	SAY("qnum %lu", (unsigned long)qs.msg_qnum);
	T(msgrcv(q, gone, 8, 0, IPC_NOWAIT));
	T(msgctl(q, IPC_STAT, &qs));
	SAY("qnum after a lost message %lu", (unsigned long)qs.msg_qnum);
	T(msgrcv(q, (void *)rodata_msg.mtext, 8, 0, IPC_NOWAIT));
	T(msgsnd(q, &rodata_msg, 7, 0));
	T(msgrcv(q, ro, 8, 0, IPC_NOWAIT));
	T(msgsnd(q, &rodata_msg, 7, 0));
	T(msgrcv(q, none, 8, 0, IPC_NOWAIT));
	T(msgsnd(q, &rodata_msg, 7, 0));
	/* mtype writable, the text not: mtype is written, the message lost. */
	*(long *)edge = 0;
	T(msgrcv(q, edge, 8, 0, IPC_NOWAIT));
	SAY("mtype written %ld", *(long *)edge);
	T(msgctl(q, IPC_STAT, &qs));
	SAY("qnum %lu", (unsigned long)qs.msg_qnum);
	T(msgsnd(q, &rodata_msg, 7, 0));
	/* Only the message's bytes are written: a buffer longer than the
	 * mapping is fine for a short message. */
	T(msgrcv(q, edge - 8, 4000, 0, IPC_NOWAIT));
	/* A message that runs into the hole, its buffer unaligned: mtype and
	 * the text bytes before the hole are written, then EFAULT (the
	 * message lost); sent from the heap. */
	struct big { long mtype; char mtext[20]; } *big = malloc(sizeof *big);
	big->mtype = 5;
	memcpy(big->mtext, "abcdefghijklmnopqrst", 20);
	T(msgsnd(q, big, 20, 0));
	memset(edge, '.', 16);
	T(msgrcv(q, edge + 3, 20, 0, IPC_NOWAIT));
	long got_type;
	memcpy(&got_type, edge + 3, sizeof got_type);
	SAY("mtype %ld, text before the hole %.5s", got_type, edge + 11);
	free(big);
	T(msgrcv(q, NULL, 8, 0, IPC_NOWAIT));
	T(msgrcv(q, gone, 8, 0, IPC_NOWAIT | MSG_COPY));
	T(msgctl(q, IPC_STAT, gone));
	T(msgctl(q, IPC_STAT, ro));
	T(msgctl(q, IPC_SET, gone));
	T(msgctl(q, MSG_INFO, ro));
	T(msgctl(q, IPC_INFO, NULL));
	T(msgctl(q, IPC_RMID, gone));

	int h = shmget(IPC_PRIVATE, 4096, 0600);
	T(shmctl(h, IPC_STAT, gone));
	T(shmctl(h, IPC_STAT, ro));
	T(shmctl(h, IPC_STAT, none));
	T(shmctl(h, IPC_SET, NULL));
	T(shmctl(h, IPC_INFO, ro));
	T(shmctl(h, SHM_INFO, (void *)-1));
	T(shmctl(h, SHM_STAT, gone));
	T(shmctl(h, IPC_RMID, gone));
	T(semctl(s, 0, IPC_RMID, u));
	return 0;
}
