package dataplane

import (
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"time"
)

// What the data plane does to stay a good citizen of a segment shared with
// hostile peers, beyond what the LPG decides frame by frame: whom an
// answer may come from, which answers the applications refuse, and how
// often ICMP errors go out. Each rule cites its source.

// Prefix is one IPv4 address of the host with its prefix length.
type Prefix struct {
	Addr [4]byte
	Bits int
}

// Contains reports whether a lies in the prefix's subnet.
func (p Prefix) Contains(a [4]byte) bool {
	if p.Bits <= 0 {
		return true
	}
	mask := ^uint32(0) << uint(32-min(p.Bits, 32))
	return be32(a)&mask == be32(p.Addr)&mask
}

func be32(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

// Host is what the data plane knows of the host it serves.
type Host struct {
	MAC [6]byte
	// Addrs are the host's unicast addresses, in the stack's order. A
	// datagram to any other address the LPG delivered was a broadcast.
	Addrs []Prefix
	// ICMPErrors limits the ICMP errors sent (zero: Linux's defaults).
	ICMPErrors ICMPLimit
	// Now reads a monotonic clock (nil: the time since the data plane
	// started); tests give a fake one.
	Now func() time.Duration
}

// local reports whether a is one of the host's unicast addresses.
func (h *Host) local(a [4]byte) bool {
	for _, p := range h.Addrs {
		if p.Addr == a {
			return true
		}
	}
	return false
}

// source is the address an answer to a datagram from peer to dst goes out
// from: dst itself when it is ours, or else (dst was a broadcast) our
// address on the peer's subnet, or our first address. RFC 1122 §3.2.1.3:
// a broadcast address is never a source; §4.1.3.6: the source of a UDP
// datagram a host sends MUST be one of its own addresses.
func (h *Host) source(dst, peer [4]byte) ([4]byte, bool) {
	if peer == ([4]byte{}) {
		// A host learning its address (0.0.0.0, RFC 1122 §3.2.1.3 (a))
		// cannot be answered by unicast; 0.0.0.0 is no destination.
		return [4]byte{}, false
	}
	if h.local(dst) {
		return dst, true
	}
	for _, p := range h.Addrs {
		if p.Contains(peer) {
			return p.Addr, true
		}
	}
	if len(h.Addrs) > 0 {
		return h.Addrs[0].Addr, true
	}
	return [4]byte{}, false
}

// loopPorts are the source ports an echo-like service never answers: the
// UDP ports of the services that answer every datagram (echo 7, RFC 862;
// systat 11, RFC 866; daytime 13, RFC 867; qotd 17, RFC 865; chargen 19,
// RFC 864; time 37, RFC 868), so that one forged datagram cannot start an
// endless exchange between two of them (the "UDP port loop" FreeBSD's
// inetd refuses in check_loop). Port 0 is refused for every application
// where the answer is sent (loop).
var loopPorts = [...]uint16{7, 11, 13, 17, 19, 37}

// loopPort reports whether p is one of loopPorts.
func loopPort(p uint16) bool {
	for _, q := range loopPorts {
		if p == q {
			return true
		}
	}
	return false
}

// ICMPLimit bounds the ICMP errors a stack sends, as Linux does
// (Documentation/networking/ip-sysctl.rst; net/ipv4/icmp.c,
// icmp_global_allow and icmpv4_xrlim_allow): a token bucket for the host
// and one for each peer. RFC 1812 §4.3.2.8 asks that a router limit
// them; RFC 1122 §3.2.2 leaves a host free to.
type ICMPLimit struct {
	PerSec int // errors a second for the host: icmp_msgs_per_sec, 1000
	Burst  int // the host's bucket: icmp_msgs_burst, 50
	// PeerInterval is the time one peer earns an error in: icmp_ratelimit,
	// 1000 ms; PeerBurst the errors a peer may have in a row:
	// XRLIM_BURST_FACTOR, 6 (net/ipv4/inetpeer.c).
	PeerInterval time.Duration
	PeerBurst    int
}

// DefaultICMPLimit is Linux's.
var DefaultICMPLimit = ICMPLimit{PerSec: 1000, Burst: 50, PeerInterval: time.Second, PeerBurst: 6}

// peerSlots bounds the per-peer state: a table of this many buckets,
// each peer's address hashed to one with a key chosen at random at start.
// Peers that share a slot share its bucket: a collision limits both,
// never resets one (an attacker who could reset a victim's bucket with a
// colliding address would lift its limit), and the random key keeps
// anyone from choosing the addresses that collide. A flood from forged
// addresses costs no memory.
const peerSlots = 4096

type peerBucket struct {
	used   bool
	tokens time.Duration
	last   time.Duration
}

// limiter is an ICMPLimit at work; the queues' loops share it.
type limiter struct {
	mu     sync.Mutex
	lim    ICMPLimit
	now    func() time.Duration
	tokens time.Duration // the host's bucket, in time earned
	last   time.Duration
	peers  []peerBucket
	// slot hashes a peer's address to its bucket; charge is what one
	// error costs the host's bucket, in errors (tests fix both).
	slot   func(addr [4]byte) int
	charge func() int
}

func newLimiter(lim ICMPLimit, now func() time.Duration) *limiter {
	if lim == (ICMPLimit{}) {
		lim = DefaultICMPLimit
	}
	seed := maphash.MakeSeed()
	l := &limiter{lim: lim, now: now, peers: make([]peerBucket, peerSlots),
		slot: func(a [4]byte) int { return int(maphash.Bytes(seed, a[:]) % peerSlots) },
		// Linux charges the host's bucket 0, 1 or 2 errors at random
		// (icmp_global_consume, since 5.10): a fixed charge lets an
		// off-path prober count the errors another peer's probes drew
		// and learn which ports are open (CVE-2020-25705, "SAD DNS").
		charge: func() int { return rand.IntN(3) }}
	l.last = now()
	l.tokens = l.hostCost() * time.Duration(max(lim.Burst, 1))
	return l
}

// hostCost is the time the host earns one error in.
func (l *limiter) hostCost() time.Duration {
	if l.lim.PerSec <= 0 {
		return 0
	}
	return time.Second / time.Duration(l.lim.PerSec)
}

// allow reports whether an ICMP error to peer may go out now, and if so
// takes it from both buckets.
func (l *limiter) allow(peer [4]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if cost := l.hostCost(); cost > 0 {
		l.tokens = min(l.tokens+now-l.last, cost*time.Duration(max(l.lim.Burst, 1)))
		l.last = now
		if l.tokens < cost {
			return false
		}
	}
	if iv := l.lim.PeerInterval; iv > 0 {
		b := &l.peers[l.slot(peer)]
		if !b.used {
			// A new peer starts with a full bucket, as an inetpeer entry
			// whose rate_last is long past.
			*b = peerBucket{used: true, tokens: iv * time.Duration(max(l.lim.PeerBurst, 1)), last: now}
		}
		b.tokens = min(b.tokens+now-b.last, iv*time.Duration(max(l.lim.PeerBurst, 1)))
		b.last = now
		if b.tokens < iv {
			return false
		}
		b.tokens -= iv
	}
	l.tokens -= l.hostCost() * time.Duration(l.charge())
	return true
}
