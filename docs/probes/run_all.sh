#!/bin/sh
# Rebuild and rerun every probe, each in a fresh IPC namespace. Run as root.
set -e
cd "$(dirname "$0")"
for p in layout info idseq seqwrap sysctl nextid errs qbytes times; do gcc -O0 -w -o $p $p.c; done
./layout > layout.out
unshare -i ./info > info.out
unshare -i ./idseq > idseq.out
unshare -i ./seqwrap > seqwrap.out
unshare -i ./sysctl > sysctl.out
unshare -i ./nextid > nextid.out
unshare -i ./errs > errs.out 2>&1
unshare -i ./qbytes > qbytes.out
unshare -i ./run_proc.sh > times_proc.out 2>&1
