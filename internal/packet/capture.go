package packet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Captured is one frame from a capture file.
type Captured struct {
	Index int // 1-based position in the file
	Data  []byte
	// Truncated is set when the capture kept fewer bytes than were on the
	// wire (snap length).
	Truncated bool
}

// CaptureReader reads the Ethernet frames of a pcap or pcapng stream one
// at a time, so a capture of any size is read in constant memory.
type CaptureReader struct {
	name    string
	read    func() (record, error)
	index   int
	skipped map[layers.LinkType]int
	notes   []string
}

type record struct {
	data            []byte
	caplen, wirelen int
	link            layers.LinkType
}

// NewCaptureReader reads the header of a pcap or pcapng stream. A pcap
// file of another link type than Ethernet is an error; in a pcapng file,
// records of interfaces that are not Ethernet are skipped and counted in
// the notes.
func NewCaptureReader(name string, r io.Reader) (*CaptureReader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%s: not a capture file (shorter than a header)", name)
	}
	c := &CaptureReader{name: name, skipped: map[layers.LinkType]int{}}
	switch {
	case bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}):
		opts := pcapgo.DefaultNgReaderOptions
		opts.WantMixedLinkType = true // each record says its interface's type
		ng, err := pcapgo.NewNgReader(br, opts)
		if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			// A section header and nothing else: a valid, empty capture.
			c.notes = []string{fmt.Sprintf("%s: an empty capture (no interface, no frame)", name)}
			c.read = func() (record, error) { return record{}, io.EOF }
			return c, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: bad pcapng header: %w", name, err)
		}
		first := ng.LinkType()
		c.read = func() (record, error) {
			d, ci, err := ng.ReadPacketData()
			rec := record{d, ci.CaptureLength, ci.Length, first}
			if len(ci.AncillaryData) > 0 {
				if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
					rec.link = lt
				}
			}
			return rec, err
		}
	default:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: not a pcap or pcapng file: %w", name, err)
		}
		if lt := pr.LinkType(); lt != layers.LinkTypeEthernet {
			return nil, fmt.Errorf("%s: link type %v is not Ethernet; dragonc reads Ethernet captures only", name, lt)
		}
		c.read = func() (record, error) {
			d, ci, err := pr.ReadPacketData()
			return record{d, ci.CaptureLength, ci.Length, layers.LinkTypeEthernet}, err
		}
	}
	return c, nil
}

// Next returns the next Ethernet frame, io.EOF after the last, or an
// error naming the damaged record. The frame's bytes are its own.
func (c *CaptureReader) Next() (Captured, error) {
	for {
		rec, err := c.read()
		if errors.Is(err, io.EOF) {
			return Captured{}, io.EOF
		}
		c.index++
		if err != nil {
			return Captured{}, fmt.Errorf("%s: record %d is damaged: %w", c.name, c.index, err)
		}
		if rec.link != layers.LinkTypeEthernet {
			c.skipped[rec.link]++
			continue
		}
		return Captured{Index: c.index, Data: rec.data, Truncated: rec.caplen < rec.wirelen}, nil
	}
}

// Notes says what was skipped so far.
func (c *CaptureReader) Notes() []string {
	ns := slices.Clone(c.notes)
	for lt, n := range c.skipped {
		ns = append(ns, fmt.Sprintf("%s: %d records of a %v interface skipped (dragonc reads Ethernet)", c.name, n, lt))
	}
	slices.Sort(ns)
	return ns
}

// MaxCaptured bounds the frames ReadCapture keeps.
const MaxCaptured = 2_000_000

// ReadCapture reads the Ethernet frames of a pcap or pcapng stream into
// memory, at most MaxCaptured, with the notes of NewCaptureReader. The
// frames read before a damaged record are returned with the error.
func ReadCapture(name string, r io.Reader) ([]Captured, []string, error) {
	c, err := NewCaptureReader(name, r)
	if err != nil {
		return nil, nil, err
	}
	var out []Captured
	for {
		f, err := c.Next()
		if errors.Is(err, io.EOF) {
			return out, c.Notes(), nil
		}
		if err != nil {
			return out, c.Notes(), err
		}
		if len(out) == MaxCaptured {
			return out, append(c.Notes(), fmt.Sprintf("%s: more than %d frames; the first %d are read", name, MaxCaptured, MaxCaptured)), nil
		}
		out = append(out, f)
	}
}
