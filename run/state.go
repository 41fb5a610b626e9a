package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/internal/outdir"
	"github.com/dragonc/dragonc/run/dataplane"
)

// A running stack leaves its state where `dragonc status` and `dragonc
// stop` find it, as xdp-tools and systemd services do: a directory per
// interface under RunDir (state.json, the latest report, the log of a
// detached run, a hardware plan's undo record), and, for a detached run,
// its eBPF programs, maps and links pinned under BPFDir, so that they
// outlive the process and `stop` can remove them after a crash.

// Source is what a run reads again when it reloads: the stack file (an
// absolute path) and how it was planned (the NIC, and the command line's
// embed flags).
type Source struct {
	Stack string   `json:"stack"`
	NIC   string   `json:"nic"`
	Flags []string `json:"flags,omitempty"`
}

// RunDir is where runs keep their state: $DRAGONC_RUN_DIR, or /run/dragonc.
func RunDir() string {
	if d := os.Getenv("DRAGONC_RUN_DIR"); d != "" {
		return d
	}
	return "/run/dragonc"
}

// BPFDir is where a detached run pins its eBPF objects: $DRAGONC_BPF_DIR,
// or /sys/fs/bpf/dragonc (a bpf file system must be mounted there).
func BPFDir() string {
	if d := os.Getenv("DRAGONC_BPF_DIR"); d != "" {
		return d
	}
	return "/sys/fs/bpf/dragonc"
}

// State is a run's state.json.
type State struct {
	Iface   string    `json:"iface"`
	Ifindex int       `json:"ifindex"`
	Stack   string    `json:"stack"`
	NIC     string    `json:"nic"`
	PID     int       `json:"pid"`
	Start   uint64    `json:"pid_start"` // the process's start time (clock ticks since boot), against PID reuse
	Started time.Time `json:"started"`
	// Detached is set for `run --detach`: its eBPF objects are pinned.
	Detached bool `json:"detached"`
	Serving  bool `json:"serving"`
	// Socket is the socket kind that serves ("xdp", "packet").
	Socket string `json:"socket,omitempty"`
	// SocketsPerQueue is how many sockets each receive loop reads: one
	// AF_PACKET socket, or an AF_XDP socket on each device queue.
	SocketsPerQueue int            `json:"sockets_per_queue,omitempty"`
	Queues          []QueueState   `json:"queues"`
	HelperPID       int            `json:"helper_pid,omitempty"`
	Programs        []ProgramState `json:"programs,omitempty"`
	// Pinned is the directory of the pinned objects; Hardware the
	// directory of a hardware plan's linux.sh and its undo record.
	Pinned   string `json:"pinned,omitempty"`
	Hardware string `json:"hardware,omitempty"`
	Metrics  string `json:"metrics,omitempty"` // the Prometheus endpoint
	// Control is the run's control socket (dragonc reload); Source what
	// it reads again when asked to reload; Reloads how many reloads were
	// asked for.
	Control string  `json:"control,omitempty"`
	Source  *Source `json:"source,omitempty"`
	Reloads int     `json:"reloads,omitempty"`
	// Netns is the inode of the run's network namespace.
	Netns string `json:"netns"`
	name  string // the state's name (stateName)
}

// QueueState is a receive loop: its plan queue and core.
type QueueState struct {
	ID   int `json:"id"`
	Core int `json:"core"`
}

// ProgramState is an eBPF program run attached.
type ProgramState struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"`
	Type string `json:"type"`
}

// Interface names are a network namespace's own: a run's state is kept
// under its interface's name in the host's namespace, and under
// IFACE@INODE (the namespace's inode number) in any other, so that two
// namespaces' eth0 never meet.

// netnsInode is the inode of the calling thread's network namespace.
func netnsInode(path string) string {
	l, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(l, "net:["), "]")
}

// stateName is the name of iface's state in the calling thread's
// namespace.
func stateName(iface string) string {
	here := netnsInode("/proc/thread-self/ns/net")
	if here == "" || here == netnsInode("/proc/1/ns/net") {
		return iface
	}
	return iface + "@" + here
}

// validIface refuses names no interface can have (IFNAMSIZ is 16 with
// the NUL; no slash, not . or ..), which would name another file.
func validIface(iface string) error {
	if iface == "" || len(iface) > 15 || iface == "." || iface == ".." || strings.ContainsAny(iface, "/@\x00 ") {
		return usage("%q is not an interface name", iface)
	}
	return nil
}

// resolve finds the state name of iface: the calling namespace's, or, if
// it has none and one other namespace has a run on an interface of that
// name, that one (the README's recipe starts a run with ip netns exec
// and stops it from the host).
func resolve(iface string) (string, error) {
	if err := validIface(iface); err != nil {
		return "", err
	}
	name := stateName(iface)
	if _, err := os.Stat(filepath.Join(RunDir(), name, "state.json")); err == nil {
		return name, nil
	}
	names, _ := Running()
	var other []string
	for _, n := range names {
		if strings.HasPrefix(n, iface+"@") || n == iface {
			other = append(other, n)
		}
	}
	if len(other) == 1 {
		return other[0], nil
	}
	return name, nil
}

// stateDir is the state directory of a state name.
func stateDir(name string) string { return filepath.Join(RunDir(), name) }

// procStart reads a live process's start time (field 22 of
// /proc/PID/stat); a zombie is no longer alive.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// Name is what names the state: the interface, or IFACE@NETNS.
func (s *State) Name() string { return s.name }

// Alive reports whether the run that wrote s still runs.
func (s *State) Alive() bool {
	start, ok := procStart(s.PID)
	return ok && start == s.Start
}

// writeJSON replaces path with v atomically (outdir.Replace: a temporary
// file of its own, renamed, removed on failure).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return outdir.Replace(path, append(b, '\n'), func(f *os.File) error { return f.Chmod(0o644) })
}

// ReadState reads the state of the run on iface (an interface of this
// network namespace, or a name Running lists); os.ErrNotExist if none.
func ReadState(iface string) (*State, error) {
	name, err := nameOf(iface)
	if err != nil {
		return nil, err
	}
	return readState(name)
}

// nameOf resolves an interface, or takes a name Running listed as it is.
func nameOf(iface string) (string, error) {
	if i := strings.IndexByte(iface, '@'); i > 0 {
		if err := validIface(iface[:i]); err != nil {
			return "", err
		}
		return iface, nil
	}
	return resolve(iface)
}

func readState(name string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(stateDir(name), "state.json"))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(stateDir(name), "state.json"), err)
	}
	s.name = name
	return &s, nil
}

// LatestReport reads the last counters the run on iface wrote, and when.
func LatestReport(iface string) (*dataplane.Report, time.Time, error) {
	name, err := nameOf(iface)
	if err != nil {
		return nil, time.Time{}, err
	}
	path := filepath.Join(stateDir(name), "report.json")
	fi, err := os.Stat(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	var r dataplane.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, time.Time{}, err
	}
	return &r, fi.ModTime(), nil
}

// Running lists the interfaces that have a run's state, sorted.
func Running() ([]string, error) {
	ents, err := os.ReadDir(RunDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(RunDir(), e.Name(), "state.json")); e.IsDir() && err == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// claimState makes the state directory of a new run on iface. A live run
// there is refused; what a dead one left is cleaned up first (as stop
// would), and said.
func (sv *serving) claimState() error {
	if err := validIface(sv.opt.Iface); err != nil {
		return err
	}
	name := stateName(sv.opt.Iface)
	dir := stateDir(name)
	lock, err := lockState(name)
	if err != nil {
		return err
	}
	if old, err := readState(name); err == nil {
		if old.Alive() {
			lock.Close()
			return usage("dragonc run already serves %s (pid %d, stack %s); dragonc stop %s first", sv.opt.Iface, old.PID, old.Stack, sv.opt.Iface)
		}
		msgs, err := cleanup(old)
		for _, m := range msgs {
			sv.out.note("note", "an earlier run on %s (pid %d) is gone: %s", sv.opt.Iface, old.PID, m)
		}
		if err != nil {
			lock.Close()
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		lock.Close()
		return fmt.Errorf("making the state directory: %w", err)
	}
	start, _ := procStart(os.Getpid())
	sv.state = &State{Iface: sv.opt.Iface, Ifindex: sv.ifc.Index, Stack: sv.name, NIC: sv.r.Plan.NIC, PID: os.Getpid(), Start: start,
		Started: time.Now().UTC().Truncate(time.Second), Detached: sv.opt.Pin, Netns: netnsInode("/proc/thread-self/ns/net"), name: name}
	for _, q := range sv.queues {
		sv.state.Queues = append(sv.state.Queues, QueueState{q.ID, q.Core})
	}
	if sv.opt.Pin {
		sv.state.Pinned = filepath.Join(BPFDir(), name)
	}
	// The lock is held for the run's life: stop cleans up only what no
	// run holds.
	sv.cleanup = append(sv.cleanup, func() { os.RemoveAll(dir); lock.Close() })
	return sv.saveState()
}

func (sv *serving) saveState() error {
	if sv.state == nil {
		return nil
	}
	return writeJSON(filepath.Join(stateDir(sv.state.name), "state.json"), sv.state)
}

// saveReport keeps the latest counters for `dragonc status`.
func (sv *serving) saveReport(r dataplane.Report) {
	if sv.state != nil {
		writeJSON(filepath.Join(stateDir(sv.state.name), "report.json"), r)
	}
}

// pin pins the eBPF objects of a detached run under BPFDir()/IFACE, so
// that they outlive it; it returns what undoes the pins.
func (sv *serving) pin(links []link.Link, progs []*ebpf.Program, maps []*ebpf.Map) (func(), error) {
	dir := sv.state.Pinned
	if err := mountBPF(filepath.Dir(BPFDir())); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pinning in %s (is a bpf file system mounted at %s? mount -t bpf bpf %s): %w", dir, filepath.Dir(dir), filepath.Dir(dir), err)
	}
	undo := func() {
		// A link a handover carries to the next serve is pinned again
		// by it: Unpin forgets the path, which Pin would otherwise
		// take for pinned still.
		for _, l := range links {
			l.Unpin()
		}
		os.RemoveAll(dir)
	}
	for i, l := range links {
		if err := l.Pin(filepath.Join(dir, "link"+strconv.Itoa(i))); err != nil {
			undo()
			return nil, fmt.Errorf("pinning a link in %s (a bpf file system?): %w", dir, err)
		}
	}
	for i, p := range progs {
		if err := p.Pin(filepath.Join(dir, "prog"+strconv.Itoa(i))); err != nil {
			undo()
			return nil, fmt.Errorf("pinning a program: %w", err)
		}
	}
	for i, m := range maps {
		if m == nil {
			continue
		}
		if err := m.Pin(filepath.Join(dir, "map"+strconv.Itoa(i))); err != nil {
			undo()
			return nil, fmt.Errorf("pinning a map: %w", err)
		}
	}
	return undo, nil
}

// programStates describes the attached programs.
func programStates(progs []*ebpf.Program) []ProgramState {
	var out []ProgramState
	for _, p := range progs {
		info, err := p.Info()
		if err != nil {
			continue
		}
		id, _ := info.ID()
		out = append(out, ProgramState{Name: info.Name, ID: uint32(id), Type: info.Type.String()})
	}
	return out
}

// Stop stops the run on iface and removes what it left: it signals the
// run (SIGTERM, then SIGKILL after wait), then removes its pinned eBPF
// objects (which detaches them), undoes a hardware plan it applied, and
// removes its state. Stopping an interface nothing serves is no error.
// It returns what it did, a line each.
func Stop(iface string, wait time.Duration) ([]string, error) {
	s, err := ReadState(iface)
	if errors.Is(err, os.ErrNotExist) {
		return []string{"nothing runs on " + iface}, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []string
	if s.Alive() {
		if err := s.signal(syscall.SIGTERM); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(wait)
		for s.Alive() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if s.Alive() {
			s.signal(syscall.SIGKILL)
			for i := 0; s.Alive() && i < 100; i++ {
				time.Sleep(20 * time.Millisecond)
			}
			msgs = append(msgs, fmt.Sprintf("stopped pid %d with SIGKILL (no exit within %v of SIGTERM)", s.PID, wait))
		} else {
			msgs = append(msgs, fmt.Sprintf("stopped pid %d", s.PID))
		}
	}
	// What the run left is removed under its lock: if a new run took the
	// interface meanwhile, it holds the lock and its state is its own.
	lock, err := lockState(s.name)
	if err != nil {
		return msgs, err
	}
	defer lock.Close()
	if cur, err := readState(s.name); err != nil || cur.PID != s.PID || cur.Start != s.Start {
		return msgs, nil // the run removed its own state, or another took its place
	}
	more, err := cleanup(s)
	return append(msgs, more...), err
}

// signal sends sig to the run of s through a pidfd opened after its start
// time was checked, so that a pid the kernel gave to another process
// since is never signalled.
func (s *State) signal(sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(s.PID, 0)
	if err != nil {
		return nil // gone
	}
	defer unix.Close(fd)
	if !s.Alive() {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signalling pid %d: %w", s.PID, err)
	}
	return nil
}

// lockState takes the lock of a state name (RunDir/NAME.lock, flock): a
// run holds it for its life. A live run's lock is refused at once.
func lockState(name string) (*os.File, error) {
	if err := os.MkdirAll(RunDir(), 0o755); err != nil {
		return nil, fmt.Errorf("making %s: %w", RunDir(), err)
	}
	f, err := os.OpenFile(filepath.Join(RunDir(), name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, usage("another dragonc run holds %s (%s)", name, f.Name())
		}
		return nil, err
	}
	return f, nil
}

// cleanup removes what the dead run of s left.
func cleanup(s *State) ([]string, error) {
	var msgs []string
	if s.Pinned != "" {
		if _, err := os.Stat(s.Pinned); err == nil {
			if err := os.RemoveAll(s.Pinned); err != nil {
				return msgs, fmt.Errorf("removing the pinned programs in %s: %w", s.Pinned, err)
			}
			msgs = append(msgs, "removed the pinned programs and maps ("+s.Pinned+"), which detaches them")
		}
	}
	if s.Hardware != "" {
		if here := netnsInode("/proc/thread-self/ns/net"); s.Netns != "" && here != s.Netns {
			return msgs, fmt.Errorf("the run on %s applied a hardware plan in another network namespace (net:[%s]); run dragonc stop %s inside it to undo the plan", s.Iface, s.Netns, s.Iface)
		}
		if _, err := os.Stat(filepath.Join(s.Hardware, "state")); err == nil {
			h := &hardware{dir: s.Hardware, script: filepath.Join(s.Hardware, "linux.sh"), iface: s.Iface}
			if err := h.undo(); err != nil {
				return msgs, err
			}
			msgs = append(msgs, "restored "+s.Iface+"'s settings from the hardware plan's record")
		}
	}
	if err := os.RemoveAll(stateDir(s.name)); err != nil {
		return msgs, err
	}
	return msgs, nil
}

// DetachEnv names the environment variable that tells a `dragonc run`
// started by Detach which descriptor to say "ready" on.
const DetachEnv = "DRAGONC_DETACHED"

// Detach starts exe with args (a `dragonc run` command line without
// --detach) as a daemon serving iface: a session of its own, standard
// input from /dev/null, its output in the state directory's log. While it
// starts, its log (RunDir/IFACE.log) is copied to progress; it returns once it serves, with
// its pid, or with an error and the log's end if it stopped first.
func Detach(exe string, args []string, iface string, progress io.Writer) (int, error) {
	if err := validIface(iface); err != nil {
		return 0, err
	}
	name := stateName(iface)
	if old, err := readState(name); err == nil {
		if old.Alive() {
			return 0, usage("dragonc run already serves %s (pid %d, stack %s); dragonc stop %s first", iface, old.PID, old.Stack, iface)
		}
		msgs, err := cleanup(old)
		for _, m := range msgs {
			fmt.Fprintf(progress, "dragonc run: an earlier run on %s (pid %d) is gone: %s\n", iface, old.PID, m)
		}
		if err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll(RunDir(), 0o755); err != nil {
		return 0, fmt.Errorf("making the state directory: %w", err)
	}
	// The log stays when the run ends (beside, not in, its state), so
	// that a run that failed can be read about.
	logPath := filepath.Join(RunDir(), name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), DetachEnv+"=3")
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return 0, fmt.Errorf("starting the detached run: %w", err)
	}
	pw.Close()
	pid := cmd.Process.Pid
	go cmd.Wait() // reaped if it ends while this process lives on
	said := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(pr)
		said <- string(b)
	}()
	// Relay the log while it starts: building the helper can take a while.
	var off int64
	relay := func() {
		f, err := os.Open(logPath)
		if err != nil {
			return
		}
		defer f.Close()
		f.Seek(off, io.SeekStart)
		n, _ := io.Copy(progress, f)
		off += n
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-said:
			relay()
			if strings.HasPrefix(s, "ready") {
				return pid, nil
			}
			return 0, fmt.Errorf("the detached run stopped before it served (its log: %s)", logPath)
		case <-tick.C:
			relay()
		}
	}
}

// DetachedReady returns, in a run that Detach started, the Ready function
// that says "ready" on the descriptor the parent waits on; ok is false in
// any other run.
func DetachedReady() (ready func(), ok bool) {
	v := os.Getenv(DetachEnv)
	if v == "" {
		return nil, false
	}
	fd, err := strconv.Atoi(v)
	if err != nil {
		return nil, false
	}
	syscall.CloseOnExec(fd) // not the helper's
	f := os.NewFile(uintptr(fd), "ready")
	os.Unsetenv(DetachEnv)
	return func() {
		f.WriteString("ready\n")
		f.Close()
	}, true
}

// bpfFSMagic is the bpf file system's magic number (include/uapi/linux/
// magic.h, BPF_FS_MAGIC).
const bpfFSMagic = 0xcafe4a11

// mountBPF mounts a bpf file system at dir unless one is there, as
// bpftool does before it pins (mount_bpffs_for_pin): /sys/fs/bpf is an
// empty directory of sysfs until something mounts it.
func mountBPF(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil && uint32(st.Type) == bpfFSMagic {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pinning in %s: %w", dir, err)
	}
	if err := syscall.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("pinning: %s is no bpf file system and mounting one failed (mount -t bpf bpf %s): %w", dir, dir, err)
	}
	return nil
}
