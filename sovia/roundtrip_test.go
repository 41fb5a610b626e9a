//go:build linux

package sovia

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkRoundTrip is the per-message path without a network: a
// ping-pong of one NoDelay message each way, echoed by a goroutine, over
// an in-memory VI pair (the SOVIA layer alone) and over software VIs on
// an in-memory link whose waiting goroutines receive the frames
// themselves (the software VI's reliable delivery too; the link copies
// each frame once, as a wire would). Run it with -benchmem: allocations
// per round trip are what it watches.
//
//	go test ./sovia -run XXX -bench RoundTrip -benchmem
func BenchmarkRoundTrip(b *testing.B) {
	p := PaperParams()
	p.NoDelay = true
	for _, link := range []string{"memvi", "rawvi"} {
		for _, size := range []int{4, 64, 1024} {
			b.Run(fmt.Sprintf("%s/%dB", link, size), func(b *testing.B) {
				var ca, cb *Conn
				switch link {
				case "memvi":
					var err error
					if ca, cb, _, _, err = NewPair(p); err != nil {
						b.Fatal(err)
					}
				case "rawvi":
					la, lb := newMemLinks(1, 0, 0)
					ha, hb := memHosts(b, la, lb, nil, false)
					as, bs := conns(b, ha, hb, p, 1)
					ca, cb = as[0], bs[0]
				}
				go echo(cb)
				msg, buf := make([]byte, size), make([]byte, size)
				b.SetBytes(int64(2 * size))
				b.ResetTimer()
				for range b.N {
					if _, err := ca.Write(msg); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(ca, buf); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				ca.Close()
			})
		}
	}
}
