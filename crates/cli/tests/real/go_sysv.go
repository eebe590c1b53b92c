// System V IPC from Go through the syscall package: syscall.Syscall and
// Syscall6 issue the system call instruction themselves (no libc), so
// under `ipcns run` the supervisor serves every call. Built with
// CGO_ENABLED=0 (a static binary); standard library only, Go 1.19.
//
// Prints the same lines on the kernel and under ipcns; checks every
// figure itself and exits 1 after a `FAIL:` line when one is wrong.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// The kernel's numbers (linux/ipc.h, linux/sem.h, linux/msg.h).
const (
	ipcCreat   = 0o1000
	ipcExcl    = 0o2000
	ipcNowait  = 0o4000
	ipcRmid    = 0
	ipcStat    = 2
	getPid     = 11
	getVal     = 12
	getAll     = 13
	getNcnt    = 14
	setAll     = 17
	semUndo    = 0x1000
	msgNoerror = 0o10000
	msgExcept  = 0o20000
)

// Keys of this program's objects.
const (
	keyQueue = 0x67730001
	keySet   = 0x67730002
	keySeg   = 0x67730003
)

// struct ipc64_perm (x86-64).
type ipcPerm struct {
	Key                  int32
	Uid, Gid, Cuid, Cgid uint32
	Mode                 uint16
	_                    uint16
	Seq                  uint16
	_                    uint16
	_                    [2]uint64
}

// struct msqid64_ds (x86-64).
type msqidDS struct {
	Perm                 ipcPerm
	Stime, Rtime, Ctime  int64
	Cbytes, Qnum, Qbytes uint64
	Lspid, Lrpid         int32
	_                    [2]uint64
}

// struct shmid64_ds (x86-64).
type shmidDS struct {
	Perm                ipcPerm
	Segsz               uint64
	Atime, Dtime, Ctime int64
	Cpid, Lpid          int32
	Nattch              uint64
	_                   [2]uint64
}

// struct semid64_ds (x86-64, with x32's padding).
type semidDS struct {
	Perm  ipcPerm
	Otime int64
	_     uint64
	Ctime int64
	_     uint64
	Nsems uint64
	_     [2]uint64
}

// struct sembuf.
type sembuf struct {
	Num uint16
	Op  int16
	Flg int16
}

func fail(format string, a ...interface{}) {
	fmt.Printf("FAIL: "+format+"\n", a...)
	os.Exit(1)
}

func check(ok bool, format string, a ...interface{}) {
	if !ok {
		fail(format, a...)
	}
}

// call makes a system call that must succeed.
func call(what string, trap uintptr, a ...uintptr) uintptr {
	r, e := try(trap, a...)
	if e != 0 {
		fail("%s: %v", what, e)
	}
	return r
}

// try makes a system call (six arguments at most), retrying it after
// EINTR: the kernel's semop, msgsnd and msgrcv fail with EINTR when a
// signal handler runs (Go's runtime has handlers), whatever SA_RESTART.
func try(trap uintptr, a ...uintptr) (uintptr, syscall.Errno) {
	var x [6]uintptr
	copy(x[:], a)
	for {
		var r uintptr
		var e syscall.Errno
		if len(a) <= 3 {
			r, _, e = syscall.Syscall(trap, x[0], x[1], x[2])
		} else {
			r, _, e = syscall.Syscall6(trap, x[0], x[1], x[2], x[3], x[4], x[5])
		}
		if e != syscall.EINTR {
			return r, e
		}
	}
}

func msgStat(q uintptr) msqidDS {
	var ds msqidDS
	call("msgctl IPC_STAT", syscall.SYS_MSGCTL, q, ipcStat, uintptr(unsafe.Pointer(&ds)))
	return ds
}

func shmStat(id uintptr) shmidDS {
	var ds shmidDS
	call("shmctl IPC_STAT", syscall.SYS_SHMCTL, id, ipcStat, uintptr(unsafe.Pointer(&ds)))
	return ds
}

// msgsnd of type t and text, with flags.
func msgsnd(q uintptr, t int64, text []byte, flags uintptr) syscall.Errno {
	b := make([]byte, 8+len(text))
	*(*int64)(unsafe.Pointer(&b[0])) = t
	copy(b[8:], text)
	_, e := try(syscall.SYS_MSGSND, q, uintptr(unsafe.Pointer(&b[0])), uintptr(len(text)), flags)
	return e
}

// msgrcv into a buffer of size bytes: type and text.
func msgrcv(q uintptr, size int, t int64, flags uintptr) (int64, string, syscall.Errno) {
	b := make([]byte, 8+size)
	n, e := try(syscall.SYS_MSGRCV, q, uintptr(unsafe.Pointer(&b[0])), uintptr(size), uintptr(t), flags)
	if e != 0 {
		return 0, "", e
	}
	return *(*int64)(unsafe.Pointer(&b[0])), string(b[8 : 8+n]), 0
}

func semop(set uintptr, ops ...sembuf) {
	call("semop", syscall.SYS_SEMOP, set, uintptr(unsafe.Pointer(&ops[0])), uintptr(len(ops)))
}

// blocked waits until exactly n threads of this process are in system
// call nr (/proc/self/task/TID/syscall), at most 10 s.
func blocked(nr uintptr, n int) {
	want := fmt.Sprintf("%d ", nr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := 0
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, t := range tasks {
			s, err := os.ReadFile("/proc/self/task/" + t.Name() + "/syscall")
			if err == nil && strings.HasPrefix(string(s), want) {
				got++
			}
		}
		if got == n {
			return
		}
		check(time.Now().Before(deadline), "%d threads in system call %d, not %d, after 10 s", got, nr, n)
		time.Sleep(time.Millisecond)
	}
}

// The text of message i of sender s for type t: its length varies.
func text(s, t, i int) string {
	head := fmt.Sprintf("s%d t%d n%02d ", s, t, i)
	return head + strings.Repeat(string(rune('a'+(s*7+t*3+i)%26)), (i*37+t*11+s*5)%200)
}

const (
	receivers = 4  // goroutines blocked in msgrcv, one type each
	senders   = 2  // goroutines sending to all of them
	perSender = 15 // messages of each sender to each receiver
)

func messages() {
	self := int32(os.Getpid())
	q := call("msgget", syscall.SYS_MSGGET, keyQueue, ipcCreat|ipcExcl|0o600)
	again := call("msgget by key", syscall.SYS_MSGGET, keyQueue, 0)
	check(again == q, "msgget by key: %d, not %d", again, q)
	_, e := try(syscall.SYS_MSGGET, keyQueue, ipcCreat|ipcExcl|0o600)
	check(e == syscall.EEXIST, "msgget IPC_EXCL again: %v", e)
	fmt.Println("msgget: queue made, found by its key, EEXIST with IPC_EXCL")

	got := make([][]string, receivers)
	var done sync.WaitGroup
	for r := 0; r < receivers; r++ {
		done.Add(1)
		go func(r int) {
			defer done.Done()
			for i := 0; i < senders*perSender; i++ {
				t, s, e := msgrcv(q, 256, int64(r+1), 0)
				check(e == 0 && t == int64(r+1), "receiver %d: msgrcv: type %d, %v", r+1, t, e)
				got[r] = append(got[r], s)
			}
		}(r)
	}
	// One more, for a type nobody sends: the queue's removal ends it.
	removed := make(chan syscall.Errno)
	go func() {
		_, _, e := msgrcv(q, 256, 99, 0)
		removed <- e
	}()
	blocked(syscall.SYS_MSGRCV, receivers+1)
	ds := msgStat(q)
	check(ds.Qnum == 0, "qnum %d with receivers blocked", ds.Qnum)
	fmt.Printf("msgrcv: %d goroutines blocked on an empty queue\n", receivers+1)

	for s := 0; s < senders; s++ {
		go func(s int) {
			for i := 0; i < perSender; i++ {
				for t := 1; t <= receivers; t++ {
					e := msgsnd(q, int64(t), []byte(text(s, t, i)), 0)
					check(e == 0, "sender %d: msgsnd: %v", s, e)
				}
			}
		}(s)
	}
	done.Wait()
	for r := 0; r < receivers; r++ {
		t := r + 1
		next := make([]int, senders)
		bytes := 0
		for _, m := range got[r] {
			var s, tt, i int
			_, err := fmt.Sscanf(m, "s%d t%d n%d ", &s, &tt, &i)
			check(err == nil && s < senders && tt == t, "receiver %d got %q", t, m)
			check(i == next[s], "receiver %d: message %d of sender %d after %d", t, i, s, next[s])
			check(m == text(s, t, i), "receiver %d: message %d of sender %d is %q", t, i, s, m)
			next[s]++
			bytes += len(m)
		}
		fmt.Printf("type %d: %d messages, %d from each of %d senders in order, %d bytes\n",
			t, len(got[r]), perSender, senders, bytes)
	}
	ds = msgStat(q)
	check(ds.Qnum == 0 && ds.Cbytes == 0, "qnum %d cbytes %d after receiving", ds.Qnum, ds.Cbytes)
	check(ds.Lspid == self, "lspid %d, not %d", ds.Lspid, self)
	check(ds.Perm.Key == keyQueue && ds.Perm.Mode&0o777 == 0o600, "perm %+v", ds.Perm)
	fmt.Printf("msgctl IPC_STAT: qnum %d, cbytes %d, qbytes %d, lspid ours, key %#x, mode %o\n",
		ds.Qnum, ds.Cbytes, ds.Qbytes, ds.Perm.Key, ds.Perm.Mode&0o777)

	// A message handed to a receiver asleep (ipc/msg.c pipelined_send)
	// records the receiving thread's id: "ipc_update_pid(&msq->q_lrpid,
	// task_pid(msr->r_tsk))"; one taken from the queue, the process's
	// (do_msgrcv: task_tgid(current)). The kernel's receiver is asleep
	// once /proc shows it in msgrcv; a supervisor's takes the call a
	// moment later (50 ms allowed), and a late one finds the message
	// queued: the process's id, right too. Anything else is wrong.
	tid := make(chan int32)
	go func() {
		runtime.LockOSThread()
		tid <- int32(syscall.Gettid())
		_, s, e := msgrcv(q, 256, 8, 0)
		check(e == 0 && s == "to a sleeper", "msgrcv of type 8: %q %v", s, e)
		tid <- 0
	}()
	sleeper := <-tid
	blocked(syscall.SYS_MSGRCV, 2)
	time.Sleep(50 * time.Millisecond)
	check(msgsnd(q, 8, []byte("to a sleeper"), 0) == 0, "msgsnd of type 8")
	<-tid
	ds = msgStat(q)
	check(ds.Lrpid == sleeper || ds.Lrpid == self,
		"lrpid %d after a receiver asleep got its message: neither its thread's id %d nor its process's %d",
		ds.Lrpid, sleeper, self)
	fmt.Println("msgrcv asleep: lrpid the receiving thread's id")

	// Full: IPC_NOWAIT fails with EAGAIN, a blocking sender sleeps.
	kib := []byte(strings.Repeat("k", 1024))
	n := 0
	for {
		e := msgsnd(q, 5, kib, ipcNowait)
		if e == syscall.EAGAIN {
			break
		}
		check(e == 0, "msgsnd IPC_NOWAIT: %v", e)
		n++
	}
	ds = msgStat(q)
	check(uint64(n) == ds.Qbytes/1024 && ds.Qnum == uint64(n) && ds.Cbytes == uint64(n)*1024,
		"full after %d: %+v", n, ds)
	fmt.Printf("full: %d messages of 1024 bytes (qnum %d, cbytes %d), then EAGAIN\n", n, ds.Qnum, ds.Cbytes)
	sent := make(chan syscall.Errno)
	go func() { sent <- msgsnd(q, 7, []byte("late"), 0) }()
	blocked(syscall.SYS_MSGSND, 1)
	t, s, e := msgrcv(q, 2048, 0, 0)
	check(e == 0 && t == 5 && len(s) == 1024, "msgrcv of the first: %d %d %v", t, len(s), e)
	check(<-sent == 0, "the blocked msgsnd failed")
	ds = msgStat(q)
	check(ds.Qnum == uint64(n) && ds.Cbytes == uint64(n-1)*1024+4, "after the blocked sender: %+v", ds)
	fmt.Printf("msgsnd: blocked on the full queue until a msgrcv, then qnum %d, cbytes %d\n", ds.Qnum, ds.Cbytes)

	// Type selection, sizes.
	t, s, e = msgrcv(q, 100, 7, 0)
	check(e == 0 && t == 7 && s == "late", "msgrcv type 7: %d %q %v", t, s, e)
	_, _, e = msgrcv(q, 2048, 5, ipcNowait|msgExcept)
	check(e == syscall.ENOMSG, "msgrcv MSG_EXCEPT 5: %v", e)
	_, _, e = msgrcv(q, 100, -6, 0)
	check(e == syscall.E2BIG, "msgrcv of 1024 bytes into 100: %v", e)
	t, s, e = msgrcv(q, 100, -6, msgNoerror)
	check(e == 0 && t == 5 && s == string(kib[:100]), "msgrcv MSG_NOERROR: %d %d %v", t, len(s), e)
	left := 0
	for {
		_, _, e = msgrcv(q, 2048, 0, ipcNowait)
		if e == syscall.ENOMSG {
			break
		}
		check(e == 0, "msgrcv IPC_NOWAIT: %v", e)
		left++
	}
	fmt.Printf("msgrcv: type 7 found, ENOMSG with MSG_EXCEPT, E2BIG then 100 bytes with MSG_NOERROR, %d left, then ENOMSG\n", left)

	call("msgctl IPC_RMID", syscall.SYS_MSGCTL, q, ipcRmid, 0)
	e = <-removed
	check(e == syscall.EIDRM, "the receiver of type 99: %v", e)
	_, e = try(syscall.SYS_MSGCTL, q, ipcStat, uintptr(unsafe.Pointer(&ds)))
	check(e == syscall.EINVAL, "msgctl IPC_STAT after IPC_RMID: %v", e)
	fmt.Println("msgctl IPC_RMID: the blocked receiver got EIDRM, IPC_STAT then EINVAL")
}

const (
	workers = 4   // goroutines taking the semaphore
	rounds  = 250 // increments of each
)

// counter: the semaphore as a mutex around a counter in the segment,
// each worker through an attachment of its own.
func counter() {
	self := int32(os.Getpid())
	set := call("semget", syscall.SYS_SEMGET, keySet, 3, ipcCreat|ipcExcl|0o600)
	again := call("semget by key", syscall.SYS_SEMGET, keySet, 0, 0)
	check(again == set, "semget by key: %d, not %d", again, set)
	// 0: the mutex, free; 1: workers done; 2: the start gate.
	vals := []uint16{1, 0, 0}
	call("semctl SETALL", syscall.SYS_SEMCTL, set, 0, setAll, uintptr(unsafe.Pointer(&vals[0])))
	seg := call("shmget", syscall.SYS_SHMGET, keySeg, 4096, ipcCreat|ipcExcl|0o600)
	base := call("shmat", syscall.SYS_SHMAT, seg, 0, 0)
	// The count, then one slot per worker.
	word := func(at uintptr, i int) *uint64 {
		return (*uint64)(unsafe.Pointer(at + uintptr(8*i)))
	}
	for i := 0; i <= workers; i++ {
		check(*word(base, i) == 0, "a new segment holds %d", *word(base, i))
	}

	var attached sync.WaitGroup
	addrs := make([]uintptr, workers)
	for w := 0; w < workers; w++ {
		attached.Add(1)
		go func(w int) {
			at := call("shmat", syscall.SYS_SHMAT, seg, 0, 0)
			addrs[w] = at
			attached.Done()
			semop(set, sembuf{2, -1, 0})
			for i := 0; i < rounds; i++ {
				semop(set, sembuf{0, -1, semUndo})
				v := *word(at, 0)
				runtime.Gosched()
				*word(at, 0) = v + 1
				*word(at, 1+w)++
				semop(set, sembuf{0, 1, semUndo})
			}
			call("shmdt", syscall.SYS_SHMDT, at)
			semop(set, sembuf{1, 1, 0})
		}(w)
	}
	attached.Wait()
	ds := shmStat(seg)
	check(ds.Nattch == workers+1, "nattch %d with %d attached", ds.Nattch, workers+1)
	distinct := map[uintptr]bool{base: true}
	for _, a := range addrs {
		distinct[a] = true
	}
	check(len(distinct) == workers+1, "attachments at %x and %x", base, addrs)
	fmt.Printf("shmat: %d attachments at distinct addresses, nattch %d\n", workers+1, ds.Nattch)

	deadline := time.Now().Add(10 * time.Second)
	for call("semctl GETNCNT", syscall.SYS_SEMCTL, set, 2, getNcnt, 0) != workers {
		check(time.Now().Before(deadline), "not %d workers waiting at the gate after 10 s", workers)
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("semctl GETNCNT: %d goroutines waiting at the gate\n", workers)
	semop(set, sembuf{2, workers, 0})
	// Sleeps until every worker is done (30 s at most).
	wait := syscall.Timespec{Sec: 30}
	ops := []sembuf{{1, -workers, 0}}
	_, e := try(syscall.SYS_SEMTIMEDOP, set, uintptr(unsafe.Pointer(&ops[0])), 1, uintptr(unsafe.Pointer(&wait)))
	check(e == 0, "waiting for the workers: %v", e)

	total := *word(base, 0)
	check(total == workers*rounds, "count %d, not %d", total, workers*rounds)
	for w := 0; w < workers; w++ {
		check(*word(base, 1+w) == rounds, "worker %d counted %d", w, *word(base, 1+w))
	}
	fmt.Printf("counter: %d = %d goroutines x %d increments under the semaphore\n", total, workers, rounds)

	ds = shmStat(seg)
	check(ds.Nattch == 1 && ds.Segsz == 4096 && ds.Cpid == self && ds.Lpid == self,
		"shmctl IPC_STAT: %+v", ds)
	fmt.Printf("shmctl IPC_STAT: nattch %d, segsz %d, cpid and lpid ours\n", ds.Nattch, ds.Segsz)
	call("semctl GETALL", syscall.SYS_SEMCTL, set, 0, getAll, uintptr(unsafe.Pointer(&vals[0])))
	check(vals[0] == 1 && vals[1] == 0 && vals[2] == 0, "GETALL %v", vals)
	v := call("semctl GETVAL", syscall.SYS_SEMCTL, set, 0, getVal, 0)
	pid := call("semctl GETPID", syscall.SYS_SEMCTL, set, 0, getPid, 0)
	check(int32(pid) == self, "sempid %d, not %d", pid, self)
	var sds semidDS
	call("semctl IPC_STAT", syscall.SYS_SEMCTL, set, 0, ipcStat, uintptr(unsafe.Pointer(&sds)))
	check(sds.Nsems == 3 && sds.Otime != 0 && sds.Perm.Key == keySet, "semctl IPC_STAT: %+v", sds)
	fmt.Printf("semctl: GETALL %v, GETVAL %d, GETPID ours, IPC_STAT nsems %d\n", vals, v, sds.Nsems)

	ts := syscall.Timespec{Nsec: 20 * 1000 * 1000}
	ops = []sembuf{{1, -1, 0}}
	_, e = try(syscall.SYS_SEMTIMEDOP, set, uintptr(unsafe.Pointer(&ops[0])), 1, uintptr(unsafe.Pointer(&ts)))
	check(e == syscall.EAGAIN, "semtimedop: %v", e)
	fmt.Println("semtimedop: EAGAIN after its timeout")

	call("shmdt", syscall.SYS_SHMDT, base)
	ds = shmStat(seg)
	check(ds.Nattch == 0, "nattch %d after the last shmdt", ds.Nattch)
	_, e = try(syscall.SYS_SHMDT, base)
	check(e == syscall.EINVAL, "shmdt again: %v", e)
	call("shmctl IPC_RMID", syscall.SYS_SHMCTL, seg, ipcRmid, 0)
	call("semctl IPC_RMID", syscall.SYS_SEMCTL, set, 0, ipcRmid, 0)
	_, e = try(syscall.SYS_SEMOP, set, uintptr(unsafe.Pointer(&ops[0])), 1)
	check(e == syscall.EINVAL, "semop after IPC_RMID: %v", e)
	fmt.Println("shmdt: nattch 0, EINVAL again; removed")
}

func main() {
	check(unsafe.Sizeof(msqidDS{}) == 120 && unsafe.Sizeof(shmidDS{}) == 112 &&
		unsafe.Sizeof(semidDS{}) == 104, "structure sizes")
	counter()
	messages()
	fmt.Println("ok")
}
