package discover_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dragonc/dragonc/discover"
	"github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/golden"
	"github.com/dragonc/dragonc/lpg"
	"github.com/dragonc/dragonc/nics"
	"github.com/dragonc/dragonc/prg"
)

// recording is what a driver answered the ethtool ioctls, as
// testdata/DRIVER.json keeps it; an absent part stands for a command the
// driver has no operation for (EOPNOTSUPP).
type recording struct {
	Driver   string
	Channels *discover.Channels
	Features []discover.KernelFeature
	RSS      *struct {
		Indir int
		Key   string
	}
	FlowHash map[string]uint64
}

// replay answers as the recorded driver did.
type replay struct{ r *recording }

func (p replay) Driver() (string, error) { return p.r.Driver, nil }
func (p replay) Channels() (discover.Channels, error) {
	if p.r.Channels == nil {
		return discover.Channels{}, unix.EOPNOTSUPP
	}
	return *p.r.Channels, nil
}
func (p replay) Features() ([]discover.KernelFeature, error) {
	if p.r.Features == nil {
		return nil, unix.EOPNOTSUPP
	}
	return p.r.Features, nil
}
func (p replay) RSS() (int, []byte, error) {
	if p.r.RSS == nil {
		return 0, nil, unix.EOPNOTSUPP
	}
	key, err := hex.DecodeString(p.r.RSS.Key)
	return p.r.RSS.Indir, key, err
}
func (p replay) FlowHash(flowType uint32) (uint64, error) {
	h, ok := p.r.FlowHash[fmt.Sprint(flowType)]
	if !ok {
		return 0, unix.EOPNOTSUPP
	}
	return h, nil
}

func recorded(t *testing.T, driver string) replay {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", driver+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return replay{&r}
}

// model discovers a model from recorded outputs, as the command does.
func model(t *testing.T, f *discover.Facts) (string, *prg.Model) {
	t.Helper()
	d, known := nics.Driver(f.Driver)
	var tables []discover.Table
	if known {
		tables = discover.TablesOf(d)
	}
	text := discover.PRG(f, known, tables)
	m, diags := prg.Load("discovered.prg", []byte(text))
	if diags.HasErrors() {
		t.Fatalf("the discovered model does not load: %v\n%s", diags.Error(), text)
	}
	return text, m
}

// embedOn embeds an example on the model for Linux.
func embedOn(t *testing.T, m *prg.Model, example string) *embed.Result {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	st, diags := lpg.LoadStack(example, src)
	if st == nil {
		t.Fatal(diags)
	}
	in, warnings, err := embed.NewInput("discovered", m, st, nil, embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 || in.Driver == nil {
		t.Fatalf("no driver facts: %v", warnings)
	}
	r, err := embed.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecorded(t *testing.T) {
	for _, c := range []struct {
		driver          string
		queues, indir   int
		udpPorts, table bool
	}{
		{"ixgbe", 63, 128, false, true},
		{"igb", 8, 128, false, false},
		{"virtio_net", 4, 0, false, false},
	} {
		t.Run(c.driver, func(t *testing.T) {
			f, err := discover.Probe("eth0", recorded(t, c.driver), 0)
			if err != nil {
				t.Fatal(err)
			}
			if f.Driver != c.driver || f.Queues() != c.queues || f.IndirSize != c.indir || f.UDPPorts != c.udpPorts {
				t.Errorf("facts %+v", f)
			}
			text, m := model(t, f)
			golden.Check(t, filepath.Join("testdata", c.driver+".prg.golden"), []byte(text))
			if len(m.Queues) != c.queues {
				t.Errorf("%d queues, want %d", len(m.Queues), c.queues)
			}
			if got := m.Space("RxCFDir") != nil; got != c.table {
				t.Errorf("flow director table: %v, want %v", got, c.table)
			}
			// rx-checksum covers TCP and UDP, not the IPv4 header
			// (CHECKSUM_UNNECESSARY, include/linux/skbuff.h).
			if strings.Contains(text, "L3IPv4ValidChecksum") || !strings.Contains(text, "L4TCPValidChecksum") {
				t.Errorf("receive checksum offload modelled wrong:\n%s", text)
			}
			r := embedOn(t, m, "dns_ntp.lpg")
			if r.Plan.Target != "linux" || r.Plan.Driver != c.driver {
				t.Errorf("plan target %q driver %q", r.Plan.Target, r.Plan.Driver)
			}
		})
	}
}

// vethAnswers is what veth answers (drivers/net/veth.c): veth_get_channels
// reports the queues allocated as maximums (max_rx, max_tx) and the ones
// in use as counts, no combined channels; veth_ethtool_ops has no
// get_rxfh or get_rxnfc. The device was made with 4 queues, 1 in use.
var vethAnswers = &recording{
	Driver:   "veth",
	Channels: &discover.Channels{MaxRX: 4, MaxTX: 4, RX: 1, TX: 1},
	Features: []discover.KernelFeature{
		{Name: "rx-checksum", Available: true, Requested: true, Active: true},
		{Name: "tx-checksum-ip-generic", Available: true, Requested: true, Active: true},
		{Name: "rx-ntuple-filter"},
	},
}

// TestVethChannels: a driver that counts RX channels apart is modelled
// with the RX channels in use, not its maximum.
func TestVethChannels(t *testing.T) {
	f, err := discover.Probe("v0", replay{vethAnswers}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f.Queues() != 1 {
		t.Errorf("%d queues, want the 1 in use (maximum 4)", f.Queues())
	}
	if len(f.Notes) == 0 || !strings.Contains(strings.Join(f.Notes, "\n"), "rx_count") {
		t.Errorf("no note says where the count comes from: %q", f.Notes)
	}
	_, m := model(t, f)
	if len(m.Queues) != 1 {
		t.Errorf("the model has %d queues", len(m.Queues))
	}
}

// TestVeth discovers a veth made in a network namespace of the test's
// own, through the real ioctls.
func TestVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip is not installed")
	}
	type result struct {
		f   *discover.Facts
		err error
		out string
	}
	done := make(chan result)
	go func() {
		// The namespace belongs to this thread, which is never unlocked:
		// it ends with the goroutine, and the namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- result{err: err}
			return
		}
		out, err := exec.Command("ip", "link", "add", "v0", "numrxqueues", "4", "numtxqueues", "4", "type", "veth", "peer", "name", "v1").CombinedOutput()
		if err != nil {
			done <- result{err: err, out: string(out)}
			return
		}
		et, err := discover.OpenIoctl("v0")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer et.Close()
		f, err := discover.Probe("v0", et, 1)
		done <- result{f: f, err: err}
	}()
	r := <-done
	if r.f == nil {
		t.Skipf("cannot discover a veth in a namespace here: %v %s", r.err, r.out)
	}
	f := r.f
	if f.Driver != "veth" {
		t.Fatalf("driver %q", f.Driver)
	}
	if !f.HasChannels || f.Channels.Combined != 0 || f.Queues() != int(f.Channels.RX) {
		t.Errorf("channels %+v: modelled with %d queues, want the RX count in use", f.Channels, f.Queues())
	}
	if !f.RxChecksum.Known {
		t.Error("rx-checksum not found among the veth's features")
	}
	_, m := model(t, f)
	res := embedOn(t, m, "web_and_dns.lpg")
	if len(res.Plan.Queues) == 0 {
		t.Error("no queue in the plan")
	}
	t.Logf("veth: channels %+v, indirection %d, notes %v", f.Channels, f.IndirSize, f.Notes)
}
