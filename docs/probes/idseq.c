/* id allocation: 70 semget(IPC_PRIVATE), remove all, allocate again; holes; cyclic window */
#include "common.h"
int ids[200];
int main(void){
  printf("70 x semget(IPC_PRIVATE):");
  for (int i=0;i<70;i++){ ids[i]=semget(IPC_PRIVATE,1,0600); printf(" %d",ids[i]); }
  printf("\nremove all 70\n");
  for (int i=0;i<70;i++) semctl(ids[i],0,IPC_RMID);
  printf("next 5:"); for (int i=0;i<5;i++){ ids[i]=semget(IPC_PRIVATE,1,0600); printf(" %d(idx %d seq %d)",ids[i],ids[i]&32767,ids[i]>>15);} printf("\n");
  printf("remove idx1,idx3, then 3 more:"); semctl(ids[1],0,IPC_RMID); semctl(ids[3],0,IPC_RMID);
  for (int i=0;i<3;i++){ int x=semget(IPC_PRIVATE,1,0600); printf(" %d(idx %d seq %d)",x,x&32767,x>>15);} printf("\n");
  /* single create/remove cycling: show where the index wraps with in_use small */
  printf("create+remove one object 70 times (in_use stays 4 -> window 64):");
  int last=-1, wraps=0;
  for (int i=0;i<70;i++){ int x=semget(IPC_PRIVATE,1,0600); if ((x&32767) < last) { printf(" [wrap at i=%d: %d idx %d seq %d]", i, x, x&32767, x>>15); wraps++; } last=x&32767; semctl(x,0,IPC_RMID); }
  printf("\n");
  /* STAT on unused index / stale id */
  struct semid_ds ds;
  SHOW(r_semctl(60,0,SEM_STAT,(unsigned long)&ds));
  SHOW(r_semctl(ids[0],0,IPC_STAT,(unsigned long)&ds));
  SHOW(r_semctl(ids[0] & 32767,0,IPC_STAT,(unsigned long)&ds));      /* right idx, wrong seq */
  SHOW(r_semctl((ids[0] & 32767),0,SEM_STAT,(unsigned long)&ds));   /* index -> full id */
  SHOW(r_semctl((ids[0] & 32767)+32768*7,0,SEM_STAT,(unsigned long)&ds)); /* SEM_STAT masks the index */
  SHOW(r_semctl(ids[0]+65536*32768L,0,IPC_STAT,(unsigned long)&ds));
  return 0;
}
