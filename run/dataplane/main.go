package dataplane

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Main is the program `dragonc run` builds around the generated code: it
// serves st with the sockets and programs its parent prepared (the eBPF
// programs arrive as inherited file descriptors), reports the counters
// every -every and on SIGUSR1, and stops on SIGINT or SIGTERM, or when its
// standard input closes (the parent is gone). It returns the exit status.
func Main(st *Stack, args []string) int {
	fs := flag.NewFlagSet("dataplane", flag.ContinueOnError)
	ifindex := fs.Int("ifindex", 0, "interface index")
	queues := fs.String("queues", "", "queues as ID:CORE,...")
	fanout := fs.Int("fanout-fd", -1, "fanout program descriptor")
	filter := fs.Int("filter-fd", -1, "socket filter program descriptor")
	every := fs.Duration("every", time.Second, "report interval (0: only on SIGUSR1 and at the end)")
	socket := fs.String("socket", AFPacket, "socket kind: packet or xdp")
	xskmap := fs.Int("xskmap-fd", -1, "XSKMAP descriptor (xdp)")
	devq := fs.Int("devqueues", 1, "the device's receive queues (xdp)")
	copyMode := fs.Bool("copy", false, "AF_XDP in copy mode even where zero-copy is possible")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := Config{Ifindex: *ifindex, Socket: *socket, FanoutFD: *fanout, FilterFD: *filter, XSKMapFD: *xskmap, DevQueues: *devq, CopyMode: *copyMode}
	for _, f := range strings.Split(*queues, ",") {
		id, core, ok := strings.Cut(f, ":")
		a, err1 := strconv.Atoi(id)
		b, err2 := strconv.Atoi(core)
		if !ok || err1 != nil || err2 != nil {
			fmt.Fprintf(os.Stderr, "dataplane: bad queue %q\n", f)
			return 2
		}
		cfg.Queues = append(cfg.Queues, Queue{ID: a, Core: b})
	}
	srv, err := Start(st, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	for _, n := range srv.Notes {
		fmt.Printf("note: %s\n", n)
	}
	fmt.Printf("ready: %d queues\n", len(cfg.Queues))

	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			if _, err := os.Stdin.Read(b[:]); err != nil {
				close(gone)
				return
			}
		}
	}()
	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGUSR1 {
				srv.Report(os.Stdout)
				continue
			}
		case <-gone:
		case <-tick:
			srv.Report(os.Stdout)
			continue
		}
		break
	}
	err = srv.Stop()
	fmt.Println("final:")
	srv.Report(os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	return 0
}
