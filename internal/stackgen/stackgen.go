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
	b.WriteString("    interface eth0 { mac 00:1b:21:00:10:01 ip 10.8.0.1/16 }\n")
	b.WriteString("    interface eth1 { mac 00:1b:21:00:10:02 ip 10.9.0.1/16 mtu 9000 }\n")
	b.WriteString("    cores 0..15\n")
	listeners := func(k int) {
		for i := 0; i < k; i++ {
			switch i % 5 {
			case 0:
				fmt.Fprintf(&b, "    endpoint u%d udp listen 10.8.0.1:%d { app \"kv\" rate 20kpps }\n", i, 10000+i)
			case 1:
				fmt.Fprintf(&b, "    endpoint v%d udp listen 10.9.0.1:%d { app \"kv\" class gold rate 50kpps }\n", i, 10000+i)
			case 2:
				fmt.Fprintf(&b, "    endpoint w%d udp listen *:%d\n", i, 10000+i-2) // the port of u(i-2) on every address
			case 3:
				fmt.Fprintf(&b, "    endpoint t%d tcp listen 10.8.0.1:%d { app \"web\" }\n", i, 20000+i)
			case 4:
				fmt.Fprintf(&b, "    endpoint s%d tcp listen *:%d { rate 5kpps }\n", i, 20000+i)
			}
		}
	}
	flows := func(k int) {
		for i := 0; i < k; i++ {
			peer := fmt.Sprintf("172.16.%d.%d", i/250%250, 1+i%250)
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
