package streams

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// CalibrationFormat names the format of a calibration file, on its first
// field; another format is refused.
const CalibrationFormat = "dragonc-calibration 1"

// Calibration is a VIA provider measured beside kernel TCP on the same
// link (dragonc calibrate): per message size, one-way latency at the 50th
// and 99th percentiles and bandwidth of each. It decides how streams
// travel on the provider it measured instead of the NIC model's table:
// a stream goes over a VI only where the provider measured faster than
// kernel TCP (Decide).
type Calibration struct {
	Format string `json:"format"`
	// Provider names what was measured, e.g. "software VI (package sovia
	// over AF_PACKET)"; VIs is how many VIs it numbers.
	Provider string `json:"provider"`
	VIs      int    `json:"vis"`
	// Measured is when (RFC 3339, UTC); Machine where: host, kernel,
	// CPUs and load average; Link and Method how.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	Link     string `json:"link"`
	Method   string `json:"method"`
	// Note, if set, says more about this file (the checked-in default
	// says it is one).
	Note string `json:"note,omitempty"`
	// Params are the SOVIA settings the provider was measured with; a
	// stream it carries is given the same copy threshold and chunk size.
	Params CalibratedParams `json:"params"`
	Sizes  []Measured       `json:"sizes"`
}

// CalibratedParams are the SOVIA settings of a calibration's
// measurements (sovia.Params, with combining off: nodelay).
type CalibratedParams struct {
	Window       int `json:"window"`
	AckThreshold int `json:"ack_threshold"`
	Chunk        int `json:"chunk_bytes"`
	CopyMax      int `json:"copy_max"`
}

// Measured is one message size of a calibration: microseconds one way
// and megabits per second, for the provider (VI) and kernel TCP.
type Measured struct {
	Size    int     `json:"size"`
	VIP50   float64 `json:"vi_p50_us"`
	VIP99   float64 `json:"vi_p99_us"`
	VIMbps  float64 `json:"vi_mbps"`
	TCPP50  float64 `json:"tcp_p50_us"`
	TCPP99  float64 `json:"tcp_p99_us"`
	TCPMbps float64 `json:"tcp_mbps"`
}

// WriteCalibration writes c as indented JSON with a final newline: the
// same calibration gives the same bytes.
func WriteCalibration(w io.Writer, c *Calibration) error {
	if err := c.check(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadCalibration reads and checks a calibration file: one JSON object of
// CalibrationFormat, no unknown field, sizes that grow, latencies that are
// positive numbers.
func ReadCalibration(r io.Reader) (*Calibration, error) {
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	var c Calibration
	if err := d.Decode(&c); err != nil {
		return nil, fmt.Errorf("not a calibration file: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("a calibration file holds one JSON object and nothing after it")
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Calibration) check() error {
	switch {
	case c.Format != CalibrationFormat:
		return fmt.Errorf("calibration format %q; this dragonc reads %q", c.Format, CalibrationFormat)
	case strings.TrimSpace(c.Provider) == "":
		return errors.New("the calibration names no provider")
	case c.VIs < 1 || c.VIs > 1<<20:
		return fmt.Errorf("the calibration's provider has %d VIs", c.VIs)
	case c.Params.Window < 1 || c.Params.AckThreshold < 1 || c.Params.AckThreshold > c.Params.Window || c.Params.Chunk < 1 || c.Params.CopyMax < 0:
		return fmt.Errorf("the calibration's SOVIA settings %+v are not valid (1 <= ack_threshold <= window, chunk_bytes >= 1)", c.Params)
	case len(c.Sizes) == 0:
		return errors.New("the calibration measured no message size")
	}
	if _, err := time.Parse(time.RFC3339, c.Measured); err != nil {
		return fmt.Errorf("the calibration's measured %q is not an RFC 3339 time", c.Measured)
	}
	for i, m := range c.Sizes {
		if m.Size < 1 || m.Size > 1<<30 || i > 0 && m.Size <= c.Sizes[i-1].Size {
			return fmt.Errorf("calibration size %d (%d B): sizes must grow from 1 B", i+1, m.Size)
		}
		for _, x := range []float64{m.VIP50, m.VIP99, m.TCPP50, m.TCPP99} {
			if !(x > 0) || x > 1e9 {
				return fmt.Errorf("calibration size %d B: %g is not a latency in µs", m.Size, x)
			}
		}
		if m.VIP99 < m.VIP50 || m.TCPP99 < m.TCPP50 {
			return fmt.Errorf("calibration size %d B: a 99th percentile below the median", m.Size)
		}
		for _, x := range []float64{m.VIMbps, m.TCPMbps} {
			if !(x >= 0) || math.IsInf(x, 0) {
				return fmt.Errorf("calibration size %d B: %g is not a bandwidth in Mb/s", m.Size, x)
			}
		}
	}
	return nil
}

// Source cites a calibration in one line: what, where and when.
func (c *Calibration) Source() string {
	return fmt.Sprintf("%s, measured %s on %s", c.Provider, c.Measured, c.Machine)
}

// At is the calibration at size bytes: linear between measured sizes,
// the first size's figures below it; ok is false above the largest size
// measured, where nothing is known.
func (c *Calibration) At(size int) (m Measured, ok bool) {
	s := c.Sizes
	i := sort.Search(len(s), func(i int) bool { return s[i].Size >= size })
	switch {
	case i == len(s):
		return Measured{}, false
	case s[i].Size == size || i == 0:
		m = s[i]
		m.Size = size
		return m, true
	}
	a, b := s[i-1], s[i]
	f := float64(size-a.Size) / float64(b.Size-a.Size)
	lerp := func(x, y float64) float64 { return x + f*(y-x) }
	return Measured{Size: size, VIP50: lerp(a.VIP50, b.VIP50), VIP99: lerp(a.VIP99, b.VIP99), VIMbps: lerp(a.VIMbps, b.VIMbps),
		TCPP50: lerp(a.TCPP50, b.TCPP50), TCPP99: lerp(a.TCPP99, b.TCPP99), TCPMbps: lerp(a.TCPMbps, b.TCPMbps)}, true
}

// softwareVI is the checked-in calibration of dragonc's software VI
// (package sovia over AF_PACKET), from a run of dragonc calibrate on the
// machine it names.
//
//go:embed softvi.calibration.json
var softwareVI []byte

// SoftwareVI is the checked-in calibration of the software VI that
// dragonc run serves streams on: what embed uses for `--calibration
// builtin` and dragonc run when given no calibration.
func SoftwareVI() (*Calibration, error) {
	c, err := ReadCalibration(strings.NewReader(string(softwareVI)))
	if err != nil {
		return nil, fmt.Errorf("the checked-in calibration of the software VI (streams/softvi.calibration.json): %w", err)
	}
	return c, nil
}
