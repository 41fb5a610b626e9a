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
