package streams_test

import (
	"os"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/streams"
)

const calStack = `stack s {
    interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 }
    endpoint tiny tcp flow 10.0.0.1:1 -> 10.0.0.2:1 { message 16B }
    endpoint mid tcp flow 10.0.0.1:2 -> 10.0.0.3:1 { message 256B }
    endpoint big tcp flow 10.0.0.1:3 -> 10.0.0.4:1 { message 1KiB }
    endpoint huge tcp flow 10.0.0.1:4 -> 10.0.0.5:1 { message 4KiB }
    endpoint small tcp flow 10.0.0.1:5 -> 10.0.0.6:1 { message 64B nodelay }
    endpoint spare tcp flow 10.0.0.1:6 -> 10.0.0.7:1 { message 4B }
}
`

// TestDecideCalibrated: on a calibrated provider the measurements decide,
// not the model's table (which puts every one of these on a VI): a VI only
// where the provider measured faster than kernel TCP at the message size,
// at the median and the 99th percentile; beyond the sizes measured, TCP;
// the calibration's VIs (2) and SOVIA settings apply.
func TestDecideCalibrated(t *testing.T) {
	st := stack(t, calStack)
	model := provider(t, "clan1000")
	for _, c := range streams.Decide(model, st) {
		if c.Transport != "vi" {
			t.Fatalf("the cLAN model no longer puts %s on a VI (%s): the test needs one that does", c.Endpoint, c.Reason)
		}
	}
	p := model.Calibrated(cal())
	want := map[string]string{
		"tiny":  "vi",
		"mid":   "tcp: measured slower than kernel TCP at the 99th percentile (p50 7.0 us against TCP's 10.0 us, p99 40.0 us against 22.0 us)",
		"big":   "tcp: measured slower than kernel TCP (p50 30.0 us against TCP's 12.0 us",
		"huge":  "tcp: measured up to 1024 B only",
		"small": "vi",
		"spare": "tcp: no VI left: test VI has 2",
	}
	for _, c := range streams.Decide(p, st) {
		w := want[c.Endpoint]
		got := c.Transport
		if c.Transport == "tcp" {
			got += ": " + c.Reason
		}
		if !strings.HasPrefix(w, c.Transport) || !strings.Contains(got, strings.TrimPrefix(w, "tcp: ")) {
			t.Errorf("%s: %s; want %s", c.Endpoint, got, w)
		}
		if c.Transport == "vi" {
			m, _ := cal().At(c.Size)
			if !(m.VIP50 < m.TCPP50 && m.VIP99 < m.TCPP99) || c.SOVIAus != m.VIP50 || c.TCPp99 != m.TCPP99 {
				t.Errorf("%s on a VI at %d B: %+v against %+v", c.Endpoint, c.Size, c, m)
			}
			if c.Params.CopyMax != 512 || c.Params.ChunkSize != 16384 || c.Carrier != "test VI" || !strings.Contains(c.Reason, "test VI measured p50") {
				t.Errorf("%s: %+v", c.Endpoint, c)
			}
		} else if c.Carrier != "kernel TCP" {
			t.Errorf("%s: carried by %q", c.Endpoint, c.Carrier)
		}
	}
}

// TestSoftwareVIDecides: the checked-in calibration decides by its own
// numbers: every stream it puts on a VI measured faster there than
// kernel TCP.
func TestSoftwareVIDecides(t *testing.T) {
	c, err := streams.SoftwareVI()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../examples/cluster_db.lpg")
	if err != nil {
		t.Fatal(err)
	}
	p := provider(t, "mvia").Calibrated(c)
	for _, ch := range streams.Decide(p, stack(t, string(src))) {
		m, ok := c.At(ch.Size)
		if ch.Transport == "vi" && (!ok || m.VIP50 >= m.TCPP50 || m.VIP99 >= m.TCPP99) {
			t.Errorf("%s on a VI at %d B, measured %+v", ch.Endpoint, ch.Size, m)
		}
	}
}
