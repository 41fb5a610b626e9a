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

// Serve accepts connections until the listener is closed, running app on
// each in a goroutine of its own and closing the connection when app
// returns. It returns the error that ended accepting (ErrClosed when the
// listener was closed).
func (b *backlog) Serve(app func(c *Conn)) error {
	for {
		c, err := b.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			app(c)
		}()
	}
}

// ServeStreams listens on h for the connection of every stream that
// travels over a VI, on the stream's local port with its settings, and
// serves each with the application app returns for the stream's name. A
// stream is one connection on one VI (the plan gave it one): it serves one
// connection at a time, holds one more that waits, and refuses the rest.
// It returns the listeners (close them to stop) and a line per stream
// saying what it serves.
func ServeStreams(h *RawHost, streams []Stream, app func(name string) func(*Conn)) ([]*RawListener, []string, error) {
	var ls []*RawListener
	var notes []string
	for _, s := range streams {
		if s.Transport != "vi" {
			continue
		}
		a := app(s.Name)
		if a == nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, nil, fmt.Errorf("sovia: stream %s has no application", s.Name)
		}
		l, err := h.listen(s.Local.Port(), s.Params, 1)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, nil, fmt.Errorf("sovia: stream %s: %w", s.Name, err)
		}
		ls = append(ls, l)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				a(c)
				c.Close()
			}
		}()
		notes = append(notes, fmt.Sprintf("stream %s: SOVIA on the software VI, port %d (window %d, ack threshold %d, copy up to %d B)",
			s.Name, s.Local.Port(), s.Params.Window, s.Params.AckThreshold, s.Params.CopyMax))
	}
	return ls, notes, nil
}
