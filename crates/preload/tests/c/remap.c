/* remap_file_pages(2) on attachments: Linux maps the attachment's file
 * again over the range (the attachment closed and opened again), so it
 * succeeds while the segment lives, maps the segment's own pages from
 * pgoff, and fails with EINVAL, leaving the range unmapped, once the
 * segment was removed and the range was its last attachment (LTP's
 * shmctl05). Arguments refused before the address is looked at, and
 * other mappings, are the kernel's. */
#include "t.h"

static int h;

static void stat_line(const char *what)
{
	struct shmid_ds ds;
	if (shmctl(h, IPC_STAT, &ds) == -1) {
		SAY("%s: IPC_STAT -1 %s", what, strerrorname_np(errno));
		return;
	}
	SAY("%s: nattch %lu, lpid mine %d, atime set %d, dtime set %d, dest %d", what,
	    ds.shm_nattch, ds.shm_lpid == getpid(), ds.shm_atime != 0, ds.shm_dtime != 0,
	    (ds.shm_perm.mode & SHM_DEST) != 0);
}

/* Whether [p, p + 4096) is mapped (msync answers ENOMEM for a hole). */
static int mapped(void *p)
{
	return msync(p, 4096, MS_ASYNC) == 0;
}

int main(void)
{
	start();
	h = shmget(IPC_PRIVATE, 3 * 4096, 0600);
	char *p = shmat(h, NULL, 0);
	p[0] = 'A';
	p[4096] = 'B';
	p[8192] = 'C';
	stat_line("attached");

	/* Refused before the address is looked at. */
	T(remap_file_pages(p, 3 * 4096, PROT_READ, 0, 0));
	T(remap_file_pages(p, 0, 0, 0, 0));
	T(remap_file_pages(p, 4096, 0, (size_t)-1, 0));
	/* Past the attachment's end. */
	T(remap_file_pages(p + 4096, 3 * 4096, 0, 0, 0));

	/* The whole attachment, where it is. */
	T(remap_file_pages(p, 3 * 4096, 0, 0, 0));
	SAY("pages: %c %c %c", p[0], p[4096], p[8192]);
	stat_line("remapped in place");
	T(syscall(SYS_remap_file_pages, p, 3 * 4096, 0, 0, 0));

	/* The first page shows the third, then its own again. */
	T(remap_file_pages(p, 4096, 0, 2, 0));
	SAY("first page: %c", p[0]);
	p[0] = 'c';
	SAY("third page: %c", p[8192]);
	T(remap_file_pages(p, 4096, 0, 0, 0));
	SAY("first page: %c", p[0]);
	T(shmdt(p));
	stat_line("detached");

	/* Two attachments of a removed segment: the first remapped while the
	 * other still counts; the last one fails and is gone. */
	char *q = shmat(h, NULL, 0);
	char *r = shmat(h, NULL, 0);
	T(shmctl(h, IPC_RMID, NULL));
	stat_line("removed, two attached");
	T(remap_file_pages(q, 3 * 4096, 0, 0, 0));
	SAY("q: %c, mapped %d", q[8192], mapped(q));
	T(shmdt(r));
	stat_line("one left");
	T(remap_file_pages(q, 3 * 4096, 0, 0, 0));
	SAY("q mapped %d", mapped(q));
	stat_line("after the last remap");
	T(shmdt(q));

	/* Another shared mapping: the kernel's call. */
	char *m = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T(remap_file_pages(m, 4096, 0, 0, 0));
	T(remap_file_pages(m + 4096, 4096, 0, 1, 0));
	munmap(m, 2 * 4096);
	return 0;
}
