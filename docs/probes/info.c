/* IPC_INFO/SEM_INFO/MSG_INFO/SHM_INFO in a fresh ns, then after creating objects */
#include "common.h"
static void dump(const char *tag){
  struct seminfo si; struct msginfo mi; struct shminfo sh; struct shm_info shi; long r;
  printf("---- %s\n", tag);
  memset(&si,0xAA,sizeof si); r=r_semctl(0,0,IPC_INFO,(unsigned long)&si);
  printf("semctl(IPC_INFO)=%ld semmap=%d semmni=%d semmns=%d semmnu=%d semmsl=%d semopm=%d semume=%d semusz=%d semvmx=%d semaem=%d\n",r,si.semmap,si.semmni,si.semmns,si.semmnu,si.semmsl,si.semopm,si.semume,si.semusz,si.semvmx,si.semaem);
  memset(&si,0xAA,sizeof si); r=r_semctl(0,0,SEM_INFO,(unsigned long)&si);
  printf("semctl(SEM_INFO)=%ld semmap=%d semmni=%d semmns=%d semmnu=%d semmsl=%d semopm=%d semume=%d semusz=%d semvmx=%d semaem=%d\n",r,si.semmap,si.semmni,si.semmns,si.semmnu,si.semmsl,si.semopm,si.semume,si.semusz,si.semvmx,si.semaem);
  for (int c = IPC_INFO; c; c = (c==IPC_INFO?MSG_INFO:0)) {
    memset(&mi,0xAA,sizeof mi); r=r_msgctl(0,c,&mi);
    unsigned char *p=(unsigned char*)&mi;
    printf("msgctl(%s)=%ld msgpool=%d msgmap=%d msgmax=%d msgmnb=%d msgmni=%d msgssz=%d msgtql=%d msgseg=%u tailpad=%02x%02x\n",c==IPC_INFO?"IPC_INFO":"MSG_INFO",r,mi.msgpool,mi.msgmap,mi.msgmax,mi.msgmnb,mi.msgmni,mi.msgssz,mi.msgtql,mi.msgseg,p[30],p[31]);
  }
  memset(&sh,0xAA,sizeof sh); r=r_shmctl(0,IPC_INFO,&sh);
  unsigned long *u=(unsigned long*)&sh;
  printf("shmctl(IPC_INFO)=%ld shmmax=%lu shmmin=%lu shmmni=%lu shmseg=%lu shmall=%lu unused=%lx,%lx,%lx,%lx\n",r,sh.shmmax,sh.shmmin,sh.shmmni,sh.shmseg,sh.shmall,u[5],u[6],u[7],u[8]);
  memset(&shi,0xAA,sizeof shi); r=r_shmctl(0,SHM_INFO,&shi);
  unsigned char *q=(unsigned char*)&shi;
  printf("shmctl(SHM_INFO)=%ld used_ids=%d pad=%02x%02x%02x%02x shm_tot=%lu shm_rss=%lu shm_swp=%lu swap_attempts=%lu swap_successes=%lu\n",r,shi.used_ids,q[4],q[5],q[6],q[7],shi.shm_tot,shi.shm_rss,shi.shm_swp,shi.swap_attempts,shi.swap_successes);
}
int main(void){
  dump("fresh namespace");
  int s1=semget(IPC_PRIVATE,3,0600), s2=semget(0x1234,5,IPC_CREAT|0644);
  int m1=msgget(IPC_PRIVATE,0600), m2=msgget(0x2345,IPC_CREAT|0640);
  struct { long t; char b[200]; } msg = {1, {0}};
  msgsnd(m2,&msg,100,0); msgsnd(m2,&msg,0,0); msgsnd(m1,&msg,7,0);
  int h1=shmget(IPC_PRIVATE,5000,0600), h2=shmget(0x3456,100,IPC_CREAT|0666);
  char *a=shmat(h1,0,0); a[0]=1; a[4096]=1;   /* touch 2 pages */
  printf("ids: sem %d %d msg %d %d shm %d %d\n",s1,s2,m1,m2,h1,h2);
  dump("after 2 sem(3+5), 2 msg (3 msgs, 107 bytes), 2 shm (5000 touched 2 pages,100)");
  semctl(s1,0,IPC_RMID); /* remove idx 0 */
  dump("after removing sem idx0");
  semctl(s2,0,IPC_RMID);
  dump("after removing all sems");
  shmdt(a);
  return 0;
}
