package live

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/dragonc/dragonc/bench/sovialat"
	"github.com/dragonc/dragonc/internal/netns"
	"github.com/dragonc/dragonc/sovia"
)

// childEcho is calibrate's echo server, in a process of its own: the
// client's process is then no server's, whichever carries the echo. Go
// goroutines of one process wake one another without a thread's sleep and
// wake-up when the process has a spinning scheduler thread, so an echo
// served in the client's process answers sooner than one served by
// another process (dragonc run's helper): measured here, a package sovia
// echo took 6 µs one way in the client's process and 16-18 µs in one of
// its own, kernel TCP's 7-8 µs and 11-22 µs.
const childEcho = "echo"

// echoArgs are the echo child's arguments: the namespace to serve in, the
// TCP echo's address, the address of a second TCP echo whose reads spin
// ("-" for none) and how long (sovialat.SpinReads), and the VI echo's
// SOVIA settings as JSON ("-" for no VI echo).
const echoArgs = 5

// echoChild serves calibrate's echoes: a TCP echo on addr, a spinning
// one on spinAddr and, when params is not "-", a SOVIA echo on
// serverIf's software VI (port calibrationPort), in namespace path,
// until its standard input closes. It says "ready" on standard output
// once all listen.
func echoChild(args []string) error {
	if len(args) != echoArgs {
		return fmt.Errorf("want %d arguments, got %d", echoArgs, len(args))
	}
	// The sockets are made on this thread, in the namespace; they stay
	// there wherever the goroutines that serve them run.
	runtime.LockOSThread()
	spin, err := time.ParseDuration(args[3])
	if err != nil {
		return fmt.Errorf("the TCP echo's spin: %w", err)
	}
	if err := netns.Join(args[0]); err != nil {
		return err
	}
	if err := serveTCPEcho(args[1], 0); err != nil {
		return err
	}
	if args[2] != "-" {
		if err := serveTCPEcho(args[2], spin); err != nil {
			return err
		}
	}
	if args[4] != "-" {
		var p sovia.Params
		if err := json.Unmarshal([]byte(args[4]), &p); err != nil {
			return fmt.Errorf("the SOVIA settings: %w", err)
		}
		h, err := sovia.OpenHost(serverIf)
		if err != nil {
			return err
		}
		l, err := h.Listen(calibrationPort, p)
		if err != nil {
			return err
		}
		echoEach(l, func(c net.Conn) (io.ReadWriter, error) { return c, nil })
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // until the parent closes it, or is gone
	return nil
}

// serveTCPEcho serves a TCP echo on addr, its reads spinning for spin
// (none: 0).
func serveTCPEcho(addr string, spin time.Duration) error {
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return err
	}
	echoEach(l, func(c net.Conn) (io.ReadWriter, error) { return sovialat.SpinReads(c.(*net.TCPConn), spin) })
	return nil
}

// echoEach echoes each connection l accepts, read and written through
// what wrap makes of it, in a goroutine of its own, until l is closed.
func echoEach(l net.Listener, wrap func(net.Conn) (io.ReadWriter, error)) {
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if rw, err := wrap(c); err == nil {
					echoLoop(rw)
				}
			}()
		}
	}()
}

// echoLoop echoes c's bytes as package sovia's echo application does
// (io.Copy through a 32 KiB buffer: a read, then a write of what it
// read), for either provider. A TCP connection copied to itself with
// io.Copy would be spliced instead (TCPConn.ReadFrom: splice(2) through
// a pipe, the bytes never in the process), which measured here twice the
// echoed bandwidth of the same TCP connection read and written: a
// property of the echo, not of the transport.
func echoLoop(c io.ReadWriter) {
	io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 32<<10))
}

// startEcho starts the echo child in namespace ns: self is how to start
// this program as it (Child runs first in its main). The TCP echoes
// listen on tcpAddr and, their reads spinning for tcpSpin, on spinAddr
// ("" for none); vi is the VI echo's settings, nil for none. stop ends
// it.
func startEcho(self []string, ns, tcpAddr, spinAddr string, tcpSpin time.Duration, vi *sovia.Params) (stop func(), err error) {
	if spinAddr == "" {
		spinAddr = "-"
	}
	p := "-"
	if vi != nil {
		b, err := json.Marshal(vi)
		if err != nil {
			return nil, err
		}
		p = string(b)
	}
	cmd := exec.Command(self[0], append(self[1:], filepath.Join(netns.Dir, ns), tcpAddr, spinAddr, tcpSpin.String(), p)...)
	cmd.Env = append(os.Environ(), childEnv+"="+childEcho)
	// No Pdeathsig: it is sent when the forking thread ends, and
	// netns.In ends the threads it ran on, which may be that one. The
	// child ends when its standard input closes, as it does when this
	// process is gone.
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("the echo server: %w", err)
	}
	exited := make(chan struct{})
	stop = func() {
		in.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("it said %q", line)
		}
		ready <- err
		io.Copy(io.Discard, out)
	}()
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("not ready after 30 s")
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("the echo server (%s): %w", self[0], err)
	}
	return stop, nil
}
