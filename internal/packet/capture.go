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

// MaxCaptured bounds the frames read from one capture: every frame is
// held in memory while it is verified.
const MaxCaptured = 2_000_000

// ReadCapture reads the Ethernet frames of a pcap or pcapng stream, at most
// MaxCaptured. A pcap file of another link type is an error; in a pcapng
// file, records of interfaces that are not Ethernet are skipped and
// counted in the notes. The frames read before a damaged record are
// returned with the error.
func ReadCapture(name string, r io.Reader) ([]Captured, []string, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: not a capture file (shorter than a header)", name)
	}
	type record struct {
		data            []byte
		caplen, wirelen int
		link            layers.LinkType
	}
	var read func() (record, error)
	switch {
	case bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}):
		opts := pcapgo.DefaultNgReaderOptions
		opts.WantMixedLinkType = true // each record says its interface's type
		ng, err := pcapgo.NewNgReader(br, opts)
		if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			// A section header and nothing else: a valid, empty capture.
			return nil, []string{fmt.Sprintf("%s: an empty capture (no interface, no frame)", name)}, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: bad pcapng header: %v", name, err)
		}
		first := ng.LinkType()
		read = func() (record, error) {
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
			return nil, nil, fmt.Errorf("%s: not a pcap or pcapng file: %v", name, err)
		}
		if lt := pr.LinkType(); lt != layers.LinkTypeEthernet {
			return nil, nil, fmt.Errorf("%s: link type %v is not Ethernet; dragonc reads Ethernet captures only", name, lt)
		}
		read = func() (record, error) {
			d, ci, err := pr.ReadPacketData()
			return record{d, ci.CaptureLength, ci.Length, layers.LinkTypeEthernet}, err
		}
	}
	var out []Captured
	skipped := map[layers.LinkType]int{}
	notes := func() []string {
		var ns []string
		for lt, n := range skipped {
			ns = append(ns, fmt.Sprintf("%s: %d records of a %v interface skipped (dragonc reads Ethernet)", name, n, lt))
		}
		slices.Sort(ns)
		return ns
	}
	for i := 1; ; i++ {
		rec, err := read()
		if errors.Is(err, io.EOF) {
			return out, notes(), nil
		}
		if err != nil {
			return out, notes(), fmt.Errorf("%s: record %d is damaged: %v", name, i, err)
		}
		if rec.link != layers.LinkTypeEthernet {
			skipped[rec.link]++
			continue
		}
		if len(out) == MaxCaptured {
			return out, append(notes(), fmt.Sprintf("%s: more than %d frames; the first %d are read", name, MaxCaptured, MaxCaptured)), nil
		}
		out = append(out, Captured{Index: i, Data: append([]byte(nil), rec.data...), Truncated: rec.caplen < rec.wirelen})
	}
}
