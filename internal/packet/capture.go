package packet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

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

// ReadCapture reads every frame of a pcap or pcapng stream. A capture of
// another link type than Ethernet, or a damaged file, is an error; the
// frames read before a damaged record are returned with it.
func ReadCapture(name string, r io.Reader) ([]Captured, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%s: not a capture file (shorter than a header)", name)
	}
	var (
		read     func() ([]byte, int, int, error)
		linkType layers.LinkType
	)
	switch {
	case bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}):
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("%s: bad pcapng header: %v", name, err)
		}
		linkType = ng.LinkType()
		read = func() ([]byte, int, int, error) {
			d, ci, err := ng.ReadPacketData()
			return d, ci.CaptureLength, ci.Length, err
		}
	default:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: not a pcap or pcapng file: %v", name, err)
		}
		linkType = pr.LinkType()
		read = func() ([]byte, int, int, error) {
			d, ci, err := pr.ReadPacketData()
			return d, ci.CaptureLength, ci.Length, err
		}
	}
	if linkType != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("%s: link type %v is not Ethernet; dragonc reads Ethernet captures only", name, linkType)
	}
	var out []Captured
	for i := 1; ; i++ {
		d, caplen, wirelen, err := read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: record %d is damaged: %v", name, i, err)
		}
		out = append(out, Captured{Index: i, Data: append([]byte(nil), d...), Truncated: caplen < wirelen})
	}
}
