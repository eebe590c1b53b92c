/* The caller's credentials as of each call: objects made as root, then
 * checked as uid/gid 65534 (seteuid, setegid, setgroups, the raw
 * setresuid system call), back to root, and finally setuid(65534) for
 * good. Run as root. */
#include "t.h"
#include <grp.h>
#include <sys/fsuid.h>

static void try_all(int s, int q, int h)
{
	struct sembuf op = { 0, 0, IPC_NOWAIT };
	T(semop(s, &op, 1));
	T(semctl(s, 0, GETVAL));
	union semun u;
	u.val = 1;
	T(semctl(s, 0, SETVAL, u));
	struct { long mtype; char mtext[8]; } m = { 1, "x" };
	T(msgsnd(q, &m, 2, IPC_NOWAIT));
	T(msgrcv(q, &m, 8, 0, IPC_NOWAIT));
	TP(shmat(h, NULL, SHM_RDONLY));
	TP(shmat(h, NULL, 0));
	struct msqid_ds qs;
	T(msgctl(q, IPC_STAT, &qs));
	T(msgctl(q, IPC_SET, &qs));
	T(semget(0x5401, 1, 0600));
	T(semget(0x5401, 1, 0));
}

int main(void)
{
	start();
	int s = semget(0x5401, 1, IPC_CREAT | 0600);
	int q = msgget(0x6401, IPC_CREAT | 0640);
	int h = shmget(0x7401, 4096, IPC_CREAT | 0604);
	struct msqid_ds qs;
	msgctl(q, IPC_STAT, &qs);
	qs.msg_perm.gid = 1234;
	msgctl(q, IPC_SET, &qs);
	SAY("as root");
	try_all(s, q, h);
	SAY("seteuid(65534)");
	T(setegid(65534));
	T(seteuid(65534));
	try_all(s, q, h);
	T(semctl(s, 0, IPC_RMID));
	SAY("setgroups([1234]) needs root: back first");
	T(seteuid(0));
	gid_t g = 1234;
	T(setgroups(1, &g));
	T(syscall(SYS_setresuid, -1, 65534, -1));
	SAY("in group 1234 (the queue's), euid 65534 (raw setresuid)");
	try_all(s, q, h);
	T(syscall(SYS_setresuid, -1, 0, -1));
	SAY("root again");
	try_all(s, q, h);
	T(setfsuid(65534));
	SAY("fsuid does not count");
	try_all(s, q, h);
	setfsuid(0);
	T(setgroups(0, NULL));
	T(setregid(65534, 65534));
	T(setresuid(65534, 65534, 65534));
	SAY("setresuid(65534) for good");
	try_all(s, q, h);
	T(seteuid(0));
	pid_t c = fork();
	if (c == 0) {
		SAY("a child of nobody");
		try_all(s, q, h);
		exit(0);
	}
	waitpid(c, NULL, 0);
	return 0;
}
