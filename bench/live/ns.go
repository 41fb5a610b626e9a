package live

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/dragonc/dragonc/internal/netns"
)

// The addresses of the benchmark's veth pair: the server's side (vA, in
// namespace A, with the MAC the stack declares) and the load generator's
// (vB, in namespace B).
var (
	serverAddr = netip.MustParseAddr("10.9.0.1")
	peerAddr   = netip.MustParseAddr("10.9.0.2")
)

const (
	serverMAC = "02:00:00:00:00:01"
	peerMAC   = "02:00:00:00:00:02" // the memcached mode's (pinPeerNeighbour)
	serverIf  = "vA"
	peerIf    = "vB"
	// nsPrefix starts the name of every namespace the benchmark makes,
	// followed by the process id: a later run removes those of a
	// process that no longer exists (one killed by SIGKILL, which no
	// clean-up survives).
	nsPrefix = "dragonc-bench-"
)

// pair is the benchmark's two namespaces joined by a veth pair.
type pair struct {
	a, b string // namespace names: the servers', the load generator's
}

// path is the file a program joins namespace ns through (setns).
func (p *pair) path(ns string) string { return netnsPath(ns) }

func netnsPath(ns string) string { return filepath.Join(netns.Dir, ns) }

// ipCmd runs iproute2's ip.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeStale removes the namespaces earlier benchmarks left when they
// were killed without a chance to clean up, and says which.
func removeStale(say func(string, ...any)) { removeStaleOf(nsPrefix, say) }

// removeStaleOf is removeStale for the namespaces named with prefix.
func removeStaleOf(prefix string, say func(string, ...any)) {
	names, pids := netns.RemoveStale(prefix)
	for i, name := range names {
		say("removed namespace %s, left by benchmark process %d, which is gone", name, pids[i])
	}
}

// newPair makes the namespaces and the veth pair: vA with the stack's MAC,
// the server address and one queue per core each way (so that a server
// has a device queue per core, as a multi-queue NIC gives it); vB with
// the peer address, a permanent neighbour entry for the server (no ARP
// in the measurements) and transmit checksumming off, so that the peer
// finishes its UDP checksums itself (a veth would leave them to a NIC
// that is not there, and the dragonc stack checks them). The returned
// pair is removed by close, also after a failure half-way.
func newPair(cores int) (*pair, error) { return newPairOf(nsPrefix, cores) }

// newPairOf is newPair with namespace names that start with prefix.
func newPairOf(prefix string, cores int) (*pair, error) {
	id := fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), nextID())
	p := &pair{a: id + "-a", b: id + "-b"}
	q := strconv.Itoa(max(1, cores))
	steps := [][]string{
		{"netns", "add", p.a},
		{"netns", "add", p.b},
		{"link", "add", serverIf, "netns", p.a, "numrxqueues", q, "numtxqueues", q, "type", "veth", "peer", "name", peerIf, "netns", p.b, "numrxqueues", q, "numtxqueues", q},
		{"-n", p.a, "link", "set", serverIf, "address", serverMAC, "up"},
		{"-n", p.a, "addr", "add", serverAddr.String() + "/24", "dev", serverIf},
		{"-n", p.a, "link", "set", "lo", "up"},
		{"-n", p.b, "addr", "add", peerAddr.String() + "/24", "dev", peerIf},
		{"-n", p.b, "link", "set", peerIf, "up"},
		{"-n", p.b, "neigh", "replace", serverAddr.String(), "lladdr", serverMAC, "dev", peerIf, "nud", "permanent"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			p.close()
			return nil, err
		}
	}
	if err := txChecksumOff(p.b, peerIf); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// close removes both namespaces (the veth pair goes with them).
func (p *pair) close() {
	for _, ns := range []string{p.a, p.b} {
		if _, err := os.Stat(netnsPath(ns)); err == nil {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	}
}

var idCounter int

func nextID() int { idCounter++; return idCounter }

// txChecksumOff turns off transmit checksumming on interface ifname of
// namespace ns, as `ethtool -K IFACE tx off` does: the legacy
// ETHTOOL_STXCSUM request, which the kernel turns into the
// NETIF_F_CSUM_MASK features (net/ethtool/ioctl.c,
// ethtool_set_one_feature).
func txChecksumOff(ns, ifname string) error {
	return netns.In(ns, func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		// struct ethtool_value { __u32 cmd; __u32 data; }
		// (include/uapi/linux/ethtool.h); ETHTOOL_STXCSUM is 0x17.
		val := [2]uint32{0x17, 0}
		var ifr [40]byte // struct ifreq: the name, then a pointer
		copy(ifr[:16], ifname)
		*(*uintptr)(unsafe.Pointer(&ifr[16])) = uintptr(unsafe.Pointer(&val))
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), 0x8946, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 { // SIOCETHTOOL
			return fmt.Errorf("turning transmit checksums off on %s: %w", ifname, e)
		}
		return nil
	})
}
