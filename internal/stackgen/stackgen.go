// Package stackgen writes realistic stack files of any size for tests and
// benchmarks: two interfaces, listeners on each address and on every
// address (some on the same ports), connected UDP and TCP flows from many
// peers, a gold class and rates, as a large deployment declares them.
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
