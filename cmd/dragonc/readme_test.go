package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeRecipe pastes the README's veth recipe into a shell, as a
// newcomer would, with a dragonc built from this tree on PATH and an empty
// dragonc build cache: it must echo, show the stack in status and stop
// it, and leave no namespace behind.
func TestReadmeRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dragonc and serves a stack")
	}
	if os.Geteuid() != 0 {
		t.Skip("the recipe needs root")
	}
	for _, tool := range []string{"ip", "ethtool", "bash", "timeout", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the recipe needs %s", tool)
		}
	}
	for _, ns := range []string{"stack", "peer"} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Skipf("a namespace %q exists already; the recipe makes its own", ns)
		}
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Serving a stack on a veth")
	if i < 0 {
		t.Fatal("the README has no section Serving a stack on a veth")
	}
	start := strings.Index(readme[i:], "```sh\n")
	end := strings.Index(readme[i+start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("the recipe has no sh block")
	}
	recipe := readme[i+start+6 : i+start+6+end]

	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "dragonc"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building dragonc: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", "stack").Run()
		exec.Command("ip", "netns", "del", "peer").Run()
	})
	sh := exec.Command("bash", "-c", recipe)
	gocache, _ := exec.Command("go", "env", "GOCACHE").Output()
	sh.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"), // no helper built yet
		"GOCACHE="+strings.TrimSpace(string(gocache)),
		"DRAGONC_RUN_DIR="+filepath.Join(dir, "run"))
	out, err := sh.CombinedOutput()
	text := string(out)
	t.Logf("the recipe said:\n%s", text)
	if err != nil {
		t.Fatalf("the recipe failed: %v", err)
	}
	for _, want := range []string{
		"building the generated stack's program", // a cold cache says what it does
		"dragonc run: detached as pid",
		"hello\n",                     // the UDP echo
		"stack echo (linux-xdp), pid", // status
		"serving",                     //
		"dragonc stop: stopped pid",   // stop
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the recipe's output lacks %q", want)
		}
	}
	if _, err := exec.LookPath("ping"); err == nil && !strings.Contains(text, "3 received") {
		t.Errorf("ping was not answered three times")
	}
	for _, ns := range []string{"stack", "peer"} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			t.Errorf("the recipe left namespace %s", ns)
		}
	}
}
