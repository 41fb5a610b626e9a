package streams_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/streams"
)

// cal is a calibration in which the VI wins at small messages and loses
// from 1 KiB, and at 256 B wins the median but loses the 99th percentile.
func cal() *streams.Calibration {
	return &streams.Calibration{
		Format: streams.CalibrationFormat, Provider: "test VI", VIs: 2, Measured: "2026-11-26T00:00:00Z", Machine: "m", Link: "l", Method: "x",
		Params: streams.CalibratedParams{Window: 32, AckThreshold: 16, Chunk: 16384, CopyMax: 512},
		Sizes: []streams.Measured{
			{Size: 4, VIP50: 5, VIP99: 10, VIMbps: 10, TCPP50: 8, TCPP99: 20, TCPMbps: 9},
			{Size: 64, VIP50: 6, VIP99: 12, VIMbps: 50, TCPP50: 9, TCPP99: 21, TCPMbps: 40},
			{Size: 256, VIP50: 7, VIP99: 40, VIMbps: 100, TCPP50: 10, TCPP99: 22, TCPMbps: 90},
			{Size: 1024, VIP50: 30, VIP99: 60, VIMbps: 100, TCPP50: 12, TCPP99: 30, TCPMbps: 400},
		},
	}
}

func TestCalibrationRoundTrip(t *testing.T) {
	var a, b bytes.Buffer
	if err := streams.WriteCalibration(&a, cal()); err != nil {
		t.Fatal(err)
	}
	c, err := streams.ReadCalibration(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := streams.WriteCalibration(&b, c); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "{\n  \"format\": \"dragonc-calibration 1\",\n") {
		t.Errorf("not the same bytes again:\n%s\n%s", a.String(), b.String())
	}
}

// TestBadCalibration: a damaged file is refused with a reason.
func TestBadCalibration(t *testing.T) {
	var good bytes.Buffer
	streams.WriteCalibration(&good, cal())
	for _, c := range []struct{ old, new, want string }{
		{`"dragonc-calibration 1"`, `"dragonc-calibration 2"`, `this dragonc reads "dragonc-calibration 1"`},
		{`"size": 64,`, `"size": 4000,`, "sizes must grow"},
		{`"vi_p50_us": 6,`, `"vi_p50_us": -6,`, "not a latency"},
		{`"vi_p99_us": 12,`, `"vi_p99_us": 1,`, "below the median"},
		{`"measured": "2026-11-26T00:00:00Z"`, `"measured": "yesterday"`, "RFC 3339"},
		{`"vis": 2,`, `"vis": 0,`, "0 VIs"},
		{`"window": 32,`, `"window": 8,`, "not valid"},
		{`"link": "l",`, `"link": "l", "colour": "red",`, "unknown field"},
		{"\n}\n", "\n}\n{}", "nothing after it"},
		{`"format"`, `"format`, "not a calibration file"},
	} {
		s := strings.Replace(good.String(), c.old, c.new, 1)
		if s == good.String() {
			t.Fatalf("%q is not in the file", c.old)
		}
		if _, err := streams.ReadCalibration(strings.NewReader(s)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s → %s: %v, want %q", c.old, c.new, err, c.want)
		}
	}
}

func TestCalibrationAt(t *testing.T) {
	c := cal()
	m, ok := c.At(160) // halfway from 64 to 256
	if !ok || m.VIP50 != 6.5 || m.TCPP99 != 21.5 || m.Size != 160 {
		t.Errorf("At(160) = %+v, %v", m, ok)
	}
	if m, ok := c.At(1); !ok || m.VIP50 != 5 {
		t.Errorf("At(1) = %+v, %v; want the first size's figures", m, ok)
	}
	if _, ok := c.At(1025); ok {
		t.Error("At(1025) is beyond the measurements but ok")
	}
}

// TestSoftwareVI: the checked-in calibration reads, says what it is, and
// is in the layout dragonc calibrate writes.
func TestSoftwareVI(t *testing.T) {
	c, err := streams.SoftwareVI()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Note, "checked in") || !strings.Contains(c.Provider, "software VI") || len(c.Sizes) < 10 {
		t.Errorf("the checked-in calibration: %+v", c)
	}
	raw, err := os.ReadFile("softvi.calibration.json")
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	streams.WriteCalibration(&again, c)
	if again.String() != string(raw) {
		t.Error("softvi.calibration.json is not in the layout dragonc calibrate writes")
	}
}
