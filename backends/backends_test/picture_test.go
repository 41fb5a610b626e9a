package backends_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dragonc/dragonc/backends/dot"
	"github.com/dragonc/dragonc/dsl"
	"github.com/dragonc/dragonc/nics"
)

// maxPicture is the largest side, in pixels, of a picture people must be
// able to read on a screen.
const maxPicture = 4000

// TestPictureSizes renders the embedding picture of every built-in NIC and
// example, and every built-in model, with Graphviz, and keeps each side
// under maxPicture pixels.
func TestPictureSizes(t *testing.T) {
	t.Parallel() // runs beside the other long test of the package
	dotCmd, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("Graphviz's dot is not installed; skipping the picture sizes (apt-get install graphviz)")
	}
	check := func(name, text string) {
		t.Helper()
		cmd := exec.Command(dotCmd, "-Tpng")
		cmd.Stdin = strings.NewReader(text)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: dot: %v\n%s", name, err, errb.String())
		}
		png := out.Bytes()
		if len(png) < 24 || string(png[1:4]) != "PNG" {
			t.Fatalf("%s: dot wrote no PNG", name)
		}
		w, h := binary.BigEndian.Uint32(png[16:20]), binary.BigEndian.Uint32(png[20:24])
		if w > maxPicture || h > maxPicture {
			t.Errorf("%s: %d x %d pixels, more than %d on a side", name, w, h, maxPicture)
		}
	}
	examples, _ := filepath.Glob("../../examples/*.lpg")
	for _, nic := range nicNames {
		for _, ex := range examples {
			src, err := os.ReadFile(ex)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := plan(t, nic, ex, src)
			check(nic+"/"+filepath.Base(ex), dot.Plan(r))
		}
	}
	for _, b := range nics.List() {
		file, src, err := nics.Resolve(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		g, _, _ := dsl.Load(file, src)
		check(b.Name, dot.Graph(g))
	}
}

// TestPictureFolds: runs of unused queues become one node, the queues a
// plan uses stay apart, and the legend names every style.
func TestPictureFolds(t *testing.T) {
	src, err := os.ReadFile("../../examples/dns_ntp.lpg")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := plan(t, "82599", "dns_ntp.lpg", src)
	text := dot.Plan(r)
	for _, want := range []string{`label="RxQueue4..127 (unused)"`, `label="RxQueue0"`, `label="RxQueue3"`, `label="software"`, `label="hardware"`, `label="removed (decided by the path)"`, `label="engine"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the picture lacks %s", want)
		}
	}
	if strings.Contains(text, `label="RxQueue5"`) {
		t.Error("an unused queue is drawn on its own")
	}
	_, src2, _ := nics.Resolve("82599")
	g, _, _ := dsl.Load("82599.prg", src2)
	model := dot.Graph(g)
	if !strings.Contains(model, "Queue0..127") || strings.Contains(model, `"Queue5"`) {
		t.Errorf("dot of the 82599 does not fold its 128 queues")
	}
}
