package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWriteKeepsOtherFiles: files dragonc did not write survive every run,
// files of an earlier run that are no longer produced go, and nothing
// temporary is left.
func TestWriteKeepsOtherFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	var w Writer
	if err := w.Write(dir, map[string][]byte{"plan.json": []byte("1"), "fallback/a.go": []byte("a"), "old.conf": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dir, "fallback", "extra.go"), []byte("mine too"), 0o644)
	if err := w.Write(dir, map[string][]byte{"plan.json": []byte("2"), "fallback/a.go": []byte("b"), "linux.sh": []byte("#!/bin/sh\n")}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(dir, "plan.json")) != "2" || read(t, filepath.Join(dir, "fallback/a.go")) != "b" {
		t.Error("outputs not replaced")
	}
	if read(t, filepath.Join(dir, "notes.txt")) != "mine" || read(t, filepath.Join(dir, "fallback/extra.go")) != "mine too" {
		t.Error("a user's file was touched")
	}
	if _, err := os.Stat(filepath.Join(dir, "old.conf")); err == nil {
		t.Error("a file of the earlier run that is no longer produced is still there")
	}
	if m := read(t, filepath.Join(dir, Manifest)); m != "fallback/a.go\nlinux.sh\nplan.json\n" {
		t.Errorf("manifest %q", m)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, "linux.sh")); st.Mode().Perm()&0o100 == 0 {
		t.Errorf("linux.sh is not executable: %v", st.Mode())
	}
	if _, err := os.Stat(filepath.Dir(dir) + "/out.old"); err == nil {
		t.Error("a sibling .old directory was made")
	}
}

// TestWriteRefuses: the root, a file, and a foreign directory whose files
// would be overwritten.
func TestWriteRefuses(t *testing.T) {
	var w Writer
	if err := w.Write("/", map[string][]byte{"plan.json": nil}); err == nil || !strings.Contains(err.Error(), "root of the file system") {
		t.Errorf("/: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, []byte("x"), 0o644)
	if err := w.Write(f, map[string][]byte{"plan.json": nil}); err == nil {
		t.Error("wrote into a file")
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "plan.json"), []byte("my plan"), 0o644)
	if err := w.Write(foreign, map[string][]byte{"plan.json": []byte("x")}); err == nil || !strings.Contains(err.Error(), "already holds plan.json") {
		t.Errorf("foreign: %v", err)
	}
	if read(t, filepath.Join(foreign, "plan.json")) != "my plan" {
		t.Error("a foreign file was replaced")
	}
	// A foreign directory without collisions gets our files beside its own.
	os.Remove(filepath.Join(foreign, "plan.json"))
	os.WriteFile(filepath.Join(foreign, "thesis.tex"), []byte("precious"), 0o644)
	if err := w.Write(foreign, map[string][]byte{"plan.json": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(foreign, "thesis.tex")) != "precious" {
		t.Error("thesis.tex changed")
	}
}

// TestWriteThroughSymlink: a symlinked output directory stays a link.
func TestWriteThroughSymlink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "real")
	os.Mkdir(target, 0o755)
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	var w Writer
	if err := w.Write(link, map[string][]byte{"plan.json": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(link); st.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced by a directory")
	}
	if read(t, filepath.Join(target, "plan.json")) != "x" {
		t.Error("not written through the link")
	}
}

// TestWriteUmask: modes follow the umask.
func TestWriteUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "out")
	var w Writer
	if err := w.Write(dir, map[string][]byte{"a/plan.json": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, "a"))
	if st.Mode().Perm() != 0o750 {
		t.Errorf("directory mode %v, want 0750 under umask 027", st.Mode().Perm())
	}
	st, _ = os.Stat(filepath.Join(dir, "a/plan.json"))
	if st.Mode().Perm() != 0o640 {
		t.Errorf("file mode %v, want 0640 under umask 027", st.Mode().Perm())
	}
}

// TestWriteLocked: a second run while the first holds the lock is told so.
func TestWriteLocked(t *testing.T) {
	dir := t.TempDir()
	f, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w Writer
	err = w.Write(dir, map[string][]byte{"plan.json": []byte("x")})
	if !errors.Is(err, ErrBusy) {
		t.Errorf("got %v, want ErrBusy", err)
	}
}

// TestCleanup: an interrupted write leaves no temporary file.
func TestCleanup(t *testing.T) {
	dir := t.TempDir()
	var w Writer
	tmp, err := w.stage(filepath.Join(dir, "plan.json"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	w.Cleanup()
	if _, err := os.Stat(tmp); err == nil {
		t.Error("the temporary file survived Cleanup")
	}
}

func TestSafeName(t *testing.T) {
	for name, want := range map[string]bool{"plan.json": true, "fallback/a.go": true, "../x": false, "/etc/passwd": false, "a//b": false, "a/./b": false, "": false} {
		if safeName(name) != want {
			t.Errorf("safeName(%q) = %v", name, !want)
		}
	}
}
