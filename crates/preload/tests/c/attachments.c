/* The memory calls on attachments, as Linux answers them: mprotect of a
 * read-only attachment (SHM_RDONLY) to PROT_WRITE is EACCES (the kernel
 * maps a shm file opened read-only), to PROT_NONE, PROT_READ and
 * PROT_EXEC it succeeds; a writable one goes read-only and back; madvise
 * MADV_DONTNEED keeps the contents (a shared mapping), MADV_REMOVE
 * zeroes them for every attachment. */
#include "t.h"

static int id;

static void nattch(const char *what)
{
	struct shmid_ds ds;
	if (shmctl(id, IPC_STAT, &ds) == 0)
		SAY("%s: nattch %lu", what, (unsigned long)ds.shm_nattch);
	else
		SAY("%s: IPC_STAT %s", what, strerrorname_np(errno));
}

int main(void)
{
	start();
	id = shmget(IPC_PRIVATE, 2 * 4096, 0600);
	SAY("segment %d", id >= 0);
	char *p = shmat(id, NULL, 0);
	char *r = shmat(id, NULL, SHM_RDONLY);
	SAY("attached %d", p != (void *)-1 && r != (void *)-1);
	p[0] = 'a';
	p[4096] = 'b';

	/* mprotect */
	T(mprotect(r, 8192, PROT_READ | PROT_WRITE));
	T(mprotect(r, 4096, PROT_WRITE));
	T(mprotect(r, 8192, PROT_NONE));
	T(mprotect(r, 8192, PROT_READ));
	T(mprotect(r, 8192, PROT_READ | PROT_EXEC));
	SAY("read-only attachment reads %c %c", r[0], r[4096]);
	T(mprotect(p, 8192, PROT_READ));
	T(mprotect(p, 8192, PROT_READ | PROT_WRITE));
	p[1] = 'c';
	SAY("written back: %c", r[1]);

	/* madvise */
	T(madvise(p, 8192, MADV_DONTNEED));
	SAY("after MADV_DONTNEED: %c %c", p[0], p[4096]);
	T(madvise(r, 8192, MADV_DONTNEED));
	SAY("after MADV_DONTNEED of the read-only one: %c %c", r[0], r[4096]);
	T(madvise(p, 4096, MADV_REMOVE));
	SAY("after MADV_REMOVE of the first page: %d %c, read-only %d", p[0], p[4096], r[0]);
	nattch("two attachments");

	T(shmdt(r));
	T(shmdt(p));
	nattch("detached");
	T(shmctl(id, IPC_RMID, NULL));
	return 0;
}
