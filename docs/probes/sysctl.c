/* defaults of the ipc sysctls in a fresh ns and effect of out-of-range writes */
#include "common.h"
#include <fcntl.h>
static const char *names[] = {"sem","msgmni","msgmax","msgmnb","shmmni","shmmax","shmall","shm_rmid_forced","sem_next_id","msg_next_id","shm_next_id","auto_msgmni",0};
static void tryw(const char *n, const char *v){
  char p[256], b[256]; snprintf(p, sizeof p, "/proc/sys/kernel/%s", n);
  int fd = open(p, O_WRONLY); if (fd < 0) { printf("open %s: %s\n", p, strerrorname_np(errno)); return; }
  errno = 0; ssize_t r = write(fd, v, strlen(v)); int e = errno; close(fd);
  fd = open(p, O_RDONLY); ssize_t k = read(fd, b, sizeof b - 1); close(fd); b[k > 0 ? k : 0] = 0; if (k > 0 && b[k-1]=='\n') b[k-1]=0;
  printf("write %-16s <- %-28s : ret=%zd %-7s now \"%s\"\n", n, v, r, r < 0 ? strerrorname_np(e) : "", b);
}
int main(void){
  printf("== defaults in fresh ipc namespace\n");
  for (int i = 0; names[i]; i++) rsys(names[i]);
  printf("== writes\n");
  tryw("msgmni","32768"); tryw("msgmni","32769"); tryw("msgmni","-1"); tryw("msgmni","0"); tryw("msgmni","32000");
  tryw("msgmax","-1"); tryw("msgmax","2147483647"); tryw("msgmax","2147483648"); tryw("msgmax","0"); tryw("msgmax","8192");
  tryw("msgmnb","-5"); tryw("msgmnb","0"); tryw("msgmnb","16384");
  tryw("shmmni","32768"); tryw("shmmni","32769"); tryw("shmmni","-1"); tryw("shmmni","4096");
  tryw("shmmax","-1"); tryw("shmmax","0"); tryw("shmmax","18446744073709551615"); tryw("shmmax","18446744073709551616"); tryw("shmmax","18446744073692774399");
  tryw("shmall","-7"); tryw("shmall","0"); tryw("shmall","18446744073692774399");
  tryw("shm_rmid_forced","2"); tryw("shm_rmid_forced","-1"); tryw("shm_rmid_forced","1"); tryw("shm_rmid_forced","0");
  tryw("auto_msgmni","1"); tryw("auto_msgmni","2");
  tryw("sem","250 32000 32 128"); tryw("sem","1 2"); tryw("sem","-1 -2 -3 -4"); tryw("sem","5 6 7 32769"); tryw("sem","9 9 9 32768");
  tryw("sem","1 2 3 4 5"); tryw("sem","32000 1024000000 500 32000");
  tryw("sem_next_id","-1"); tryw("sem_next_id","-2"); tryw("sem_next_id","0"); tryw("sem_next_id","2147483647"); tryw("sem_next_id","2147483648");
  tryw("msg_next_id","100"); tryw("shm_next_id","32769");
  tryw("msgmni","abc"); tryw("msgmni","12 13"); tryw("msgmni","  77  ");
  return 0;
}
