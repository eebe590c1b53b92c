<?php
// System V IPC from PHP's own extensions (sysvsem, sysvshm, sysvmsg) and
// pcntl_fork: a counter kept with shm_put_var/shm_get_var under
// sem_acquire by several processes, messages between processes, and
// messages with a C program (php_peer.c, argv[1]) in both directions.
//
// Prints the same lines on the kernel and under ipcns (but the peer's
// line naming the library its calls bind to); checks every figure itself
// and exits 1 after a `FAIL:` line when one is wrong.

const SEM_KEY = 0x70687001;
const SHM_KEY = 0x70687002;
const QUEUE_KEY = 0x70687003;
const PEER_KEY = 0x70687004;

function fail(string $why): never
{
    echo "FAIL: $why\n";
    exit(1);
}

function check(bool $ok, string $why): void
{
    if (!$ok) {
        fail($why);
    }
}

/** Forks a child that runs $f and exits 0 if it returns true, else 1. */
function child(callable $f): int
{
    $pid = pcntl_fork();
    check($pid >= 0, 'pcntl_fork');
    if ($pid == 0) {
        $ok = false;
        try {
            $ok = $f();
        } catch (Throwable $e) {
            fwrite(STDERR, "child: $e\n");
        }
        exit($ok ? 0 : 1);
    }
    return $pid;
}

function reap(array $pids, string $what): void
{
    foreach ($pids as $pid) {
        check(pcntl_waitpid($pid, $status) == $pid, "$what: waitpid");
        check(pcntl_wifexited($status) && pcntl_wexitstatus($status) == 0, "$what: child $pid failed");
    }
}

/** The system call thread $pid is in (/proc/PID/syscall), or -1. */
function in_syscall(int $pid): int
{
    $s = @file_get_contents("/proc/$pid/syscall");
    return ($s !== false && preg_match('/^(\d+) /', $s, $m)) ? (int) $m[1] : -1;
}

/** Waits until every process of $pids is in system call $nr, 10 s at most. */
function await_syscall(array $pids, int $nr, string $what): void
{
    $deadline = microtime(true) + 10;
    while (count(array_filter($pids, fn ($p) => in_syscall($p) == $nr)) != count($pids)) {
        check(microtime(true) < $deadline, "$what: not all in system call $nr after 10 s");
        usleep(1000);
    }
}

function counter(): void
{
    $procs = 4;
    $rounds = 100;
    // Without auto_release: its copies in the children would take their
    // leave of the set at their exit (decrement the usage count they
    // never raised), and a child's sem_get that then finds the count 0
    // resets the semaphore while another holds it.
    $sem = sem_get(SEM_KEY, 1, 0600, false);
    check($sem !== false, 'sem_get');
    $shm = shm_attach(SHM_KEY, 65536, 0600);
    check($shm !== false, 'shm_attach');
    check(shm_put_var($shm, 1, 0), 'shm_put_var');
    // The children attach on their own (an attachment inherited through
    // fork is another matter).
    check(shm_detach($shm), 'shm_detach');

    // Held here: a child's sem_acquire without waiting fails.
    check(sem_acquire($sem), 'sem_acquire');
    reap([child(fn () => @sem_acquire(sem_get(SEM_KEY, 1, 0600), true) === false)], 'sem_acquire non-blocking');
    check(sem_release($sem), 'sem_release');
    echo "sem_acquire: a held semaphore refuses another process's non-blocking acquire\n";

    $pids = [];
    for ($i = 0; $i < $procs; $i++) {
        $pids[] = child(function () use ($i, $rounds) {
            $sem = sem_get(SEM_KEY, 1, 0600);
            $shm = shm_attach(SHM_KEY, 65536, 0600);
            for ($j = 0; $j < $rounds; $j++) {
                if (!sem_acquire($sem)) {
                    return false;
                }
                $v = shm_get_var($shm, 1);
                shm_put_var($shm, 1, $v + 1);
                $mine = shm_has_var($shm, 10 + $i) ? shm_get_var($shm, 10 + $i) : [];
                $mine[] = $v;
                shm_put_var($shm, 10 + $i, $mine);
                if (!sem_release($sem)) {
                    return false;
                }
            }
            return shm_detach($shm);
        });
    }
    reap($pids, 'counter');
    $shm = shm_attach(SHM_KEY, 65536, 0600);
    $total = shm_get_var($shm, 1);
    check($total === $procs * $rounds, "counter $total, not " . $procs * $rounds);
    // Every value was read by exactly one increment: none lost.
    $seen = [];
    for ($i = 0; $i < $procs; $i++) {
        $mine = shm_get_var($shm, 10 + $i);
        check(count($mine) == $rounds, "process $i counted " . count($mine));
        $seen = array_merge($seen, $mine);
    }
    sort($seen);
    check($seen === range(0, $procs * $rounds - 1), 'the values read are not 0..' . ($procs * $rounds - 1));
    echo "counter: $total = $procs processes x $rounds increments under sem_acquire, each value read once\n";
    check(shm_remove($shm), 'shm_remove');
    check(sem_remove($sem), 'sem_remove');
    echo "shm_remove, sem_remove: done\n";
}

function messages(): void
{
    $receivers = 3;
    $count = 20;
    $q = msg_get_queue(QUEUE_KEY, 0600);
    check($q !== false, 'msg_get_queue');
    $pids = [];
    for ($r = 1; $r <= $receivers; $r++) {
        $pids[] = child(function () use ($q, $r, $count) {
            $bytes = 0;
            for ($i = 0; $i < $count; $i++) {
                if (!msg_receive($q, $r, $type, 65536, $m, true, 0, $err)) {
                    fwrite(STDERR, "receiver $r: error $err\n");
                    return false;
                }
                $want = ['to' => $r, 'seq' => $i, 'text' => str_repeat(chr(96 + $r), $i * 7)];
                if ($type != $r || $m !== $want) {
                    return false;
                }
                $bytes += strlen($m['text']);
            }
            return msg_send($q, 100 + $r, "receiver $r: $count messages in order, $bytes bytes");
        });
    }
    await_syscall($pids, 70, 'receivers');
    echo "msg_receive: $receivers processes blocked in msgrcv\n";
    for ($i = 0; $i < $count; $i++) {
        for ($r = 1; $r <= $receivers; $r++) {
            $m = ['to' => $r, 'seq' => $i, 'text' => str_repeat(chr(96 + $r), $i * 7)];
            check(msg_send($q, $r, $m, true, true, $err), "msg_send: error $err");
        }
    }
    for ($r = 1; $r <= $receivers; $r++) {
        check(msg_receive($q, 100 + $r, $type, 4096, $m), "msg_receive of receiver $r's report");
        echo "$m\n";
    }
    reap($pids, 'receivers');
    $st = msg_stat_queue($q);
    check($st['msg_qnum'] == 0 && in_array($st['msg_lspid'], $pids), 'msg_stat_queue: ' . json_encode($st));
    echo "msg_stat_queue: msg_qnum 0, msg_lspid a receiver's, msg_perm.mode " . decoct($st['msg_perm.mode'] & 0777) . "\n";
    check(!msg_receive($q, 0, $type, 4096, $m, true, MSG_IPC_NOWAIT, $err) && $err == MSG_ENOMSG, "msg_receive IPC_NOWAIT: $err");
    echo "msg_receive MSG_IPC_NOWAIT: ENOMSG\n";
    check(msg_remove_queue($q), 'msg_remove_queue');
    check(!msg_queue_exists(QUEUE_KEY), 'msg_queue_exists after removal');
    echo "msg_remove_queue: gone\n";
}

/** Messages with a C program, each side sleeping in msgrcv in turn. */
function peer(string $peer): void
{
    $q = msg_get_queue(PEER_KEY, 0600);
    check($q !== false, 'msg_get_queue');
    $proc = proc_open([$peer, (string) PEER_KEY], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w']], $pipes);
    check(is_resource($proc), 'proc_open');
    $bound = trim(fgets($pipes[1]));
    echo "$bound\n";
    check(trim(fgets($pipes[1])) == 'ready', 'the peer is not ready');
    // It is on its way to msgrcv: a moment, and it sleeps there.
    usleep(100000);
    $hello = 'hello from php, ' . str_repeat('0123456789', 30);
    check(msg_send($q, 1, $hello, false, true, $err), "msg_send to the peer: $err");
    check(msg_receive($q, 2, $type, 4096, $m, false, 0, $err), "msg_receive from the peer: $err");
    check($m === strlen($hello) . ':' . strtoupper($hello), "the peer answered $m");
    echo "php -> C: " . strlen($hello) . " bytes received by the sleeping peer, its answer back\n";
    // Now this side sleeps (the peer waits for it to), and the peer sends.
    check(msg_receive($q, 3, $type, 4096, $m, false, 0, $err), "msg_receive of the peer's bytes: $err");
    $all = implode('', array_map('chr', range(0, 255)));
    check($m === $all . $all, 'the peer sent ' . bin2hex($m));
    // ipc/msg.c pipelined_send: a message handed to a sleeping receiver
    // records the receiving thread's id: this process's only thread.
    $st = msg_stat_queue($q);
    $pid = proc_get_status($proc)['pid'];
    check($st['msg_lspid'] == $pid, "msg_lspid {$st['msg_lspid']}, not the peer's $pid");
    check($st['msg_lrpid'] == getmypid(), "msg_lrpid {$st['msg_lrpid']}, not ours " . getmypid());
    check(msg_send($q, 4, 'bye', false), 'msg_send bye');
    echo "C -> php: " . strlen($m) . " bytes, 0 to 255 twice, received while sleeping; msg_lspid the peer's, msg_lrpid ours\n";
    while (($l = fgets($pipes[1])) !== false) {
        echo $l;
    }
    fclose($pipes[1]);
    check(proc_close($proc) == 0, 'the peer failed');
    check(msg_remove_queue($q), 'msg_remove_queue');
}

check(count($argv) == 2, 'usage: php php_sysv.php PEER');
counter();
messages();
peer($argv[1]);
echo "ok\n";
