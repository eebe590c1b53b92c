# /proc/sysvipc and the ipc sysctls through util-linux, procps and the
# shell, run on the kernel (fresh IPC namespace) and through libipcns.so:
# the outputs must be equal (keys, times and pids masked).
mask() { sed -E 's/0x[0-9a-f]{8}/KEY/g; s/time *[=:].*/time=T/'; }
echo 5 > /proc/sys/kernel/msg_next_id
cat /proc/sys/kernel/msg_next_id
ipcmk -Q
cat /proc/sys/kernel/msg_next_id
sysctl -w kernel.msgmni=3
sysctl kernel.msgmni kernel.sem kernel.shmmni kernel.msgmax
ipcmk -Q; ipcmk -Q || echo refused
echo abc > /proc/sys/kernel/msgmax 2>/dev/null || echo "bad text refused"
echo 100 200 > /proc/sys/kernel/msgmax
cat /proc/sys/kernel/msgmax
printf '300' | dd of=/proc/sys/kernel/shmmni status=none
cat /proc/sys/kernel/shmmni
# bash's builtin echo writes through stdio's own write call (applied when
# the redirection is undone, or the descriptor closed).
if command -v bash >/dev/null; then
  bash -c 'echo 250 > /proc/sys/kernel/shmmni; echo 9000 > /proc/sys/kernel/msgmax'
  bash -c 'exec 3>/proc/sys/kernel/msgmnb; echo 20000 >&3; exec 3>&-'
  bash -c 'echo 12 > /proc/sys/kernel/sem_next_id'
fi
cat /proc/sys/kernel/shmmni /proc/sys/kernel/msgmax /proc/sys/kernel/msgmnb
cat /proc/sys/kernel/sem_next_id
ipcmk -S 3 >/dev/null; ipcmk -M 8192 >/dev/null
ipcs | mask
ipcs -s -i 0 | mask
ipcs -q -i 5 | mask
lsipc
lsipc -q -o KEY,ID,PERMS,OWNER -n | mask
awk '{print $2,$3,$4,$5,$6,$7,$8}' /proc/sysvipc/sem
awk '{print $2,$3,$4,$5,$6,$7,$8,$9,$10,$11}' /proc/sysvipc/msg
awk '{print $2,$3,$4,$6,$7,$8,$9,$10,$11,$15,$16}' /proc/sysvipc/shm
ipcrm -a
ipcs | mask
