package main

import (
	"os"
	"slices"
	"strings"
	"syscall"
)

// sysmonSetting keeps the Go runtime's monitor thread (sysmon) out of its deep sleep. On an
// edge that is idle between messages (a few hundred a second), the monitor otherwise goes to
// sleep each time the one P idles, and the next system call the writer makes (a SQLite file
// lock, a WAL write: ncruces's VFS makes them as ordinary calls) wakes it and restarts it at
// its shortest tick, 20 µs: several thread switches on the edge's core for every message.
// With schedtrace set, the runtime never puts the monitor in that sleep (so that it could
// print on time); it backs off to one look every 10 ms instead. The interval is the largest
// the runtime takes, ~24.9 days of the host's monotonic clock: a host up longer than that
// gets one "SCHED …" line on stderr at the start and one every 24.9 days (ops/RUNBOOK.md).
const sysmonSetting = "schedtrace=2147483647"

// keepSysmonAwake re-executes the edge (the same process, binary, arguments and environment) with
// sysmonSetting added to GODEBUG, which the runtime reads only at its start. It returns
// without doing anything when GODEBUG already sets schedtrace (the operator's own choice, 0
// among them, or after the re-execution), and when the execution fails (the edge then serves
// as before).
func keepSysmonAwake() {
	godebug, again := withSysmonSetting(os.Getenv("GODEBUG"))
	if !again {
		return
	}
	// The binary's own path, not /proc/self/exe, whose name would become the process's
	// (ps, top and pgrep would show "exe").
	self, err := os.Executable()
	if err != nil {
		return
	}
	// The runtime reads the first GODEBUG of the environment: the old one goes.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
	_ = syscall.Exec(self, os.Args, append(env, "GODEBUG="+godebug)) // returns only on failure
}

// withSysmonSetting is GODEBUG with sysmonSetting added, and whether that changes it.
func withSysmonSetting(godebug string) (string, bool) {
	for kv := range strings.SplitSeq(godebug, ",") {
		if strings.HasPrefix(strings.TrimSpace(kv), "schedtrace=") {
			return godebug, false
		}
	}
	if godebug == "" {
		return sysmonSetting, true
	}
	return godebug + "," + sysmonSetting, true
}
