package dataplane

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
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
	busyPoll := fs.Bool("busy-poll", false, "busy-poll the device instead of sleeping")
	spin := fs.Duration("spin", 0, "how long a loop spins on empty rings before it sleeps (0: the default; negative: not at all)")
	adopt := fs.String("adopt", "", "sockets handed over, as a Handover in JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := Config{Ifindex: *ifindex, Socket: *socket, FanoutFD: *fanout, FilterFD: *filter, XSKMapFD: *xskmap, DevQueues: *devq, CopyMode: *copyMode, BusyPoll: *busyPoll, Spin: *spin}
	if *adopt != "" {
		cfg.Adopt = new(Handover)
		if err := json.Unmarshal([]byte(*adopt), cfg.Adopt); err != nil {
			fmt.Fprintf(os.Stderr, "dataplane: bad -adopt: %v\n", err)
			return 2
		}
	}
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
	// Signals are caught before the parent hears "ready", so that a stop
	// right after it still ends with the final counters.
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	srv, err := Start(st, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	for _, n := range srv.Notes {
		fmt.Printf("note: %s\n", n)
	}
	fmt.Printf("ready: %d queues\n", len(cfg.Queues))

	poke, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	go func() {
		for s := range sig {
			if s != syscall.SIGUSR1 {
				stop()
				return
			}
			select {
			case poke <- struct{}{}:
			case <-done:
				return
			}
		}
	}()
	// Standard output is the parent's, a line each: a report of the
	// counters as JSON, or the answer to a control line.
	var outMu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(r Report) {
		outMu.Lock()
		defer outMu.Unlock()
		os.Stdout.WriteString("report ")
		enc.Encode(r)
	}
	go func() {
		// Standard input carries the parent's control lines (a reload's
		// Update each), and closes when the parent is gone.
		in := bufio.NewReader(os.Stdin)
		for {
			line, err := in.ReadBytes('\n')
			if len(line) > 1 && err == nil {
				answer := srv.control(line, st.Tables)
				outMu.Lock()
				fmt.Printf("control %s\n", answer)
				outMu.Unlock()
			}
			if err != nil {
				stop()
				return
			}
		}
	}()
	if err := srv.Watch(emit, *every, poke, done); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	return 0
}
