// Package stackgen writes stack files for tests and benchmarks: realistic
// ones of any size (Mixed: two interfaces, listeners on each address and
// on every address, some on the same ports, connected UDP and TCP flows
// from many peers, a gold class and rates, as a large deployment declares
// them), ones of a chosen shape (Shaped: kinds of endpoints, services,
// size), and the random ones a fuzz target makes of bytes (Random).
package stackgen

import (
	"fmt"
	"strings"
)

// Mixed returns a stack of about n endpoints. With flowsFirst, the flows
// are declared before the listeners (the order that fills a NIC's
// 5-tuple table with flows keyed on the remote address first).
func Mixed(n int, flowsFirst bool) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "stack mixed%d {\n", n)
	b.WriteString("    interface eth0 { mac 00:1b:21:00:10:01 ip 10.8.0.1/16 ip 10.8.0.2/16 }\n")
	b.WriteString("    interface eth1 { mac 00:1b:21:00:10:02 ip 10.9.0.1/16 ip 10.9.0.2/16 mtu 9000 }\n")
	b.WriteString("    cores 0..15\n")
	// Listeners come in groups of five on ports base..base+4: UDP on an
	// eth0 address, UDP on an eth1 address, UDP on every address (the
	// port of the first, which it shares), TCP on an eth0 address, TCP
	// on every address. 12,000 groups fit the ports of one address pair.
	listeners := func(k int) {
		for i := 0; i < k; i++ {
			g := i / 5
			base := 1024 + 5*(g%12000)
			host := 1 + g/12000%2
			switch i % 5 {
			case 0:
				fmt.Fprintf(&b, "    endpoint u%d udp listen 10.8.0.%d:%d { app \"kv\" rate 20kpps }\n", i, host, base)
			case 1:
				fmt.Fprintf(&b, "    endpoint v%d udp listen 10.9.0.%d:%d { app \"kv\" class gold rate 50kpps }\n", i, host, base+1)
			case 2:
				if g < 12000 {
					fmt.Fprintf(&b, "    endpoint w%d udp listen *:%d\n", i, base)
				} else {
					fmt.Fprintf(&b, "    endpoint w%d udp listen 10.9.0.%d:%d\n", i, host, base+2)
				}
			case 3:
				fmt.Fprintf(&b, "    endpoint t%d tcp listen 10.8.0.%d:%d { app \"web\" }\n", i, host, base+3)
			case 4:
				if g < 12000 {
					fmt.Fprintf(&b, "    endpoint s%d tcp listen *:%d { rate 5kpps }\n", i, base+4)
				} else {
					fmt.Fprintf(&b, "    endpoint s%d tcp listen 10.9.0.%d:%d { rate 5kpps }\n", i, host, base+4)
				}
			}
		}
	}
	// Flows: one per remote peer and port, UDP on eth0 and TCP on eth1.
	flows := func(k int) {
		for i := 0; i < k; i++ {
			peer := fmt.Sprintf("172.%d.%d.%d", 16+i/62500%16, i/250%250, 1+i%250)
			if i%2 == 0 {
				fmt.Fprintf(&b, "    endpoint f%d udp flow 10.8.0.1:%d -> %s:%d { rate 1kpps }\n", i, 30000+i%1000, peer, 40000+i%20000)
			} else {
				fmt.Fprintf(&b, "    endpoint g%d tcp flow 10.9.0.1:%d -> %s:%d\n", i, 31000+i%1000, peer, 40000+i%20000)
			}
		}
	}
	nf := n / 3
	if flowsFirst {
		flows(nf)
		listeners(n - nf)
	} else {
		listeners(n - nf)
		flows(nf)
	}
	b.WriteString("    service arp\n    service icmp-echo\n}\n")
	return []byte(b.String())
}

// Kinds are the kinds of endpoints a shaped stack declares, as bits.
type Kinds uint8

// Endpoint kinds.
const (
	UDP    Kinds = 1 << iota // listeners on one address and on every address, and connected flows
	TCP                      // the same over TCP
	OpenMX                   // Open-MX endpoints
)

// Shape is what Shaped declares.
type Shape struct {
	Endpoints     int   // how many endpoints (Open-MX ids are one byte: 256 of them at most)
	Kinds         Kinds // their kinds, taken in turn
	ARP, ICMPEcho bool  // the services
}

// Shaped returns a stack of one interface with two addresses (what
// dragonc run serves) declaring the endpoints and services of s: its
// corners are the stacks the examples do not cover (no service, one
// endpoint, one kind of endpoint, thousands of endpoints). When the
// Open-MX ids run out, the other kinds take the rest; a shape of Open-MX
// alone stops at 256.
func Shaped(s Shape) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "stack shaped%d {\n", s.Endpoints)
	b.WriteString("    interface eth0 { mac 02:00:00:00:07:01 ip 10.7.0.1/16 ip 10.7.0.2/16 }\n")
	b.WriteString("    cores 0..3\n")
	var kinds []Kinds
	for _, k := range []Kinds{UDP, TCP, OpenMX} {
		if s.Kinds&k != 0 {
			kinds = append(kinds, k)
		}
	}
	count := map[Kinds]int{}
	for i := 0; i < s.Endpoints && len(kinds) > 0; i++ {
		k := kinds[i%len(kinds)]
		if k == OpenMX && count[OpenMX] == 256 {
			if kinds = kinds[:len(kinds)-1]; len(kinds) == 0 {
				break
			}
			k = kinds[i%len(kinds)]
		}
		j := count[k]
		count[k]++
		if k == OpenMX {
			fmt.Fprintf(&b, "    endpoint x%d openmx %d { core %d }\n", j, j, j%4)
			continue
		}
		// Listeners on an address, on every address, and flows from
		// many peers, each on a port of its own.
		proto, port := "udp", 1024+j
		if k == TCP {
			proto = "tcp"
		}
		switch j % 3 {
		case 0:
			fmt.Fprintf(&b, "    endpoint %s%d %s listen 10.7.0.%d:%d\n", proto, j, proto, 1+j/3%2, port)
		case 1:
			fmt.Fprintf(&b, "    endpoint %s%d %s listen *:%d { rate %dkpps }\n", proto, j, proto, port, 1+j%50)
		default:
			fmt.Fprintf(&b, "    endpoint %s%d %s flow 10.7.0.1:%d -> 172.%d.%d.%d:%d\n", proto, j, proto, port, 16+j/62500%16, j/250%250, 1+j%250, 40000+j%20000)
		}
	}
	if s.ICMPEcho {
		b.WriteString("    service icmp-echo\n")
	}
	if s.ARP {
		b.WriteString("    service arp\n")
	}
	b.WriteString("}\n")
	return []byte(b.String())
}

// Random returns the stack that b describes, byte by byte: one to three
// interfaces with odd prefixes and MTUs, up to 23 endpoints of every
// kind (listeners on an address or on every address, port ranges, flows,
// Open-MX), attributes, and either service or none. Many are invalid
// (an address no interface has, two endpoints on the same port): what
// the fuzz targets of stack files feed, where any byte string is a
// stack.
func Random(b []byte) []byte {
	next := func() int {
		if len(b) == 0 {
			return 0
		}
		v := int(b[0])
		b = b[1:]
		return v
	}
	var sb strings.Builder
	sb.WriteString("stack f {\n")
	nif := 1 + next()%3
	for i := 0; i < nif; i++ {
		fmt.Fprintf(&sb, "    interface eth%d { mac 00:1b:21:00:00:%02x ip 10.%d.0.%d/%d", i, next()%256, i, 1+next()%250, []int{24, 16, 31, 32, 8}[next()%5])
		if next()%3 == 0 {
			fmt.Fprintf(&sb, " mtu %d", 68+next()*40)
		}
		sb.WriteString(" }\n")
	}
	if next()%2 == 0 {
		fmt.Fprintf(&sb, "    cores 0..%d\n", next()%16)
	}
	n := next() % 24
	for i := 0; i < n; i++ {
		addr := "*"
		if next()%2 == 0 {
			addr = fmt.Sprintf("10.%d.0.%d", next()%nif, 1+next()%250)
		}
		port := 1 + next()*7%65535
		switch next() % 5 {
		case 0:
			fmt.Fprintf(&sb, "    endpoint e%d udp listen %s:%d", i, addr, port)
		case 1:
			fmt.Fprintf(&sb, "    endpoint e%d tcp listen %s:%d", i, addr, port)
		case 2:
			fmt.Fprintf(&sb, "    endpoint e%d udp flow %s:%d -> 192.0.2.%d:%d", i, addr, port, next(), 1+next())
		case 3:
			fmt.Fprintf(&sb, "    endpoint e%d tcp listen %s:%d..%d", i, addr, port, port+next()%4)
		default:
			fmt.Fprintf(&sb, "    endpoint e%d openmx %d", i, next())
		}
		switch next() % 4 {
		case 0:
			fmt.Fprintf(&sb, " { class gold rate %dkpps }", next())
		case 1:
			fmt.Fprintf(&sb, " { cores %d..%d }", next()%8, next()%8)
		case 2:
			fmt.Fprintf(&sb, " { nodelay message %dKiB }", next()%64)
		}
		sb.WriteString("\n")
	}
	if next()%2 == 0 {
		sb.WriteString("    service icmp-echo\n")
	}
	if next()%2 == 0 {
		sb.WriteString("    service arp\n")
	}
	sb.WriteString("}\n")
	return []byte(sb.String())
}
