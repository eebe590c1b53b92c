/* The exec family, for libipcns.so (crates/preload/src/ffi/exec.rs says
 * why, and exports each `__ipcns_c_NAME` here as `NAME`): each function asks the library to get the process ready for a new
 * program image (__ipcns_before_exec), calls the next definition (the C
 * library's), and if that returns (the exec failed) lets the process go on
 * (__ipcns_exec_failed), errno as the next definition left it.
 *
 * C because execl, execle and execlp are variadic, which a Rust function
 * cannot be; their arguments are gathered on the stack (as the C library
 * does) and passed to the array forms. No allocation anywhere: an exec may
 * come from a vfork child or after a fork in a threaded program. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

int __ipcns_c_execv(const char *, char *const[]);
int __ipcns_c_execvp(const char *, char *const[]);
int __ipcns_c_execve(const char *, char *const[], char *const[]);

int __ipcns_before_exec(void);
void __ipcns_exec_failed(int frozen);

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

/* The next definition of `name`, looked up once (a racing first lookup
 * stores the same address). */
static void *next(void **slot, const char *name) {
    void *p = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (!p) {
        p = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, p, __ATOMIC_RELAXED);
    }
    return p;
}

#define NEXT(type, name) ({ static void *slot_; (type) next(&slot_, name); })

extern char **environ;

/* __ipcns_before_exec's bit: the process has a record; the new image's
 * environment gets EXEC_MARK=PID first (ffi/exec.rs: EXEC_MARK). */
#define MARK 4
#define EXEC_MARK "IPCNS_EXEC_PID="
/* An environment longer than this is passed unmarked (the new image then
 * takes the record over at its first call, not before main): the copy is
 * on the stack. */
#define MARKED_MAX 1024

/* The room a marked copy of `envp` needs (its entries, the mark and the
 * NULL), or 0 when it is passed as it is. Also the `syscall` form's
 * (ffi/exec.rs). */
size_t __ipcns_c_room_for(int st, char *const envp[]) {
    if (!(st & MARK))
        return 0;
    /* Only for a new image that preloads a library (ours, as far as it
     * can be told): another would keep the mark in its environment. */
    size_t n = 0;
    int preload = 0;
    while (envp && envp[n]) {
        if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0)
            preload = 1;
        if (++n >= MARKED_MAX)
            return 0;
    }
    return preload ? n + 2 : 0;
}

/* `envp` with `mark` (EXEC_MARK and this pid, written into it) first, in
 * `out` (`room` entries), or `envp` itself when room is 0. */
char *const *__ipcns_c_marked(char *const envp[], char **out, size_t room, char *mark) {
    if (room == 0)
        return envp;
    char digits[16];
    int k = 0;
    for (unsigned p = (unsigned) getpid(); k == 0 || p; p /= 10)
        digits[k++] = (char) ('0' + p % 10);
    size_t m = sizeof EXEC_MARK - 1;
    memcpy(mark, EXEC_MARK, m);
    while (k)
        mark[m++] = digits[--k];
    mark[m] = 0;
    out[0] = mark;
    /* The entries (none when envp is NULL, which Linux takes as empty),
     * then the NULL. */
    for (size_t i = 1; i + 1 < room; i++)
        out[i] = envp[i - 1];
    out[room - 1] = NULL;
    return out;
}

/* Runs `call` between the library's two hooks, with `env` (declared
 * here) the environment `envp` marked if the process has a record; ENOSYS
 * if the C library has no next definition. */
#define AROUND(f, envp, env, call)                  \
    do {                                            \
        if (!(f)) {                                 \
            errno = ENOSYS;                         \
            return -1;                              \
        }                                           \
        int st_ = __ipcns_before_exec();            \
        size_t room_ = __ipcns_c_room_for(st_, (envp));       \
        char *copy_[room_ ? room_ : 1];             \
        char mark_[sizeof EXEC_MARK + 16];          \
        char *const *env = __ipcns_c_marked((envp), copy_, room_, mark_); \
        int r_ = (call);                            \
        int e_ = errno;                             \
        __ipcns_exec_failed(st_);                   \
        errno = e_;                                 \
        return r_;                                  \
    } while (0)

int __ipcns_c_execve(const char *path, char *const argv[], char *const envp[]) {
    execve_fn f = NEXT(execve_fn, "execve");
    AROUND(f, envp, env, f(path, argv, env));
}

/* execv and execvp are execve and execvpe with `environ`, called so that
 * the environment can be marked. */
int __ipcns_c_execv(const char *path, char *const argv[]) {
    execve_fn f = NEXT(execve_fn, "execve");
    AROUND(f, environ, env, f(path, argv, env));
}

int __ipcns_c_execvp(const char *file, char *const argv[]) {
    execve_fn f = NEXT(execve_fn, "execvpe");
    AROUND(f, environ, env, f(file, argv, env));
}

int __ipcns_c_execvpe(const char *file, char *const argv[], char *const envp[]) {
    execve_fn f = NEXT(execve_fn, "execvpe");
    AROUND(f, envp, env, f(file, argv, env));
}

int __ipcns_c_fexecve(int fd, char *const argv[], char *const envp[]) {
    fexecve_fn f = NEXT(fexecve_fn, "fexecve");
    AROUND(f, envp, env, f(fd, argv, env));
}

int __ipcns_c_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    execveat_fn f = NEXT(execveat_fn, "execveat");
    AROUND(f, envp, env, f(dirfd, path, argv, env, flags));
}

/* The number of arguments from `arg` to the terminating NULL (included),
 * counted on a copy of `ap`. */
static size_t count_args(const char *arg, va_list ap) {
    size_t n = 1;
    va_list c;
    va_copy(c, ap);
    for (const char *a = arg; a; a = va_arg(c, const char *))
        n++;
    va_end(c);
    return n;
}

#define GATHER(argv, arg, ap, n)                    \
    char *argv[n];                                  \
    argv[0] = (char *) (arg);                       \
    for (size_t i_ = 1; i_ < (n); i_++)             \
        argv[i_] = va_arg(ap, char *)

int __ipcns_c_execl(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(arg, ap);
    GATHER(argv, arg, ap, n);
    va_end(ap);
    return __ipcns_c_execv(path, argv);
}

int __ipcns_c_execlp(const char *file, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(arg, ap);
    GATHER(argv, arg, ap, n);
    va_end(ap);
    return __ipcns_c_execvp(file, argv);
}

int __ipcns_c_execle(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    size_t n = count_args(arg, ap);
    GATHER(argv, arg, ap, n);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return __ipcns_c_execve(path, argv, envp);
}
