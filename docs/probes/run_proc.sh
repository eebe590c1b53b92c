#!/bin/sh
# run inside: unshare -i ./run_proc.sh
./times
echo "--- /proc/sysvipc/sem"; cat /proc/sysvipc/sem
echo "--- /proc/sysvipc/msg"; cat /proc/sysvipc/msg
echo "--- /proc/sysvipc/shm"; cat /proc/sysvipc/shm
echo "--- read from a new user ns with no uid map (unshare -U)"; unshare -U cat /proc/sysvipc/sem /proc/sysvipc/shm | grep -v key
echo "--- read from a new pid ns (unshare -p -f)"; unshare -p -f cat /proc/sysvipc/msg /proc/sysvipc/shm | grep -v key
echo "--- header bytes"; head -1 /proc/sysvipc/sem | od -c | head -3
