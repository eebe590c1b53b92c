/* drive ids->seq to its wrap point with msgget/IPC_RMID cycles (one object alive at a time) */
#include "common.h"
int main(void){
  int prevseq = 0, x;
  for (long i = 0;; i++) {
    x = msgget(IPC_PRIVATE, 0600);
    if (x < 0) { perror("msgget"); return 1; }
    int seq = x >> 15;
    if (seq != prevseq && (seq < 3 || seq > 65531 || seq == 0)) printf("i=%ld id=%d idx=%d seq=%d\n", i, x, x & 32767, seq);
    if (seq == 0 && prevseq != 0) { printf("seq wrapped from %d to 0 at i=%ld\n", prevseq, i); msgctl(x, IPC_RMID, 0); break; }
    prevseq = seq;
    msgctl(x, IPC_RMID, 0);
  }
  return 0;
}
