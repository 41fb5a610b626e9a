package sovia

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestConfRoundTrip: what WriteConf writes, ReadConf reads back the same,
// for VI streams with and without combining and for TCP streams, flows
// and listeners.
func TestConfRoundTrip(t *testing.T) {
	nd := PaperParams()
	nd.NoDelay, nd.CombineMax, nd.CombineDelay, nd.CopyMax = true, 0, 0, 512
	in := []Stream{
		{Name: "repl", Local: netip.MustParseAddrPort("10.0.0.1:5000"), Remote: netip.MustParseAddrPort("10.0.0.2:6000"), Transport: "vi", VI: 1, Params: PaperParams(), Reason: "faster"},
		{Name: "locks", Local: netip.MustParseAddrPort("10.0.0.1:5001"), Remote: netip.MustParseAddrPort("10.0.0.3:6001"), Transport: "vi", VI: 2, Params: nd},
		{Name: "far", Local: netip.MustParseAddrPort("10.0.0.1:5003"), Remote: netip.MustParseAddrPort("192.168.7.1:873"), Transport: "tcp", Reason: "not on\nthe subnet"},
		{Name: "sql", Local: netip.MustParseAddrPort("0.0.0.0:5432"), Transport: "tcp"},
	}
	var b bytes.Buffer
	if err := WriteConf(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadConf(&b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for i := range in {
		in[i].Reason = "" // comments are not read back
	}
	if d := cmp.Diff(in, out, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("round trip (-wrote +read):\n%s", d)
	}
	if err := WriteConf(&b, []Stream{{Name: "a b"}}); err == nil {
		t.Error("a name with a space was written")
	}
}

// TestConfErrors: a hand-edited file that a connection could not use is
// refused with its line.
func TestConfErrors(t *testing.T) {
	good := "stream a {\n    local 10.0.0.1:1\n    remote 10.0.0.2:2\n    transport vi\n    vi 1\n    window 32\n    ack_threshold 16\n    descriptors 35\n    chunk 32768\n    copy_max 4096\n    combine_max 2048\n    combine_delay 100ms\n}\n"
	if s, err := ReadConf(strings.NewReader(good)); err != nil || len(s) != 1 || s[0].Params.CombineDelay != 100*time.Millisecond {
		t.Fatalf("%v %v", s, err)
	}
	for _, c := range []struct{ edit, want string }{
		{"descriptors 35", "descriptors 34"},            // w + ceil(w/t) + 1 = 35
		{"ack_threshold 16", "ack_threshold 33"},        // t > w
		{"combine_max 2048", "combine_max 65536"},       // longer than a chunk
		{"window 32", "window x"},                       // not a number
		{"remote 10.0.0.2:2\n", ""},                     // a VI connects two ends
		{"vi 1", "vi 1\n    vi 2"},                      // twice
		{"}\n", ""},                                     // unclosed
		{"transport vi", "transport udp"},               // unknown transport
		{"copy_max 4096", "copy_max 4096\n    nodelay"}, // nodelay with combining settings
		{"stream a {", "stream a"},                      // no brace
		{"chunk 32768", "chunk 32768\n    colour blue"},
	} {
		src := strings.Replace(good, c.edit, c.want, 1)
		if s, err := ReadConf(strings.NewReader(src)); err == nil || !strings.HasPrefix(err.Error(), "sovia.conf:") {
			t.Errorf("%q -> %q: %v, %v", c.edit, c.want, s, err)
		}
	}
	twice := good + good
	if _, err := ReadConf(strings.NewReader(twice)); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a stream twice: %v", err)
	}
}

// FuzzReadConf: any input is read or refused without a panic, and what is
// read writes back to a file that reads the same.
func FuzzReadConf(f *testing.F) {
	var b bytes.Buffer
	WriteConf(&b, []Stream{
		{Name: "a", Local: netip.MustParseAddrPort("10.0.0.1:1"), Remote: netip.MustParseAddrPort("10.0.0.2:2"), Transport: "vi", VI: 1, Params: PaperParams()},
		{Name: "b", Local: netip.MustParseAddrPort("0.0.0.0:80"), Transport: "tcp", Reason: "listener"},
	})
	f.Add(b.String())
	f.Add("stream x {\n local 1.2.3.4:5\n transport tcp\n}\n")
	f.Fuzz(func(t *testing.T, src string) {
		s, err := ReadConf(strings.NewReader(src))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteConf(&out, s); err != nil {
			t.Fatalf("read %+v but cannot write it: %v", s, err)
		}
		again, err := ReadConf(&out)
		if err != nil {
			t.Fatalf("rewritten file refused: %v\n%s", err, out.String())
		}
		if d := cmp.Diff(s, again, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
			t.Fatalf("round trip:\n%s", d)
		}
	})
}
