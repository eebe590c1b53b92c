/*
 * A preload that stands for fakeroot and its kind: it defines the libc
 * functions such preloads interpose (files, directories, stat, ids,
 * credentials, `syscall`, and the plain I/O and process calls beside
 * them), records each call made while its gate is open, and forwards
 * every call to the real function (dlsym RTLD_NEXT).
 *
 * The gate: the program resolves ipcns_probe_begin and ipcns_probe_end
 * with dlsym and calls them around the work it wants watched; end returns
 * how many calls were recorded and writes their names, comma-separated.
 * Calls from every thread count while the gate is open.
 *
 * No header declares the interposed functions here (their prototypes
 * differ between glibc versions): every pointer is a void *, and variadic
 * ones read their optional argument only when the call takes one.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>

#define MAX_NAMES 512

static int gate;
static int count;
static const char *names[MAX_NAMES];

static void note(const char *name)
{
	if (!__atomic_load_n(&gate, __ATOMIC_SEQ_CST))
		return;
	int i = __atomic_fetch_add(&count, 1, __ATOMIC_SEQ_CST);
	if (i < MAX_NAMES)
		names[i] = name;
}

void ipcns_probe_begin(void)
{
	__atomic_store_n(&count, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&gate, 1, __ATOMIC_SEQ_CST);
}

long ipcns_probe_end(char *out, size_t len)
{
	__atomic_store_n(&gate, 0, __ATOMIC_SEQ_CST);
	int n = __atomic_load_n(&count, __ATOMIC_SEQ_CST);
	size_t at = 0;
	for (int i = 0; i < n && i < MAX_NAMES; i++) {
		for (const char *p = names[i]; *p && at + 2 < len; p++)
			out[at++] = *p;
		if (at + 2 < len && i + 1 < n)
			out[at++] = ',';
	}
	if (len)
		out[at] = 0;
	return n;
}

#define REAL(ret, name, params)                                          \
	static ret(*real) params;                                        \
	if (!real)                                                       \
		real = (ret(*) params)dlsym(RTLD_NEXT, #name);           \
	if (!real) {                                                     \
		errno = ENOSYS;                                          \
		return (ret)-1;                                          \
	}

/* A function of fixed arguments: record, then forward. */
#define WRAP(ret, name, params, args)                                    \
	ret name params                                                  \
	{                                                                \
		note(#name);                                             \
		REAL(ret, name, params)                                  \
		return real args;                                        \
	}

/* open-like: (path or dirfd, path), flags, and a mode only with O_CREAT
 * or O_TMPFILE. */
#define CREATES(flags) (((flags) & 0100) || ((flags) & 020000000))

#define WRAP_OPEN(name)                                                  \
	int name(const char *path, int flags, ...)                       \
	{                                                                \
		note(#name);                                             \
		unsigned mode = 0;                                       \
		if (CREATES(flags)) {                                    \
			va_list ap;                                      \
			va_start(ap, flags);                             \
			mode = va_arg(ap, unsigned);                     \
			va_end(ap);                                      \
		}                                                        \
		REAL(int, name, (const char *, int, ...))                \
		return real(path, flags, mode);                          \
	}

#define WRAP_OPENAT(name)                                                \
	int name(int dirfd, const char *path, int flags, ...)            \
	{                                                                \
		note(#name);                                             \
		unsigned mode = 0;                                       \
		if (CREATES(flags)) {                                    \
			va_list ap;                                      \
			va_start(ap, flags);                             \
			mode = va_arg(ap, unsigned);                     \
			va_end(ap);                                      \
		}                                                        \
		REAL(int, name, (int, const char *, int, ...))           \
		return real(dirfd, path, flags, mode);                   \
	}

WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)
WRAP(int, __open_2, (const char *p, int f), (p, f))
WRAP(int, __open64_2, (const char *p, int f), (p, f))
WRAP(int, __openat_2, (int d, const char *p, int f), (d, p, f))
WRAP(int, __openat64_2, (int d, const char *p, int f), (d, p, f))
WRAP(int, creat, (const char *p, unsigned m), (p, m))
WRAP(int, creat64, (const char *p, unsigned m), (p, m))
WRAP(void *, fopen, (const char *p, const char *m), (p, m))
WRAP(void *, fopen64, (const char *p, const char *m), (p, m))

WRAP(int, stat, (const char *p, void *b), (p, b))
WRAP(int, stat64, (const char *p, void *b), (p, b))
WRAP(int, lstat, (const char *p, void *b), (p, b))
WRAP(int, lstat64, (const char *p, void *b), (p, b))
WRAP(int, fstat, (int fd, void *b), (fd, b))
WRAP(int, fstat64, (int fd, void *b), (fd, b))
WRAP(int, fstatat, (int d, const char *p, void *b, int f), (d, p, b, f))
WRAP(int, fstatat64, (int d, const char *p, void *b, int f), (d, p, b, f))
WRAP(int, newfstatat, (int d, const char *p, void *b, int f), (d, p, b, f))
WRAP(int, statx, (int d, const char *p, int f, unsigned m, void *b), (d, p, f, m, b))
WRAP(int, __xstat, (int v, const char *p, void *b), (v, p, b))
WRAP(int, __xstat64, (int v, const char *p, void *b), (v, p, b))
WRAP(int, __lxstat, (int v, const char *p, void *b), (v, p, b))
WRAP(int, __lxstat64, (int v, const char *p, void *b), (v, p, b))
WRAP(int, __fxstat, (int v, int fd, void *b), (v, fd, b))
WRAP(int, __fxstat64, (int v, int fd, void *b), (v, fd, b))
WRAP(int, __fxstatat, (int v, int d, const char *p, void *b, int f), (v, d, p, b, f))
WRAP(int, __fxstatat64, (int v, int d, const char *p, void *b, int f), (v, d, p, b, f))
WRAP(int, access, (const char *p, int m), (p, m))
WRAP(int, faccessat, (int d, const char *p, int m, int f), (d, p, m, f))

WRAP(int, mkdir, (const char *p, unsigned m), (p, m))
WRAP(int, mkdirat, (int d, const char *p, unsigned m), (d, p, m))
WRAP(int, rmdir, (const char *p), (p))
WRAP(int, chmod, (const char *p, unsigned m), (p, m))
WRAP(int, fchmod, (int fd, unsigned m), (fd, m))
WRAP(int, fchmodat, (int d, const char *p, unsigned m, int f), (d, p, m, f))
WRAP(int, chown, (const char *p, unsigned u, unsigned g), (p, u, g))
WRAP(int, lchown, (const char *p, unsigned u, unsigned g), (p, u, g))
WRAP(int, fchown, (int fd, unsigned u, unsigned g), (fd, u, g))
WRAP(int, fchownat, (int d, const char *p, unsigned u, unsigned g, int f), (d, p, u, g, f))
WRAP(int, unlink, (const char *p), (p))
WRAP(int, unlinkat, (int d, const char *p, int f), (d, p, f))
WRAP(int, link, (const char *a, const char *b), (a, b))
WRAP(int, linkat, (int d1, const char *a, int d2, const char *b, int f), (d1, a, d2, b, f))
WRAP(int, rename, (const char *a, const char *b), (a, b))
WRAP(int, renameat, (int d1, const char *a, int d2, const char *b), (d1, a, d2, b))
WRAP(int, renameat2, (int d1, const char *a, int d2, const char *b, unsigned f), (d1, a, d2, b, f))
WRAP(long, readlink, (const char *p, char *b, size_t n), (p, b, n))
WRAP(long, readlinkat, (int d, const char *p, char *b, size_t n), (d, p, b, n))
WRAP(void *, opendir, (const char *p), (p))
WRAP(void *, fdopendir, (int fd), (fd))
WRAP(void *, readdir, (void *d), (d))
WRAP(void *, readdir64, (void *d), (d))
WRAP(long, getdents64, (int fd, void *b, size_t n), (fd, b, n))

WRAP(int, ftruncate, (int fd, long l), (fd, l))
WRAP(int, ftruncate64, (int fd, long l), (fd, l))
WRAP(int, truncate, (const char *p, long l), (p, l))
WRAP(int, fallocate, (int fd, int m, long o, long l), (fd, m, o, l))
WRAP(int, fallocate64, (int fd, int m, long o, long l), (fd, m, o, l))
WRAP(int, posix_fallocate, (int fd, long o, long l), (fd, o, l))
WRAP(int, posix_fallocate64, (int fd, long o, long l), (fd, o, l))
WRAP(int, close, (int fd), (fd))
WRAP(long, read, (int fd, void *b, size_t n), (fd, b, n))
WRAP(long, pread, (int fd, void *b, size_t n, long o), (fd, b, n, o))
WRAP(long, pread64, (int fd, void *b, size_t n, long o), (fd, b, n, o))
WRAP(long, write, (int fd, const void *b, size_t n), (fd, b, n))
WRAP(void *, mmap, (void *a, size_t n, int p, int f, int fd, long o), (a, n, p, f, fd, o))
WRAP(void *, mmap64, (void *a, size_t n, int p, int f, int fd, long o), (a, n, p, f, fd, o))
WRAP(int, munmap, (void *a, size_t n), (a, n))

WRAP(unsigned, getuid, (void), ())
WRAP(unsigned, geteuid, (void), ())
WRAP(unsigned, getgid, (void), ())
WRAP(unsigned, getegid, (void), ())
WRAP(int, getgroups, (int n, unsigned *l), (n, l))
WRAP(int, getresuid, (unsigned *r, unsigned *e, unsigned *s), (r, e, s))
WRAP(int, getresgid, (unsigned *r, unsigned *e, unsigned *s), (r, e, s))
WRAP(int, capget, (void *h, void *d), (h, d))
WRAP(int, getrlimit, (int r, void *l), (r, l))
WRAP(int, getrlimit64, (int r, void *l), (r, l))
WRAP(int, prlimit, (int p, int r, const void *n, void *o), (p, r, n, o))
WRAP(int, prlimit64, (int p, int r, const void *n, void *o), (p, r, n, o))
WRAP(int, getpid, (void), ())
WRAP(int, getppid, (void), ())
WRAP(int, gettid, (void), ())
WRAP(int, kill, (int p, int s), (p, s))
WRAP(int, tgkill, (int g, int t, int s), (g, t, s))
WRAP(long, getrandom, (void *b, size_t n, unsigned f), (b, n, f))
WRAP(int, sched_yield, (void), ())

long syscall(long nr, ...)
{
	note("syscall");
	va_list ap;
	va_start(ap, nr);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	REAL(long, syscall, (long, ...))
	return real(nr, a, b, c, d, e, f);
}
