package sovia

import (
	"fmt"
	"io"
)

// Apps are the built-in applications a stack file can name (app "echo")
// for a stream endpoint that travels over a VI: echo returns every byte
// to the sender (RFC 862), discard reads and drops them (RFC 863).
var Apps = map[string]func(c *Conn){
	"echo":    func(c *Conn) { io.Copy(c, c) },
	"discard": func(c *Conn) { io.Copy(io.Discard, c) },
}

// ServeStreams listens on h for the connection of every stream that
// travels over a VI, on the stream's local port with its settings, and
// serves each with the application app returns for the stream's name. A
// stream is one connection on one VI (the plan gave it one): it serves one
// connection at a time, holds one more that waits, and refuses the rest.
// The listeners close with the host.
func ServeStreams(h *RawHost, streams []Stream, app func(name string) func(*Conn)) error {
	var ls []*RawListener
	for _, s := range streams {
		if s.Transport != "vi" {
			continue
		}
		a := app(s.Name)
		if a == nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("sovia: stream %s has no application", s.Name)
		}
		l, err := h.listen(s.Local.Port(), s.Params, 1)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return fmt.Errorf("sovia: stream %s: %w", s.Name, err)
		}
		ls = append(ls, l)
		go func() {
			for {
				c, err := l.AcceptConn()
				if err != nil {
					return
				}
				a(c)
				c.Close()
			}
		}()
	}
	return nil
}
