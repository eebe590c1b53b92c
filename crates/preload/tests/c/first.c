/* The first System V calls of a process, for the namespace tests: what
 * they return, and a shared memory segment written and read back. */
#include "t.h"

int main(void)
{
	start();
	T(semget(0x5601, 2, IPC_CREAT | 0600));
	T(msgget(0x6601, IPC_CREAT | 0600));
	int h;
	T(h = shmget(0x7601, 4096, IPC_CREAT | 0600));
	char *p;
	TP(p = shmat(h, NULL, 0));
	if (p != (void *)-1) {
		strcpy(p, "segment");
		SAY("read back: %s", p);
		T(shmdt(p));
	}
	struct sembuf op = { 0, 1, SEM_UNDO };
	T(semop(semget(0x5601, 0, 0), &op, 1));
	return 0;
}
