package live

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture dragonc runs on (include/asm-generic/param.h), which is
// what sysconf(_SC_CLK_TCK) returns to gen.c.
const userHZ = 100

// busyNs is the busy time of every CPU since boot, in nanoseconds: the
// user, nice, system, irq, softirq and steal columns of /proc/stat's
// "cpu" line (guest time is within user; idle and iowait are not busy),
// as gen.c reads it.
func busyNs() uint64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0
	}
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		v, _ := strconv.ParseUint(fields[i], 10, 64)
		ticks += v
	}
	return ticks * (1e9 / userHZ)
}

// selfNs is this process's user and system time.
func selfNs() uint64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return uint64(ru.Utime.Nano() + ru.Stime.Nano())
}

// processNs is the CPU time of this process and, when pid is not 0, of
// process pid (/proc/PID/stat's utime and stime, in USER_HZ ticks;
// proc(5)).
func processNs(pid int) uint64 {
	ns := selfNs()
	if pid == 0 {
		return ns
	}
	return ns + pidNs(pid)
}

// pidNs is the CPU time of process pid, every thread of it (0 when it
// cannot be read).
func pidNs(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'. After it come state (field 3) ... utime (14)
	// and stime (15).
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return (ut + st) * (1e9 / userHZ)
}
