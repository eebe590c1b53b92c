/* A descendant that changed uid and exec'd, in a namespace it may not
 * open by its path (a private one: the library reaches it through the
 * descriptors `ipcns run` hands down, IPCNS_FD and IPCNS_POOL_FD): it
 * finds, attaches, makes and removes segments, semaphores and queues as
 * the objects' permissions allow, as in a kernel IPC namespace (LTP's
 * shmctl02, shmget04). Run as root. */
#include "t.h"

int main(int argc, char **argv)
{
	start();
	if (argc == 2) {
		/* As nobody, after the exec. */
		int h = shmget(0x7601, 0, 0);
		TP(shmat(h, NULL, 0));
		TP(shmat(shmget(0x7602, 0, 0), NULL, SHM_RDONLY));
		T(shmctl(h, IPC_RMID, NULL));
		int n = shmget(IPC_PRIVATE, 3 * 4096, 0600);
		T(n >= 0);
		char *p = shmat(n, NULL, 0);
		TP(p);
		if (p != (void *)-1)
			p[8191] = 'n';
		struct shmid_ds ds;
		T(shmctl(n, IPC_STAT, &ds));
		SAY("own segment: nattch %lu, uid %u, size %zu", ds.shm_nattch, ds.shm_perm.uid, ds.shm_segsz);
		T(shmdt(p));
		T(shmctl(n, IPC_RMID, NULL));
		/* A larger one, and one past what a page table of the pool holds. */
		int big = shmget(IPC_PRIVATE, 8 << 20, 0600);
		T(big >= 0);
		T(shmctl(big, IPC_RMID, NULL));
		int s = semget(0x5601, 0, 0);
		struct sembuf up = { 0, 1, SEM_UNDO };
		T(semop(s, &up, 1));
		T(semctl(s, 0, GETVAL));
		T(semctl(s, 0, IPC_RMID));
		int q = msgget(IPC_PRIVATE, 0600);
		T(q >= 0);
		T(msgctl(q, IPC_RMID, NULL));
		return 0;
	}
	int h = shmget(0x7601, 4096, IPC_CREAT | 0666);
	int h2 = shmget(0x7602, 4096, IPC_CREAT | 0600);
	int s = semget(0x5601, 1, IPC_CREAT | 0666);
	pid_t c = fork();
	if (c == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(2);
		execl("/proc/self/exe", argv[0], "nobody", (char *)NULL);
		_exit(3);
	}
	int st;
	waitpid(c, &st, 0);
	SAY("child: exited %d, status %d", WIFEXITED(st), WEXITSTATUS(st));
	T(semctl(s, 0, GETVAL));
	T(shmctl(h, IPC_RMID, NULL));
	T(shmctl(h2, IPC_RMID, NULL));
	T(semctl(s, 0, IPC_RMID));
	return 0;
}
