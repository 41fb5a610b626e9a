package verify

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dragonc/dragonc/backends/gofallback"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/packet"
	"github.com/dragonc/dragonc/lpg"
)

// Frames are streamed: captures are read one record at a time, generated
// frames are made one at a time, and at most inFlight frames wait for the
// generated code's verdict, so verify and trace run in constant memory
// whatever the size of their input.
const inFlight = 4096

type item struct {
	frame  []byte
	crc    bool
	source string
}

// frames calls each for every frame of the captures, in file order, then
// for the n frames of more. It returns notes on what the captures held; a
// damaged record ends its file with a note, unless it is the file's first,
// which is an error. progress, when not nil, gets the fraction done,
// counting a capture by its bytes and a frame of more as genWeight bytes.
// The path "-" reads stdin.
func frames(paths []string, stdin io.Reader, n int, more func(int) item, progress func(float64), each func(item) error) ([]string, error) {
	const genWeight = 128
	var total, done int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	total += int64(n) * genWeight
	report := func(n int) {
		if progress != nil && total > 0 && n%1024 == 0 {
			progress(min(float64(done)/float64(total), 1))
		}
	}
	var notes []string
	for _, path := range paths {
		var f io.ReadCloser
		fromStdin := path == "-"
		if fromStdin {
			if stdin == nil {
				return notes, fmt.Errorf("no standard input to read a capture from")
			}
			f, path = io.NopCloser(stdin), "stdin"
		} else {
			file, err := os.Open(path)
			if err != nil {
				return notes, fmt.Errorf("%s: %w", path, err)
			}
			f = file
		}
		start := done
		cr, err := packet.NewCaptureReader(path, &counter{f, &done})
		if err != nil {
			f.Close()
			return notes, err
		}
		read, trunc := 0, 0
		for {
			c, err := cr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil && read == 0 {
				f.Close()
				return notes, err
			}
			if err != nil {
				notes = append(notes, fmt.Sprintf("%v (the %d frames before it are verified)", err, read))
				break
			}
			read++
			if c.Truncated {
				trunc++
			}
			if err := each(item{c.Data, true, fmt.Sprintf("%s #%d", path, c.Index)}); err != nil {
				f.Close()
				return notes, err
			}
			report(read)
		}
		f.Close()
		if fi, err := os.Stat(path); err == nil && !fromStdin {
			done = start + fi.Size()
		}
		notes = append(notes, cr.Notes()...)
		notes = append(notes, fmt.Sprintf("%s: %d frames (%d cut by the capture's snap length)", path, read, trunc))
	}
	for i := range n {
		if err := each(more(i)); err != nil {
			return notes, err
		}
		done += genWeight
		report(i)
	}
	if progress != nil {
		progress(1)
	}
	return notes, nil
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n *int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// fallback is the generated Go code, built with a helper main program and
// running as a child process that answers one verdict line per frame.
type fallback struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	in     *bufio.Writer
	out    *bufio.Reader
	stderr strings.Builder
	bit    map[string]uint64
}

// startFallback generates the fallback into work, builds it and starts it.
func startFallback(r *embed.Result, st *lpg.Stack, work string) (*fallback, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, fmt.Errorf("running the generated fallback needs the go command (or pass --fallback=false)")
	}
	files := map[string][]byte{"go.mod": []byte("module dragoncverify\n\ngo 1.21\n"), "main.go": []byte(helper)}
	if err := gofallback.AddTo(files, "dragoncverify", "fallback", "verify", r, st); err != nil {
		return nil, err
	}
	if err := gofallback.WriteTree(work, files); err != nil {
		return nil, err
	}
	bin := filepath.Join(work, "helper")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = work
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the generated fallback: %w\n%s", err, out)
	}
	p := &fallback{cmd: exec.Command(bin), bit: map[string]uint64{}}
	for i, f := range gofallback.FlagOrder(r) {
		p.bit[f] = 1 << uint(i)
	}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the generated fallback: %w", err)
	}
	p.in = bufio.NewWriterSize(p.stdin, 64<<10)
	p.out = bufio.NewReaderSize(stdout, 64<<10)
	return p, nil
}

// send writes one frame with the queue the NIC chose and the descriptor
// flags it reported.
func (p *fallback) send(it item, queue int, reported [][2]string) error {
	var flags uint64
	for _, rp := range reported {
		if rp[1] == "true" {
			flags |= p.bit[rp[0]]
		}
	}
	var hdr [17]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(it.frame)))
	binary.LittleEndian.PutUint32(hdr[4:], uint32(int32(queue)))
	binary.LittleEndian.PutUint64(hdr[8:], flags)
	if it.crc {
		hdr[16] = 1
	}
	p.in.Write(hdr[:])
	_, err := p.in.Write(it.frame)
	return err
}

// inOrder pairs each frame's result with the generated code's verdict and
// hands both to finish in input order. Without a fallback, finish runs at
// once; with one, a goroutine reads the verdicts while frames are sent.
type inOrder[T any] struct {
	fb     *fallback
	finish func(T, string)
	ch     chan pending[T]
	wg     sync.WaitGroup
	err    error // the reader's, read after wg.Wait
	sent   int
	closed bool
}

type pending[T any] struct {
	v    T
	sent bool
}

func newInOrder[T any](fb *fallback, finish func(T, string)) *inOrder[T] {
	o := &inOrder[T]{fb: fb, finish: finish}
	if fb == nil {
		return o
	}
	o.ch = make(chan pending[T], inFlight)
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for p := range o.ch {
			if o.err != nil {
				continue // drain, so the sender never blocks
			}
			verdict := ""
			if p.sent {
				line, err := fb.out.ReadString('\n')
				if err != nil {
					o.err = fmt.Errorf("the generated fallback stopped answering after %d frames", o.sent)
					continue
				}
				verdict = strings.TrimSuffix(line, "\n")
				o.sent++
			}
			finish(p.v, verdict)
		}
	}()
	return o
}

// add queues a frame's result; when send is set the frame goes to the
// generated code with its queue and flags.
func (o *inOrder[T]) add(v T, it item, send bool, queue int, reported [][2]string) error {
	if o.fb == nil {
		o.finish(v, "")
		return nil
	}
	p := pending[T]{v, send}
	select {
	case o.ch <- p:
	default:
		// The reader waits for verdicts still in our buffer: hand them
		// over before waiting for room.
		if err := o.fb.in.Flush(); err != nil {
			return o.broken(err)
		}
		o.ch <- p
	}
	if send {
		if err := o.fb.send(it, queue, reported); err != nil {
			return o.broken(err)
		}
	}
	return nil
}

func (o *inOrder[T]) broken(err error) error {
	o.stop()
	return fmt.Errorf("the generated fallback failed: %w\n%s", err, o.fb.stderr.String())
}

// stop ends the helper; it may be called more than once.
func (o *inOrder[T]) stop() error {
	if o.fb == nil || o.closed {
		return nil
	}
	o.closed = true
	o.fb.stdin.Close()
	close(o.ch)
	o.wg.Wait()
	return o.fb.cmd.Wait()
}

// close waits for the last verdicts and for the helper to exit.
func (o *inOrder[T]) close() error {
	if o.fb == nil || o.closed {
		return nil
	}
	ferr := o.fb.in.Flush()
	werr := o.stop()
	switch {
	case o.err != nil:
		return fmt.Errorf("%w: %v\n%s", o.err, werr, o.fb.stderr.String())
	case ferr != nil || werr != nil:
		return fmt.Errorf("the generated fallback failed: %w\n%s", errors.Join(ferr, werr), o.fb.stderr.String())
	}
	return nil
}

// helper runs the generated fallback on frames from stdin and prints each
// verdict in the reference interpreter's notation. It flushes whenever its
// input runs dry, so a caller may wait for verdicts while it sends.
const helper = `// Code generated by dragonc verify. DO NOT EDIT.
package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"os"

	"dragoncverify/fallback"
)

func main() {
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer w.Flush()
	var hdr [17]byte
	var b []byte
	for {
		if r.Buffered() == 0 {
			w.Flush()
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return
			}
			os.Exit(2)
		}
		n := binary.LittleEndian.Uint32(hdr[0:])
		q := int32(binary.LittleEndian.Uint32(hdr[4:]))
		flags := binary.LittleEndian.Uint64(hdr[8:])
		if cap(b) < int(n) {
			b = make([]byte, n)
		}
		b = b[:n]
		if _, err := io.ReadFull(r, b); err != nil {
			os.Exit(2)
		}
		v := fallback.Process(int(q), b, fallback.Meta{CRCOK: hdr[16] == 1, Flags: fallback.Flags(flags)})
		w.WriteString(v.String() + "\n")
	}
}
`
