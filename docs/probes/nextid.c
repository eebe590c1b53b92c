/* *_next_id semantics */
#include "common.h"
int main(void){
  int a = semget(IPC_PRIVATE,1,0600), b = semget(IPC_PRIVATE,1,0600);
  printf("a=%d b=%d\n", a, b);
  wsys("sem_next_id","98311"); rsys("sem_next_id");            /* seq 3, idx 7 */
  SHOW(semget(IPC_PRIVATE,1,0600)); rsys("sem_next_id");
  SHOW(semget(IPC_PRIVATE,1,0600));                              /* cyclic continues from idr_next */
  wsys("sem_next_id","1"); SHOW(semget(IPC_PRIVATE,0,0600)); rsys("sem_next_id");  /* nsems=0 EINVAL: not consumed */
  SHOW(semget(IPC_PRIVATE,-1,0600)); rsys("sem_next_id");
  SHOW(semget(0x77,1,0600)); rsys("sem_next_id");                     /* ENOENT: not consumed */
  SHOW(semget(IPC_PRIVATE,1,0600)); rsys("sem_next_id");          /* idx 1 taken by b -> next free above */
  wsys("sem_next_id","32770"); wsys("sem","32000 1024000000 500 4"); /* in_use=5 >= semmni 4 */
  SHOW(semget(IPC_PRIVATE,1,0600)); rsys("sem_next_id");          /* ENOSPC in ipc_addid before idr alloc */
  wsys("sem","32000 1024000000 500 32000");
  SHOW(semget(IPC_PRIVATE,1,0600)); rsys("sem_next_id");
  wsys("sem_next_id","0"); SHOW(semget(IPC_PRIVATE,1,0600)); rsys("sem_next_id"); /* idx0 occupied by a */
  /* key lookup with next_id set: existing key returns existing id, next_id stays */
  int k = semget(0x4242,1,IPC_CREAT|0600); printf("k=%d\n",k);
  wsys("sem_next_id","5000"); SHOW(semget(0x4242,1,IPC_CREAT|0600)); rsys("sem_next_id");
  SHOW(semget(0x4243,1,IPC_CREAT|0600)); rsys("sem_next_id");
  /* msg / shm */
  wsys("msg_next_id","1234567"); SHOW(msgget(IPC_PRIVATE,0600)); rsys("msg_next_id");
  wsys("shm_next_id","65537"); SHOW(shmget(IPC_PRIVATE,0,0600)); rsys("shm_next_id"); SHOW(shmget(IPC_PRIVATE,10,0600)); rsys("shm_next_id");
  return 0;
}
