package run

import (
	"strings"
	"testing"
	"time"

	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/run/dataplane"
)

// TestICMPErrorLimit: the limit a stack file's `service icmp-errors` sets
// reaches the data plane's Host, and the helper program's main.go spells
// it; without the service, or with it and no settings, the data plane has
// Linux's defaults. (guard_test.go shows the data plane keeps a limit.)
func TestICMPErrorLimit(t *testing.T) {
	if got := icmpLimit(&lpg.Stack{ICMPErrors: lpg.LinuxICMPErrors}); got != dataplane.DefaultICMPLimit {
		t.Errorf("lpg.LinuxICMPErrors is %+v to the data plane, want its DefaultICMPLimit %+v", got, dataplane.DefaultICMPLimit)
	}
	if got := icmpLimit(&lpg.Stack{}); got != dataplane.DefaultICMPLimit {
		t.Errorf("a stack not read from a file: %+v, want %+v", got, dataplane.DefaultICMPLimit)
	}
	for _, c := range []struct {
		service string
		want    dataplane.ICMPLimit
		literal string
	}{
		{"", dataplane.DefaultICMPLimit,
			"ICMPErrors: dataplane.ICMPLimit{PerSec: 1000, Burst: 50, PeerInterval: 1000000000, PeerBurst: 6}"},
		{"service icmp-errors", dataplane.DefaultICMPLimit,
			"ICMPErrors: dataplane.ICMPLimit{PerSec: 1000, Burst: 50, PeerInterval: 1000000000, PeerBurst: 6}"},
		{"service icmp-errors { rate 200pps burst 10 peer-rate 2pps peer-burst 3 }",
			dataplane.ICMPLimit{PerSec: 200, Burst: 10, PeerInterval: 500 * time.Millisecond, PeerBurst: 3},
			"ICMPErrors: dataplane.ICMPLimit{PerSec: 200, Burst: 10, PeerInterval: 500000000, PeerBurst: 3}"},
		{"service icmp-errors { peer-rate 0.3pps }",
			dataplane.ICMPLimit{PerSec: 1000, Burst: 50, PeerInterval: 3333333333, PeerBurst: 6},
			"ICMPErrors: dataplane.ICMPLimit{PerSec: 1000, Burst: 50, PeerInterval: 3333333333, PeerBurst: 6}"},
		{"service icmp-errors { rate 1.5Mpps peer-rate 1000Mpps burst 1000000 }",
			dataplane.ICMPLimit{PerSec: 1500000, Burst: 1000000, PeerInterval: time.Nanosecond, PeerBurst: 6},
			"ICMPErrors: dataplane.ICMPLimit{PerSec: 1500000, Burst: 1000000, PeerInterval: 1, PeerBurst: 6}"},
	} {
		src := "stack s {\n    interface eth0 { mac 02:00:00:00:00:01 ip 10.9.0.1/24 }\n    endpoint echo udp listen *:7 { app \"echo\" }\n    " + c.service + "\n}\n"
		st, diags := lpg.LoadStack("s.lpg", []byte(src))
		if st == nil {
			t.Fatalf("%q: %v", c.service, diags)
		}
		if got := hostOf(st).ICMPErrors; got != c.want {
			t.Errorf("%q: the data plane has %+v, want %+v", c.service, got, c.want)
		}
		main := string(mainFile(st, &Chains{}, nil, nil))
		if !strings.Contains(main, c.literal) {
			t.Errorf("%q: main.go lacks %s:\n%s", c.service, c.literal, main)
		}
	}
}
