#!/usr/bin/env python3
"""Two builds of ipcns side by side: `ipcns bench semop` and `bench
preload` of BASE and NEW (paths of their `ipcns` executables, each with
its ipcns-bench and libipcns.so beside it), alternated in one run on this
machine, N runs each (default 6); the median and the minimum over the runs
of each figure, and NEW/BASE for each. Usage: compare.py BASE/ipcns NEW/ipcns [N]"""
import json, statistics, subprocess, sys
BASE, NEW = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 6
def run(binary, bench):
    out = subprocess.run([binary, 'bench', bench, '--json'], capture_output=True, text=True, cwd='/tmp')
    return json.loads(out.stdout)
def figures(bench, d):
    f = {}
    if bench == 'semop':
        for r in d['noop']:
            f['semop ipcns idx %d&%d' % tuple(r['idx'])] = r['ipcns_ns']
        f['semop ping-pong ipcns'] = d['pingpong']['ipcns_ns']
    else:
        for who in ('library', 'core'):
            for k, v in d['ns'][who].items():
                # NAME_min and NAME_max: the spread of NAME's rounds.
                if v is not None and not k.endswith(('_min', '_max')):
                    f['preload %s %s' % (who, k)] = v
    return f
acc = {}
for i in range(N):
    for bench in ('semop', 'preload'):
        for who, binary in (('base', BASE), ('new', NEW)) if i % 2 == 0 else (('new', NEW), ('base', BASE)):
            for k, v in figures(bench, run(binary, bench)).items():
                acc.setdefault(k, {}).setdefault(who, []).append(v)
# The median, and the minimum: a virtual machine may run a whole process
# at one of two speeds, and a few runs can put more of one build's in the
# slow one; the minimum is each build's fast state.
print('%-46s %9s %9s %8s %9s %9s %8s' % ('ns over %d runs each' % N, 'median', '', 'ratio', 'min', '', 'ratio'))
print('%-46s %9s %9s %8s %9s %9s %8s' % ('', 'before', 'after', '', 'before', 'after', ''))
for k, v in acc.items():
    b, n = statistics.median(v['base']), statistics.median(v['new'])
    bm, nm = min(v['base']), min(v['new'])
    print('%-46s %9.1f %9.1f %8.3f %9.1f %9.1f %8.3f' % (k, b, n, n / b, bm, nm, nm / bm))
