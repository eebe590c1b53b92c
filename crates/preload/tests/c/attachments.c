/* The memory calls on attachments, as Linux answers them: mprotect of a
 * read-only attachment (SHM_RDONLY) to PROT_WRITE is EACCES (the kernel
 * maps a shm file opened read-only), to PROT_NONE, PROT_READ and
 * PROT_EXEC it succeeds; a writable one goes read-only and back; madvise
 * MADV_DONTNEED keeps the contents (a shared mapping), MADV_REMOVE
 * zeroes them for every attachment. munmap of a whole attachment
 * detaches it (shm_nattch 0, shmdt then EINVAL; a removed segment's last
 * one destroys it), as mmap MAP_FIXED over it and syscall(SYS_munmap) do;
 * a page of the program's own mapped where part of an attachment was
 * unmapped (or past one shrunk by mremap) survives shmdt; mremap moves an
 * attachment whole (shmdt at the new address, nattch unchanged) and grows
 * it. */
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

	/* munmap of a whole attachment */
	p = shmat(id, NULL, 0);
	T(munmap(p, 2 * 4096));
	nattch("munmapped whole");
	T(shmdt(p));

	/* a page of the program's own where part of one was */
	p = shmat(id, NULL, 0);
	T(munmap(p + 4096, 4096));
	char *mine = mmap(p + 4096, 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	SAY("own page where the tail was: %s", mine == p + 4096 ? "yes" : "no");
	mine[0] = 'm';
	T(shmdt(p));
	nattch("shmdt after the tail went");
	SAY("own page still there: %c", mine[0]);
	munmap(mine, 4096);

	/* MAP_FIXED over a whole attachment */
	p = shmat(id, NULL, 0);
	void *q = mmap(p, 2 * 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	SAY("replaced %s", q == p ? "in place" : "elsewhere");
	nattch("replaced by MAP_FIXED");
	T(shmdt(p));
	munmap(q, 2 * 4096);

	/* mremap: moved whole */
	p = shmat(id, NULL, 0);
	p[0] = 'z';
	q = mremap(p, 2 * 4096, 2 * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, p + 1024 * 4096);
	SAY("moved %s", q == MAP_FAILED ? strerrorname_np(errno) : "ok");
	nattch("moved");
	SAY("contents %c", ((char *)q)[0]);
	T(shmdt(p));
	T(shmdt(q));
	nattch("shmdt at the new address");

	/* mremap: shrunk, then the program's pages after it */
	p = shmat(id, NULL, 0);
	q = mremap(p, 2 * 4096, 4096, 0);
	SAY("shrunk %s", q == p ? "in place" : "?");
	mine = mmap(p + 4096, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	SAY("own page after the shrunk one: %s", mine == p + 4096 ? "yes" : "no");
	mine[0] = 'n';
	T(shmdt(p));
	nattch("shmdt of the shrunk one");
	SAY("own page still there: %c", mine[0]);
	munmap(mine, 4096);

	/* mremap: grown (nothing touched past the segment) */
	p = shmat(id, NULL, 0);
	q = mremap(p, 2 * 4096, 8 * 4096, MREMAP_MAYMOVE);
	SAY("grown %s", q == MAP_FAILED ? strerrorname_np(errno) : "ok");
	nattch("grown");
	SAY("contents %c", ((char *)q)[0]);
	T(shmdt(q));
	nattch("shmdt of the grown one");

	/* the system call's form */
	p = shmat(id, NULL, 0);
	T(syscall(SYS_munmap, p, 2 * 4096));
	nattch("munmapped by syscall()");
	T(shmdt(p));

	/* removed: its last attachment munmapped destroys it */
	p = shmat(id, NULL, 0);
	T(shmctl(id, IPC_RMID, NULL));
	nattch("removed, attached");
	T(munmap(p, 2 * 4096));
	nattch("removed, munmapped");
	return 0;
}
