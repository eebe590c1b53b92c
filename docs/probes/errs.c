/* errno ordering for get/ctl calls; unprivileged checks run in a child with uid/gid 1000 */
#include "common.h"
#include <sys/prctl.h>
static void drop(void){ setgroups(0,0); if (setresgid(1000,1000,1000)||setresuid(1000,1000,1000)) perror("drop"); }
int main(void){
  struct semid_ds sd; struct msqid_ds md; struct shmid_ds hd;
  printf("== semget\n");
  SHOW(semget(IPC_PRIVATE,-1,0600)); SHOW(semget(IPC_PRIVATE,32001,0600)); SHOW(semget(IPC_PRIVATE,0,0600));
  SHOW(semget(0x10,0,0600)); SHOW(semget(0x10,0,IPC_CREAT|0600));
  int s = semget(0x10,3,IPC_CREAT|IPC_EXCL|0xffff); printf("s=%d\n",s);
  r_semctl(s,0,IPC_STAT,(unsigned long)&sd); printf("mode after create with flags 0xffff|IPC_CREAT|IPC_EXCL: 0%o\n", sd.sem_perm.mode);
  SHOW(semget(0x10,4,IPC_CREAT|IPC_EXCL|0600)); SHOW(semget(0x10,4,0600)); SHOW(semget(0x10,0,0)); SHOW(semget(0x10,3,0));
  SHOW(semget(0x10,32001,0));
  int s0 = semget(0x11,2,IPC_CREAT|0000);   /* mode 0 */
  wsys("sem","32000 10 500 32000");
  SHOW(semget(IPC_PRIVATE,6,0600)); SHOW(semget(IPC_PRIVATE,5,0600)); SHOW(semget(0x10,1,0));
  wsys("sem","32000 1024000000 500 3");
  SHOW(semget(IPC_PRIVATE,1,0600)); SHOW(semget(0x10,1,IPC_CREAT));
  wsys("sem","32000 1024000000 500 32000");
  printf("== semctl (root)\n");
  SHOW(r_semctl(-1,0,IPC_INFO,0)); SHOW(r_semctl(999999,0,IPC_INFO,(unsigned long)&sd)); SHOW(r_semctl(s,0,99,0));
  SHOW(r_semctl(s,0,IPC_STAT|0x100,(unsigned long)&sd)); SHOW(semctl(s,0,IPC_STAT|0x100,&sd));
  SHOW(r_semctl(999999,0,SETVAL,40000)); SHOW(r_semctl(999999,0,SETVAL,-1)); SHOW(r_semctl(999999,7,SETVAL,1));
  SHOW(r_semctl(s,3,SETVAL,1)); SHOW(r_semctl(s,-1,GETVAL,0)); SHOW(r_semctl(s,3,GETNCNT,0)); SHOW(r_semctl(s,99,GETALL,0));
  SHOW(r_semctl(s,0,SETVAL,32767)); SHOW(r_semctl(s,0,SETVAL,32768)); SHOW(r_semctl(s,0,GETVAL,0)); SHOW(r_semctl(s,0,GETPID,0)); SHOW(r_semctl(s,1,GETPID,0));
  unsigned short arr[3] = {1,32768,3}; SHOW(r_semctl(s,0,SETALL,(unsigned long)arr));
  SHOW(r_semctl(s,0,SETALL,8)); /* EFAULT */
  SHOW(r_semctl(s,0,IPC_STAT,8)); SHOW(r_semctl(s,0,IPC_SET,8));
  r_semctl(s,0,IPC_STAT,(unsigned long)&sd); sd.sem_perm.uid = (uid_t)-1; SHOW(r_semctl(s,0,IPC_SET,(unsigned long)&sd));
  r_semctl(s,0,IPC_STAT,(unsigned long)&sd); sd.sem_perm.uid = 1000; sd.sem_perm.mode = 0xf1ff; SHOW(r_semctl(s,0,IPC_SET,(unsigned long)&sd));
  memset(&sd,0xAA,sizeof sd); r_semctl(s,0,IPC_STAT,(unsigned long)&sd);
  printf("after IPC_SET uid=1000 mode=0xf1ff: uid=%u gid=%u cuid=%u cgid=%u mode=0%o key=0x%x seq=%u pad2=%x res1=%lx res2=%lx nsems=%lu unused1=%lx unused3=%lx\n",
     sd.sem_perm.uid,sd.sem_perm.gid,sd.sem_perm.cuid,sd.sem_perm.cgid,sd.sem_perm.mode,sd.sem_perm.__key,sd.sem_perm.__seq,sd.sem_perm.__pad2,sd.sem_perm.__glibc_reserved1,sd.sem_perm.__glibc_reserved2,sd.sem_nsems,sd.__glibc_reserved3,sd.__glibc_reserved4);
  int x = semget(IPC_PRIVATE,1,0600); semctl(x,0,IPC_RMID); SHOW(r_semctl(x,0,IPC_RMID,0)); SHOW(r_semctl(x,0,GETVAL,0));
  printf("== msg\n");
  int q = msgget(0x20,IPC_CREAT|0644); int q0 = msgget(0x21, IPC_CREAT|0);
  SHOW(r_msgctl(q,-1,&md)); SHOW(r_msgctl(-1,IPC_INFO,&md)); SHOW(r_msgctl(q,99,&md)); SHOW(r_msgctl(q,IPC_STAT|0x100,&md)); SHOW(msgctl(q,IPC_STAT|0x100,&md));
  SHOW(r_msgctl(q,MSG_STAT,&md)); SHOW(r_msgctl(q & 32767,MSG_STAT,&md)); SHOW(r_msgctl(5,MSG_STAT_ANY,&md));
  r_msgctl(q,IPC_STAT,&md); md.msg_qbytes = 0x100000005UL; SHOW(r_msgctl(q,IPC_SET,&md)); r_msgctl(q,IPC_STAT,&md); printf("qbytes now %lu\n", md.msg_qbytes);
  md.msg_qbytes = 1000000; SHOW(r_msgctl(q,IPC_SET,&md)); r_msgctl(q,IPC_STAT,&md); printf("qbytes now %lu\n", md.msg_qbytes);
  wsys("msgmni","2"); SHOW(msgget(IPC_PRIVATE,0600)); SHOW(msgget(0x20,IPC_CREAT)); wsys("msgmni","32000");
  printf("== shm\n");
  SHOW(shmget(IPC_PRIVATE,0,0600)); wsys("shmmax","4096"); SHOW(shmget(IPC_PRIVATE,4097,0600)); SHOW(shmget(IPC_PRIVATE,4096,0600)); wsys("shmmax","18446744073692774399");
  SHOW(shmget(IPC_PRIVATE,(size_t)-1,0600)); SHOW(shmget(IPC_PRIVATE,(size_t)-4096*4096L,0600));
  wsys("shmmax","18446744073709551615"); SHOW(shmget(IPC_PRIVATE,(size_t)-1,0600)); SHOW(shmget(IPC_PRIVATE,(size_t)-4095,0600)); SHOW(shmget(IPC_PRIVATE,(size_t)-4096,0600)); wsys("shmmax","18446744073692774399");
  wsys("shmall","3"); SHOW(shmget(IPC_PRIVATE,8193,0600)); SHOW(shmget(IPC_PRIVATE,8192,0600)); wsys("shmall","18446744073692774399");
  int h = shmget(0x30,5000,IPC_CREAT|0640); printf("h=%d\n",h);
  SHOW(shmget(0x30,5001,0)); SHOW(shmget(0x30,0,0)); SHOW(shmget(0x30,8192,IPC_CREAT|IPC_EXCL)); SHOW(shmget(0x30,99999,IPC_CREAT|IPC_EXCL));
  SHOW(shmget(0x31,1,SHM_HUGETLB|IPC_CREAT|0600)); SHOW(shmget(0x32,1,SHM_NORESERVE|IPC_CREAT|0600));
  r_shmctl(h,IPC_STAT,&hd); printf("segsz=%zu cpid==getpid:%d lpid=%d nattch=%lu atime=%ld dtime=%ld ctime>0:%d\n",hd.shm_segsz,hd.shm_cpid==getpid(),hd.shm_lpid,hd.shm_nattch,hd.shm_atime,hd.shm_dtime,hd.shm_ctime>0);
  void *p = shmat(h,0,0);
  SHOW(r_shmctl(h,SHM_LOCK,0)); r_shmctl(h,IPC_STAT,&hd); printf("mode after SHM_LOCK 0%o\n",hd.shm_perm.mode);
  SHOW(r_shmctl(h,IPC_RMID,0)); r_shmctl(h,IPC_STAT,&hd); printf("after RMID w/ nattch=1: key=%d mode=0%o nattch=%lu\n",hd.shm_perm.__key,hd.shm_perm.mode,hd.shm_perm.mode?hd.shm_nattch:0);
  SHOW(shmget(0x30,0,0)); SHOW(r_shmctl(h,IPC_RMID,0)); SHOW(r_shmctl(h,SHM_UNLOCK,0)); r_shmctl(h,IPC_STAT,&hd); printf("mode 0%o\n",hd.shm_perm.mode);
  hd.shm_perm.mode = 0777; SHOW(r_shmctl(h,IPC_SET,&hd)); r_shmctl(h,IPC_STAT,&hd); printf("mode after IPC_SET 0777: 0%o\n",hd.shm_perm.mode);
  shmdt(p); SHOW(r_shmctl(h,IPC_STAT,&hd));
  SHOW(r_shmctl(h,99,&hd)); SHOW(r_shmctl(h,-1,&hd)); SHOW(shmctl(h,99,&hd));
  int h2 = shmget(0x33,100,IPC_CREAT|0600), hm = shmget(0x34,100,IPC_CREAT|0);
  printf("== unprivileged child (uid/gid 1000, no caps)\n"); fflush(stdout);
  if (fork()==0) { drop();
    SHOW(semget(0x11,1,0)); SHOW(semget(0x11,1,0400)); SHOW(semget(0x11,99,0400)); SHOW(semget(0x11,1,IPC_CREAT|IPC_EXCL|0400));
    SHOW(r_semctl(s0,5,GETVAL,0)); SHOW(r_semctl(s0,5,SETVAL,1)); SHOW(r_semctl(s0,0,SETVAL,40000)); SHOW(r_semctl(s0,0,IPC_STAT,(unsigned long)&sd));
    SHOW(r_semctl(s0 & 32767,0,SEM_STAT,(unsigned long)&sd)); SHOW(r_semctl(s0 & 32767,0,SEM_STAT_ANY,(unsigned long)&sd));
    SHOW(r_semctl(s0,0,IPC_RMID,0)); SHOW(r_semctl(s0,0,IPC_SET,(unsigned long)&sd)); SHOW(r_semctl(s0,0,IPC_SET,8));
    SHOW(r_semctl(s,0,GETVAL,0)); /* uid was set to 1000 -> owner */
    r_semctl(s,0,IPC_STAT,(unsigned long)&sd); sd.sem_perm.mode=0600; SHOW(r_semctl(s,0,IPC_SET,(unsigned long)&sd)); SHOW(r_semctl(s,0,GETVAL,0));
    r_msgctl(q0,MSG_STAT_ANY,&md); SHOW(r_msgctl(q0,IPC_RMID,0)); SHOW(r_msgctl(q0,IPC_STAT,&md));
    SHOW(r_shmctl(h2,SHM_LOCK,0)); SHOW(r_shmctl(hm,IPC_STAT,&hd)); SHOW(r_shmctl(hm & 32767,SHM_STAT_ANY,&hd));
    SHOW(shmat(hm,0,0)); SHOW(r_shmctl(999999,SHM_LOCK,0));
    fflush(stdout); _exit(0); }
  wait(0);
  /* qbytes rules need an owner without CAP_SYS_RESOURCE */
  int q2 = msgget(IPC_PRIVATE,0600); r_msgctl(q2,IPC_STAT,&md); md.msg_perm.uid = 1000; r_msgctl(q2,IPC_SET,&md);
  struct rlimit rl = {0,0}; int h3 = shmget(IPC_PRIVATE,100,0600); r_shmctl(h3,IPC_STAT,&hd); hd.shm_perm.uid=1000; r_shmctl(h3,IPC_SET,&hd);
  if (fork()==0) { setrlimit(RLIMIT_MEMLOCK,&rl); drop();
    r_msgctl(q2,IPC_STAT,&md);
    md.msg_qbytes = 16384; SHOW(r_msgctl(q2,IPC_SET,&md));
    md.msg_qbytes = 16385; SHOW(r_msgctl(q2,IPC_SET,&md));
    md.msg_qbytes = 0x80000000UL; SHOW(r_msgctl(q2,IPC_SET,&md)); r_msgctl(q2,IPC_STAT,&md); printf("qbytes now %lu\n", md.msg_qbytes);
    md.msg_qbytes = 0x100000000UL; SHOW(r_msgctl(q2,IPC_SET,&md)); r_msgctl(q2,IPC_STAT,&md); printf("qbytes now %lu\n", md.msg_qbytes);
    SHOW(r_shmctl(h3,SHM_LOCK,0)); SHOW(r_shmctl(h3,SHM_UNLOCK,0));
    fflush(stdout); _exit(0); }
  wait(0);
  return 0;
}
