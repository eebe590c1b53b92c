/* SIGSEGV and SIGBUS once the library copies heap buffers directly (a
 * fault in its copy is its EFAULT): every bad pointer still gives EFAULT,
 * on any thread, with the fault signals blocked or inside a SIGSEGV
 * handler; and the program's own actions for SIGSEGV and SIGBUS are kept
 * as the kernel keeps them: read back (sigaction, signal, sysv_signal,
 * the raw rt_sigaction), run with their mask and flags for real faults
 * and for sent signals (SA_RESETHAND, SA_NODEFER, siglongjmp out of a
 * handler, a handler that mends the page and returns), SIG_DFL and
 * SIG_IGN ending a faulting child with SIGSEGV, SIG_IGN surviving a sent
 * SIGSEGV, and SIG_IGN kept across exec. */
#include "t.h"
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000 /* <asm/signal.h> (x86-64) */
#endif

static int S, Q;
static struct pages P;
static sigjmp_buf jb;
static volatile sig_atomic_t ran, code, masked_self, masked_usr2, addr_ok;
static volatile char *expect;

/* The semaphore's value changes only through good calls: +1 each. */
static void bad_semops(const char *where)
{
	struct sembuf *heap = malloc(2 * sizeof *heap);
	heap[0] = (struct sembuf){ 0, 1, 0 };
	heap[1] = (struct sembuf){ 0, 1, 0 };
	SAY("%s:", where);
	T(semop(S, heap, 1));
	T(semop(S, (struct sembuf *)P.gone, 1));
	T(semop(S, (struct sembuf *)P.none, 1));
	/* Two operations, the second in the unmapped page. */
	struct sembuf *edge = (struct sembuf *)(P.edge + 16 - 6);
	edge[0] = (struct sembuf){ 0, 1, 0 };
	T(semop(S, edge, 2));
	T(semop(S, (struct sembuf *)(uintptr_t)8, 1));
	T(semop(S, (struct sembuf *)(uintptr_t)0xffffffffff600000ull, 1));
	union semun u = { .array = (unsigned short *)P.ro };
	T(semctl(S, 0, GETALL, u));
	u.array = (unsigned short *)(P.edge + 15);
	T(semctl(S, 0, SETALL, u));
	T(semctl(S, 0, GETVAL));
	free(heap);
}

static void bad_messages(void)
{
	struct msg { long type; char text[64]; } *m = malloc(sizeof *m);
	m->type = 1;
	memset(m->text, 'x', sizeof m->text);
	T(msgsnd(Q, m, 64, 0));
	T(msgsnd(Q, m, 64, 0));
	/* The text runs into the unmapped page: EFAULT, the message gone, as
	 * on the kernel. */
	T(msgrcv(Q, P.edge + 16 - 24, 64, 0, IPC_NOWAIT));
	T(msgrcv(Q, P.ro, 64, 0, IPC_NOWAIT));
	T(msgsnd(Q, P.edge, 64, 0));
	T(msgrcv(Q, m, 64, 0, IPC_NOWAIT));
	struct msqid_ds ds;
	T(msgctl(Q, IPC_STAT, &ds));
	SAY("messages left %lu", (unsigned long)ds.msg_qnum);
	free(m);
}

static void *blocked_thread(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	bad_semops("a thread with every signal blocked");
	return NULL;
}

static void show_act(const char *what, const struct sigaction *a, void (*mine)(int, siginfo_t *, void *))
{
	const char *h = a->sa_handler == SIG_DFL ? "SIG_DFL" :
			a->sa_handler == SIG_IGN ? "SIG_IGN" :
			(void *)a->sa_sigaction == (void *)mine ? "the handler" : "another handler";
	SAY("%s: %s, flags %#x, restorer %s, mask has SIGUSR2 %d SIGSEGV %d", what, h,
	    (unsigned)a->sa_flags, a->sa_restorer ? "set" : "null", sigismember(&a->sa_mask, SIGUSR2),
	    sigismember(&a->sa_mask, SIGSEGV));
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	ran++;
	code = si->si_code;
	addr_ok = si->si_addr == (void *)expect;
	sigset_t now;
	sigprocmask(SIG_BLOCK, NULL, &now);
	masked_self = sigismember(&now, sig);
	masked_usr2 = sigismember(&now, SIGUSR2);
	/* A bad pointer inside a SIGSEGV handler (SIGSEGV blocked): EFAULT. */
	struct sembuf *heap = malloc(sizeof *heap);
	errno = 0;
	int r = semop(S, (struct sembuf *)P.gone, 1);
	if (r != -1 || errno != EFAULT)
		ran += 1000;
	free(heap);
	if (si->si_code > 0)
		siglongjmp(jb, 1);
}

static void on_fault_mend(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	ran++;
	mprotect((void *)((uintptr_t)si->si_addr & ~4095ul), 4096, PROT_READ | PROT_WRITE);
}

static void report(const char *what)
{
	SAY("%s: ran %d, code %d, address %d, SIGSEGV masked %d, SIGUSR2 masked %d", what, (int)ran,
	    (int)code, (int)addr_ok, (int)masked_self, (int)masked_usr2);
	ran = code = addr_ok = masked_self = masked_usr2 = 0;
}

static void actions(void)
{
	struct sigaction a, o;
	memset(&o, 0, sizeof o);
	sigaction(SIGSEGV, NULL, &o);
	show_act("SIGSEGV at first", &o, on_fault);
	sigaction(SIGBUS, NULL, &o);
	show_act("SIGBUS at first", &o, on_fault);

	memset(&a, 0, sizeof a);
	a.sa_sigaction = on_fault;
	a.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, SIGUSR2);
	T(sigaction(SIGSEGV, &a, &o));
	show_act("old", &o, on_fault);
	sigaction(SIGSEGV, NULL, &o);
	show_act("now", &o, on_fault);

	/* A real fault: the handler with its mask, then siglongjmp. */
	expect = P.gone;
	if (!sigsetjmp(jb, 1))
		*(volatile char *)P.gone = 1;
	report("write to the unmapped page");
	expect = P.ro;
	if (!sigsetjmp(jb, 1))
		*(volatile char *)P.ro = 1;
	report("write to the read-only page");
	/* Sent: SI_USER, the handler returns. */
	expect = NULL;
	kill(getpid(), SIGSEGV);
	report("kill(SIGSEGV)");

	/* SA_NODEFER | SA_RESETHAND: the signal unmasked, then SIG_DFL. */
	a.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND;
	T(sigaction(SIGSEGV, &a, NULL));
	expect = P.gone;
	if (!sigsetjmp(jb, 1))
		*(volatile char *)P.gone = 1;
	report("SA_NODEFER | SA_RESETHAND");
	sigaction(SIGSEGV, NULL, &o);
	show_act("after the reset", &o, on_fault);

	/* The raw system call reads what sigaction set. */
	struct { void *h; unsigned long flags; void *restorer; uint64_t mask; } k, kold;
	memset(&k, 0, sizeof k);
	k.h = (void *)on_fault;
	k.flags = SA_SIGINFO | SA_RESTORER | 0x400;
	k.restorer = (void *)8;
	k.mask = (1ull << (SIGUSR2 - 1)) | (1ull << (SIGKILL - 1));
	T(syscall(SYS_rt_sigaction, SIGBUS, &k, &kold, 8));
	SAY("raw old SIGBUS: %s, flags %#lx", kold.h == SIG_DFL ? "SIG_DFL" : "other", kold.flags);
	T(syscall(SYS_rt_sigaction, SIGBUS, NULL, &kold, 8));
	SAY("raw SIGBUS: %s, flags %#lx, restorer %p, mask %#llx",
	    kold.h == (void *)on_fault ? "the handler" : "other", kold.flags, kold.restorer,
	    (unsigned long long)kold.mask);
	T(syscall(SYS_rt_sigaction, SIGBUS, NULL, (void *)P.ro, 8));
	T(syscall(SYS_rt_sigaction, SIGBUS, NULL, &kold, 4));
	a.sa_flags = SA_SIGINFO;
	T(sigaction(SIGBUS, &a, NULL));

	/* signal(): SA_RESTART and the signal in the mask; sysv_signal. */
	SAY("signal returns %s", signal(SIGSEGV, SIG_IGN) == SIG_DFL ? "SIG_DFL" : "other");
	sigaction(SIGSEGV, NULL, &o);
	show_act("after signal(SIG_IGN)", &o, on_fault);
	SAY("sysv_signal returns %s", sysv_signal(SIGSEGV, SIG_DFL) == SIG_IGN ? "SIG_IGN" : "other");
	sigaction(SIGSEGV, NULL, &o);
	show_act("after sysv_signal(SIG_DFL)", &o, on_fault);

	/* A handler that mends the page and returns: the access is made. */
	a.sa_sigaction = on_fault_mend;
	a.sa_flags = SA_SIGINFO;
	T(sigaction(SIGSEGV, &a, NULL));
	volatile char *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p[7] = 42;
	SAY("mended: ran %d, byte %d", (int)ran, p[7]);
	ran = 0;
	munmap((void *)p, 4096);
	signal(SIGSEGV, SIG_DFL);
}

/* SIGBUS: a file mapping past the end of its file. */
static void bus(void)
{
	char path[] = "/tmp/ipcns-faults-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	ftruncate(fd, 4096);
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	struct sembuf *past = (struct sembuf *)(m + 4096);
	T(semop(S, past, 1));
	struct sigaction a;
	memset(&a, 0, sizeof a);
	a.sa_sigaction = on_fault;
	a.sa_flags = SA_SIGINFO;
	T(sigaction(SIGBUS, &a, NULL));
	expect = m + 4096;
	if (!sigsetjmp(jb, 1))
		(void)*(volatile char *)(m + 4096);
	report("read past the file's end");
	signal(SIGBUS, SIG_DFL);
	munmap(m, 8192);
	close(fd);
}

static void child(const char *what, void (*act)(void))
{
	pid_t c = fork();
	if (c == 0) {
		act();
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
	if (WIFSIGNALED(st))
		SAY("%s: killed by %s", what, sigabbrev_np(WTERMSIG(st)));
	else
		SAY("%s: exit %d", what, WEXITSTATUS(st));
}

static void fault_dfl(void) { signal(SIGSEGV, SIG_DFL); *(volatile char *)P.gone = 1; }
static void fault_ign(void) { signal(SIGSEGV, SIG_IGN); *(volatile char *)P.gone = 1; }
static void sent_ign(void) { signal(SIGSEGV, SIG_IGN); kill(getpid(), SIGSEGV); }
static void sent_dfl(void) { kill(getpid(), SIGSEGV); }
static void bus_dfl(void) { signal(SIGBUS, SIG_DFL); raise(SIGBUS); }
static void exec_ign(void)
{
	signal(SIGSEGV, SIG_IGN);
	execl("/proc/self/exe", "faults", "--disposition", (char *)NULL);
	_exit(9);
}

int main(int argc, char **argv)
{
	start();
	if (argc > 1 && !strcmp(argv[1], "--disposition")) {
		struct sigaction o;
		sigaction(SIGSEGV, NULL, &o);
		_exit(o.sa_handler == SIG_IGN ? 3 : o.sa_handler == SIG_DFL ? 4 : 5);
	}
	P = pages();
	S = semget(IPC_PRIVATE, 1, 0600);
	Q = msgget(IPC_PRIVATE, 0600);
	SAY("objects %d", S >= 0 && Q >= 0);
	bad_semops("main thread");
	bad_messages();
	pthread_t t;
	pthread_create(&t, NULL, blocked_thread, NULL);
	pthread_join(t, NULL);
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	bad_semops("main thread, every signal blocked");
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	actions();
	bus();
	child("a fault, SIG_DFL", fault_dfl);
	child("a fault, SIG_IGN", fault_ign);
	child("kill(SIGSEGV), SIG_IGN", sent_ign);
	child("kill(SIGSEGV), SIG_DFL", sent_dfl);
	child("raise(SIGBUS), SIG_DFL", bus_dfl);
	child("exec with SIGSEGV ignored (3: still ignored)", exec_ign);
	bad_semops("at the end");
	T(semctl(S, 0, IPC_RMID));
	T(msgctl(Q, IPC_RMID, NULL));
	return 0;
}
