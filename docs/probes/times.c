/* which operations update which time fields; leaves objects behind for /proc/sysvipc */
#include "common.h"
static time_t t0;
#define T(x) ((x) ? (long)((x) - t0) : -1L)   /* seconds since start, -1 = zero */
static void st(const char *tag, int s, int q, int h){
  struct semid_ds sd; struct msqid_ds md; struct shmid_ds hd;
  semctl(s,0,IPC_STAT,&sd); msgctl(q,IPC_STAT,&md); shmctl(h,IPC_STAT,&hd);
  printf("%-26s sem o=%2ld c=%2ld | msg s=%2ld r=%2ld c=%2ld lspid=%d lrpid=%d | shm a=%2ld d=%2ld c=%2ld cpid=%d lpid=%d nattch=%lu\n", tag,
    T(sd.sem_otime),T(sd.sem_ctime),T(md.msg_stime),T(md.msg_rtime),T(md.msg_ctime),md.msg_lspid>0,md.msg_lrpid>0,
    T(hd.shm_atime),T(hd.shm_dtime),T(hd.shm_ctime),hd.shm_cpid>0,hd.shm_lpid>0,hd.shm_nattch);
}
int main(void){
  t0 = time(0); while (time(0) == t0) ; t0 = time(0);   /* align to a second boundary */
  int s = semget(0x1111,2,IPC_CREAT|0640), q = msgget(0x2222,IPC_CREAT|0600), h = shmget(0x3333,10000,IPC_CREAT|0666);
  int s2 = semget(IPC_PRIVATE,1,0600);
  st("create (t=0)", s,q,h); sleep(1);
  struct sembuf op = {1, 1, 0}; semop(s,&op,1); st("semop +1 on sem1 (t=1)",s,q,h); sleep(1);
  struct sembuf z = {0, 0, IPC_NOWAIT}; semop(s,&z,1); st("semop wait-zero (t=2)",s,q,h); sleep(1);
  semctl(s,0,SETVAL,5); st("SETVAL (t=3)",s,q,h); sleep(1);
  unsigned short a[2]={1,2}; semctl(s,0,SETALL,a); semctl(s,0,GETALL,a); st("SETALL+GETALL (t=4)",s,q,h); sleep(1);
  struct sembuf f = {0, -10, IPC_NOWAIT}; semop(s,&f,1); st("failed semop EAGAIN (t=5)",s,q,h); sleep(1);
  struct { long t; char b[64]; } m = {3, "hello"}; msgsnd(q,&m,10,0); st("msgsnd (t=6)",s,q,h); sleep(1);
  msgrcv(q,&m,64,0,0); st("msgrcv (t=7)",s,q,h); sleep(1);
  struct msqid_ds md; msgctl(q,IPC_STAT,&md); msgctl(q,IPC_SET,&md); st("msg IPC_SET (t=8)",s,q,h); sleep(1);
  char *p = shmat(h,0,0); st("shmat (t=9)",s,q,h); sleep(1);
  shmdt(p); st("shmdt (t=10)",s,q,h); sleep(1);
  shmctl(h,SHM_LOCK,0); shmctl(h,SHM_UNLOCK,0); st("SHM_LOCK/UNLOCK (t=11)",s,q,h); sleep(1);
  struct shmid_ds hd; shmctl(h,IPC_STAT,&hd); shmctl(h,IPC_SET,&hd); struct semid_ds sd; semctl(s,0,IPC_STAT,&sd); semctl(s,0,IPC_SET,&sd);
  st("shm+sem IPC_SET (t=12)",s,q,h);
  p = shmat(h,0,0); p[0]=1; msgsnd(q,&m,10,0); msgsnd(q,&m,5,0);   /* state for /proc */
  printf("ids: sem %d %d msg %d shm %d\n", s, s2, q, h);
  return 0;
}
