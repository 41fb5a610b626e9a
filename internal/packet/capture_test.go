package packet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// TestPcapngInterfaces: in a pcapng file with an Ethernet and a raw-IP
// interface, the Ethernet records are read and the others counted.
func TestPcapngInterfaces(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := w.AddInterface(pcapgo.NgInterface{Name: "tun0", LinkType: layers.LinkTypeRaw, SnapLength: 65535})
	if err != nil {
		t.Fatal(err)
	}
	frame := MustBuild(Spec{Src: []byte{10, 0, 0, 9}, Dst: []byte{10, 0, 0, 1}, Proto: ProtoUDP, SrcPort: 1, DstPort: 53})
	for i := 0; i < 3; i++ {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame), InterfaceIndex: 0}
		if err := w.WritePacket(ci, frame); err != nil {
			t.Fatal(err)
		}
		ci.InterfaceIndex = raw
		ci.CaptureLength, ci.Length = len(frame)-14, len(frame)-14
		if err := w.WritePacket(ci, frame[14:]); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	frames, notes, err := ReadCapture("mixed.pcapng", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 3 || frames[1].Index != 3 {
		t.Errorf("%d frames (second at record %d), want 3 Ethernet frames", len(frames), frames[1].Index)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "3 records of a Raw interface skipped") {
		t.Errorf("notes %q", notes)
	}
}

// TestEmptyPcapng: a section header with no interface and no frame is a
// valid, empty capture; a cut header is not.
func TestEmptyPcapng(t *testing.T) {
	shb := make([]byte, 28)
	binary.LittleEndian.PutUint32(shb[0:], 0x0A0D0D0A)
	binary.LittleEndian.PutUint32(shb[4:], 28)
	binary.LittleEndian.PutUint32(shb[8:], 0x1A2B3C4D)
	binary.LittleEndian.PutUint16(shb[12:], 1)
	binary.LittleEndian.PutUint64(shb[16:], ^uint64(0))
	binary.LittleEndian.PutUint32(shb[24:], 28)
	frames, notes, err := ReadCapture("empty.pcapng", bytes.NewReader(shb))
	if err != nil || len(frames) != 0 {
		t.Errorf("empty pcapng: %d frames, notes %q, %v", len(frames), notes, err)
	}
	var buf bytes.Buffer
	w, _ := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	w.Flush()
	if frames, _, err := ReadCapture("noframes.pcapng", &buf); err != nil || len(frames) != 0 {
		t.Errorf("a pcapng with an interface and no frame: %d, %v", len(frames), err)
	}
	if _, _, err := ReadCapture("cut.pcapng", bytes.NewReader(shb[:20])); err == nil {
		t.Error("a cut section header was read")
	}
}

// FuzzCaptureReader: any bytes read as a capture give frames, io.EOF or an
// error, never a panic, and the reader ends (every record uses input).
func FuzzCaptureReader(f *testing.F) {
	frame := MustBuild(Spec{Src: []byte{10, 0, 0, 9}, Dst: []byte{10, 0, 0, 1}, Proto: ProtoUDP, SrcPort: 1, DstPort: 53})
	var pc bytes.Buffer
	w := pcapgo.NewWriter(&pc)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	for i := range 3 {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(frame) - i, Length: len(frame)}, frame[:len(frame)-i])
	}
	f.Add(pc.Bytes())
	var ng bytes.Buffer
	nw, _ := pcapgo.NewNgWriter(&ng, layers.LinkTypeEthernet)
	raw, _ := nw.AddInterface(pcapgo.NgInterface{Name: "tun0", LinkType: layers.LinkTypeRaw, SnapLength: 65535})
	nw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}, frame)
	nw.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: 20, Length: 20, InterfaceIndex: raw}, frame[14:34])
	nw.Flush()
	f.Add(ng.Bytes())
	f.Add([]byte{0x0a, 0x0d, 0x0d, 0x0a})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := NewCaptureReader("fuzz", bytes.NewReader(b))
		if err != nil {
			return
		}
		last := 0
		for range len(b) + 1 {
			fr, err := c.Next()
			if err != nil {
				c.Notes()
				return
			}
			if fr.Index <= last || len(fr.Data) > len(b) {
				t.Fatalf("record %d after %d, %d bytes from %d", fr.Index, last, len(fr.Data), len(b))
			}
			last = fr.Index
		}
		t.Fatalf("more records than input bytes")
	})
}

// TestCaptureErrorsWrap: a damaged record's error wraps the reader's, so
// callers can test it with errors.Is.
func TestCaptureErrorsWrap(t *testing.T) {
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	frame := MustBuild(Spec{Src: []byte{10, 0, 0, 9}, Dst: []byte{10, 0, 0, 1}, Proto: ProtoUDP, SrcPort: 1, DstPort: 53})
	w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(frame), Length: len(frame)}, frame)
	_, _, err := ReadCapture("cut.pcap", bytes.NewReader(buf.Bytes()[:buf.Len()-5]))
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "cut.pcap: record 1 is damaged") {
		t.Errorf("got %v", err)
	}
}
