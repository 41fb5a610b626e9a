package run

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// unixPair is a connected pair of unix stream sockets.
func unixPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "control")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

// TestControlRefusesBadRequests: a request on the control socket that is
// not JSON, or names no operation the run has, is answered with one line
// of JSON that says why, and changes nothing (the serving is empty: a
// reload would fail on it).
func TestControlRefusesBadRequests(t *testing.T) {
	for _, tc := range []struct{ req, want string }{
		{"hello\n", "the request does not read"},
		{`{"op":"stop"}` + "\n", `no operation "stop"`},
		{strings.Repeat("x", 5000) + "\n", ""}, // over 4 KiB: no answer, the connection ends
	} {
		client, server := unixPair(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			(&serving{}).control(server)
		}()
		if _, err := client.Write([]byte(tc.req)); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(client).ReadString('\n')
		<-done
		if tc.want == "" {
			if line != "" {
				t.Errorf("an over-long request was answered: %q", line)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: no answer: %v", tc.req, err)
		}
		var res ReloadResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			t.Fatalf("%q: the answer is not JSON: %q", tc.req, line)
		}
		if res.Applied || !strings.Contains(res.Error, tc.want) {
			t.Errorf("%q: answered %+v, want an error with %q", tc.req, res, tc.want)
		}
	}
}
