/* msgctl(IPC_SET) msg_qbytes truncation as root */
#include "common.h"
int main(void){
  int q = msgget(IPC_PRIVATE,0600); struct msqid_ds md;
  unsigned long v[] = {0x80000000UL, 0xffffffffUL, 0x100000000UL, 0x1ffffffffUL, 16385, 0};
  for (int i = 0; i < 6; i++) { msgctl(q,IPC_STAT,&md); md.msg_qbytes = v[i];
    long r = r_msgctl(q,IPC_SET,&md); msgctl(q,IPC_STAT,&md);
    printf("set qbytes=0x%lx -> ret %ld, IPC_STAT qbytes=%lu (0x%lx)\n", v[i], r, md.msg_qbytes, md.msg_qbytes); }
  return 0; }
