//go:build linux

package agent

import (
	"os"
	"runtime"
	"strconv"
	"sync"
)

// A sandbox's pids limit counts threads, and the Go runtime aborts the whole
// process when it cannot create one. Init therefore makes every thread it
// will ever need before it starts the command (see prepareThreads) and only
// then reports itself ready under ReadyName, so nothing in the sandbox can
// use up the limit while init still needs to grow.

// spareThreads are the idle OS threads init keeps beyond what it has at
// start: enough for every goroutine that may block in a system call at once
// (signal delivery, reaping, writes to the console) with one P.
const spareThreads = 4

// prepareThreads limits init to one P (it is a small event loop) and grows
// the runtime's pool of OS threads to what it may ever need: spareThreads
// goroutines each wire themselves to an OS thread and wait until all are
// wired, which makes the runtime start one thread per goroutine. Unwired
// and finished, those threads stay idle in the pool for later reuse (the
// runtime never ends them). A GC cycle then starts the collector's workers
// while threads are still free.
func prepareThreads() {
	runtime.GOMAXPROCS(1)
	var wired, release sync.WaitGroup
	wired.Add(spareThreads)
	release.Add(1)
	var done sync.WaitGroup
	done.Add(spareThreads)
	for i := 0; i < spareThreads; i++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			wired.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	wired.Wait()
	release.Done()
	done.Wait()
	runtime.GC()
}

// markReady renames init's main thread (the one /proc/PID/comm shows) to
// ReadyName. Any thread of a process may rename another through /proc; a
// sandbox without /proc simply never looks ready.
func markReady() {
	_ = os.WriteFile("/proc/self/task/"+strconv.Itoa(os.Getpid())+"/comm", []byte(ReadyName), 0)
}
