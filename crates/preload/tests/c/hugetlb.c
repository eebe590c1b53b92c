/* SHM_HUGETLB where no huge pages are served: the size encoding
 * (bits 26-31: EINVAL for a size the kernel has no pool of), the
 * permission (EPERM without CAP_IPC_LOCK or the group vm.hugetlb_shm_group,
 * 0 by default), then ENOMEM (no pages), for root, a uid in group 0 and a
 * uid in no group. (SHM_NORESERVE, which the kernel grants without pages,
 * is left out: ipcns answers ENOMEM there, see the README.) */
#include "t.h"
#include <grp.h>
#ifndef SHM_HUGE_SHIFT
#define SHM_HUGE_SHIFT 26
#endif
static void run(void) {
	T(shmget(IPC_PRIVATE, 4096, SHM_HUGETLB | 0600));
	T(shmget(IPC_PRIVATE, 4096, SHM_HUGETLB | (21 << SHM_HUGE_SHIFT) | 0600));
	T(shmget(IPC_PRIVATE, 4096, SHM_HUGETLB | (30 << SHM_HUGE_SHIFT) | 0600));
	T(shmget(IPC_PRIVATE, 4096, SHM_HUGETLB | (25 << SHM_HUGE_SHIFT) | 0600));
	T(shmget(IPC_PRIVATE, 4096, SHM_HUGETLB | (63 << SHM_HUGE_SHIFT) | 0600));
	T(shmget(IPC_PRIVATE, 0, SHM_HUGETLB | 0600));
	T(shmget(0x4242, 4096, SHM_HUGETLB | 0600));
}
int main(void) {
	run();
	/* Without SHM_HUGETLB the size bits are ignored. */
	T(shmget(IPC_PRIVATE, 4096, (21 << SHM_HUGE_SHIFT) | 0600) >= 0);
	SAY("as gid 0 member, uid 1000");
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		gid_t g[1] = {0};
		setgroups(1, g);
		setresgid(1000, 1000, 1000);
		setresuid(1000, 1000, 1000);
		run();
		SAY("no groups");
		fflush(stdout);
		_exit(0);
	}
	waitpid(p, 0, 0);
	p = fork();
	if (p == 0) {
		setgroups(0, 0);
		setresgid(1000, 1000, 1000);
		setresuid(1000, 1000, 1000);
		run();
		fflush(stdout);
		_exit(0);
	}
	waitpid(p, 0, 0);
	return 0;
}
