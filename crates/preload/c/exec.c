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
#include <unistd.h>

int __ipcns_c_execv(const char *, char *const[]);
int __ipcns_c_execvp(const char *, char *const[]);
int __ipcns_c_execve(const char *, char *const[], char *const[]);

int __ipcns_before_exec(void);
void __ipcns_exec_failed(int frozen);

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
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

/* Runs `call` between the library's two hooks; ENOSYS if the C library has
 * no next definition. */
#define AROUND(f, call)                             \
    do {                                            \
        if (!(f)) {                                 \
            errno = ENOSYS;                         \
            return -1;                              \
        }                                           \
        int frozen_ = __ipcns_before_exec();        \
        int r_ = (call);                            \
        int e_ = errno;                             \
        __ipcns_exec_failed(frozen_);               \
        errno = e_;                                 \
        return r_;                                  \
    } while (0)

int __ipcns_c_execve(const char *path, char *const argv[], char *const envp[]) {
    execve_fn f = NEXT(execve_fn, "execve");
    AROUND(f, f(path, argv, envp));
}

int __ipcns_c_execv(const char *path, char *const argv[]) {
    execv_fn f = NEXT(execv_fn, "execv");
    AROUND(f, f(path, argv));
}

int __ipcns_c_execvp(const char *file, char *const argv[]) {
    execv_fn f = NEXT(execv_fn, "execvp");
    AROUND(f, f(file, argv));
}

int __ipcns_c_execvpe(const char *file, char *const argv[], char *const envp[]) {
    execve_fn f = NEXT(execve_fn, "execvpe");
    AROUND(f, f(file, argv, envp));
}

int __ipcns_c_fexecve(int fd, char *const argv[], char *const envp[]) {
    fexecve_fn f = NEXT(fexecve_fn, "fexecve");
    AROUND(f, f(fd, argv, envp));
}

int __ipcns_c_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    execveat_fn f = NEXT(execveat_fn, "execveat");
    AROUND(f, f(dirfd, path, argv, envp, flags));
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
