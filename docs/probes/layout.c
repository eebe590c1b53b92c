/* offsets/sizes of the kernel uapi structs on x86-64 (kernel headers) */
#include <stdio.h>
#include <stddef.h>
#include <linux/ipc.h>
#include <linux/sem.h>
#include <linux/msg.h>
#include <linux/shm.h>
#define O(T,f) printf("  %-22s off %3zu size %zu\n", #f, offsetof(struct T, f), sizeof(((struct T*)0)->f))
#define S(T) printf("struct %s: sizeof %zu\n", #T, sizeof(struct T))
int main(void){
 S(ipc64_perm); O(ipc64_perm,key);O(ipc64_perm,uid);O(ipc64_perm,gid);O(ipc64_perm,cuid);O(ipc64_perm,cgid);O(ipc64_perm,mode);O(ipc64_perm,__pad1);O(ipc64_perm,seq);O(ipc64_perm,__pad2);O(ipc64_perm,__unused1);O(ipc64_perm,__unused2);
 S(semid64_ds); O(semid64_ds,sem_perm);O(semid64_ds,sem_otime);O(semid64_ds,__unused1);O(semid64_ds,sem_ctime);O(semid64_ds,__unused2);O(semid64_ds,sem_nsems);O(semid64_ds,__unused3);O(semid64_ds,__unused4);
 S(msqid64_ds); O(msqid64_ds,msg_perm);O(msqid64_ds,msg_stime);O(msqid64_ds,msg_rtime);O(msqid64_ds,msg_ctime);O(msqid64_ds,msg_cbytes);O(msqid64_ds,msg_qnum);O(msqid64_ds,msg_qbytes);O(msqid64_ds,msg_lspid);O(msqid64_ds,msg_lrpid);O(msqid64_ds,__unused4);O(msqid64_ds,__unused5);
 S(shmid64_ds); O(shmid64_ds,shm_perm);O(shmid64_ds,shm_segsz);O(shmid64_ds,shm_atime);O(shmid64_ds,shm_dtime);O(shmid64_ds,shm_ctime);O(shmid64_ds,shm_cpid);O(shmid64_ds,shm_lpid);O(shmid64_ds,shm_nattch);O(shmid64_ds,__unused4);O(shmid64_ds,__unused5);
 S(seminfo); O(seminfo,semmap);O(seminfo,semmni);O(seminfo,semmns);O(seminfo,semmnu);O(seminfo,semmsl);O(seminfo,semopm);O(seminfo,semume);O(seminfo,semusz);O(seminfo,semvmx);O(seminfo,semaem);
 S(msginfo); O(msginfo,msgpool);O(msginfo,msgmap);O(msginfo,msgmax);O(msginfo,msgmnb);O(msginfo,msgmni);O(msginfo,msgssz);O(msginfo,msgtql);O(msginfo,msgseg);
 S(shminfo64); O(shminfo64,shmmax);O(shminfo64,shmmin);O(shminfo64,shmmni);O(shminfo64,shmseg);O(shminfo64,shmall);O(shminfo64,__unused1);O(shminfo64,__unused4);
 S(shm_info); O(shm_info,used_ids);O(shm_info,shm_tot);O(shm_info,shm_rss);O(shm_info,shm_swp);O(shm_info,swap_attempts);O(shm_info,swap_successes);
 S(sembuf); O(sembuf,sem_num);O(sembuf,sem_op);O(sembuf,sem_flg);
 return 0; }
