package sovia

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Stream is one stream endpoint of a sovia.conf: how its connection
// travels (over a VI with the SOVIA protocol, or kernel TCP) and, for a
// VI, the protocol settings.
type Stream struct {
	Name      string
	Local     netip.AddrPort
	Remote    netip.AddrPort // the zero value for a listener (tcp only)
	Transport string         // "vi" or "tcp"
	VI        int            // the VI the connection uses (transport vi)
	Params    Params         // transport vi
	Reason    string         // why this transport (a comment in the file)
}

// WriteConf writes streams as a sovia.conf: one block per stream, in the
// order given.
//
//	stream repl {
//	    local 10.0.0.1:5000
//	    remote 10.0.0.2:6000  (none for a listener)
//	    transport vi  # the reason
//	    vi 1
//	    window 32
//	    ack_threshold 16
//	    descriptors 35
//	    chunk 32768
//	    copy_max 4096
//	    combine_max 2048
//	    combine_delay 100ms
//	}
//
// nodelay replaces the two combine lines when combining is off.
// descriptors is derived (Params.Descriptors) and checked on reading.
func WriteConf(w io.Writer, streams []Stream) error {
	bw := bufio.NewWriter(w)
	for i, s := range streams {
		if strings.ContainsAny(s.Name, " \t\r\n{}#") || s.Name == "" {
			return fmt.Errorf("sovia: stream name %q cannot be written", s.Name)
		}
		if i > 0 {
			bw.WriteString("\n")
		}
		fmt.Fprintf(bw, "stream %s {\n    local %s\n", s.Name, s.Local)
		if s.Remote.IsValid() {
			fmt.Fprintf(bw, "    remote %s\n", s.Remote)
		}
		fmt.Fprintf(bw, "    transport %s", s.Transport)
		if s.Reason != "" {
			fmt.Fprintf(bw, "  # %s", strings.Join(strings.Fields(s.Reason), " "))
		}
		bw.WriteString("\n")
		if s.Transport == "vi" {
			p := s.Params
			fmt.Fprintf(bw, "    vi %d\n    window %d\n    ack_threshold %d\n    descriptors %d\n    chunk %d\n    copy_max %d\n",
				s.VI, p.Window, p.AckThreshold, p.Descriptors(), p.ChunkSize, p.CopyMax)
			if p.NoDelay {
				bw.WriteString("    nodelay\n")
			} else {
				fmt.Fprintf(bw, "    combine_max %d\n    combine_delay %s\n", p.CombineMax, p.CombineDelay)
			}
		}
		bw.WriteString("}\n")
	}
	return bw.Flush()
}

// ReadConf reads a sovia.conf that WriteConf wrote (or a person edited):
// `#` starts a comment; every setting of a VI stream is required, and the
// settings must be ones a connection accepts.
func ReadConf(r io.Reader) ([]Stream, error) {
	var out []Stream
	var cur *Stream
	seen := map[string]bool{}
	given := 0 // the descriptors line of the current stream
	names := map[string]bool{}
	sc := bufio.NewScanner(r)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("sovia.conf:%d: %s", line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if cur == nil {
			if len(f) != 3 || f[0] != "stream" || f[2] != "{" {
				return nil, bad("want `stream NAME {`, got %q", strings.TrimSpace(text))
			}
			if names[f[1]] {
				return nil, bad("stream %s is given twice", f[1])
			}
			names[f[1]] = true
			cur = &Stream{Name: f[1]}
			seen = map[string]bool{}
			continue
		}
		if len(f) == 1 && f[0] == "}" {
			if err := finish(cur, seen, given); err != nil {
				return nil, bad("stream %s: %v", cur.Name, err)
			}
			out = append(out, *cur)
			cur = nil
			continue
		}
		key := f[0]
		if seen[key] {
			return nil, bad("%s is given twice", key)
		}
		seen[key] = true
		if key == "nodelay" {
			if len(f) != 1 {
				return nil, bad("nodelay takes no value")
			}
			cur.Params.NoDelay = true
			continue
		}
		if len(f) != 2 {
			return nil, bad("want `%s VALUE`", key)
		}
		v := f[1]
		var err error
		switch key {
		case "local":
			cur.Local, err = netip.ParseAddrPort(v)
		case "remote":
			cur.Remote, err = netip.ParseAddrPort(v)
		case "transport":
			if v != "vi" && v != "tcp" {
				err = fmt.Errorf("transport is vi or tcp")
			}
			cur.Transport = v
		case "vi":
			cur.VI, err = number(v, 1, 1<<16-1)
		case "window":
			cur.Params.Window, err = number(v, 1, 1<<20)
		case "ack_threshold":
			cur.Params.AckThreshold, err = number(v, 1, 1<<20)
		case "descriptors":
			given, err = number(v, 1, 1<<30) // checked against the others at the end
		case "chunk":
			cur.Params.ChunkSize, err = number(v, 1, 1<<30)
		case "copy_max":
			cur.Params.CopyMax, err = number(v, 0, 1<<30)
		case "combine_max":
			cur.Params.CombineMax, err = number(v, 0, 1<<30)
		case "combine_delay":
			cur.Params.CombineDelay, err = time.ParseDuration(v)
			if err == nil && (cur.Params.CombineDelay < 0 || cur.Params.CombineDelay > time.Minute) {
				err = fmt.Errorf("%s is not in 0..1m", v)
			}
		default:
			return nil, bad("unknown setting %q", key)
		}
		if err != nil {
			return nil, bad("%s: %v", key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, bad("stream %s has no closing }", cur.Name)
	}
	return out, nil
}

func finish(s *Stream, seen map[string]bool, given int) error {
	need := []string{"local", "transport"}
	if s.Transport == "vi" {
		need = append(need, "remote", "vi", "window", "ack_threshold", "descriptors", "chunk", "copy_max")
		if !s.Params.NoDelay {
			need = append(need, "combine_max", "combine_delay")
		}
	}
	for _, k := range need {
		if !seen[k] {
			return fmt.Errorf("%s is missing", k)
		}
	}
	if s.Transport != "vi" {
		for k := range seen {
			if k != "local" && k != "remote" && k != "transport" {
				return fmt.Errorf("a tcp stream takes only local, remote and transport, not %s", k)
			}
		}
		return nil
	}
	if s.Params.NoDelay && (seen["combine_max"] || seen["combine_delay"]) {
		return fmt.Errorf("nodelay turns combining off: drop combine_max and combine_delay")
	}
	if err := s.Params.check(); err != nil {
		return err
	}
	if want := s.Params.Descriptors(); given != want {
		return fmt.Errorf("descriptors %d, but window %d and ack_threshold %d need %d", given, s.Params.Window, s.Params.AckThreshold, want)
	}
	return nil
}

func number(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q is not a whole number in %d..%d", s, lo, hi)
	}
	return n, nil
}
