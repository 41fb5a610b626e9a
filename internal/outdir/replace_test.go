package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReplace: the file gets the new contents and the mode prepare sets;
// a failing prepare leaves the old file and no temporary file, and its
// error comes back.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.prg")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Replace(p, []byte("new"), func(f *os.File) error { return f.Chmod(0o644) }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode() != 0o644 || read(t, p) != "new" {
		t.Errorf("after Replace: %q, mode %v, %v", read(t, p), st.Mode(), err)
	}
	boom := errors.New("boom")
	if err := Replace(p, []byte("newer"), func(*os.File) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failing prepare: err %v, want %v", err, boom)
	}
	if got := read(t, p); got != "new" {
		t.Errorf("a failing prepare changed the file to %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	// A new file; with nil prepare the mode is CreateTemp's.
	q := filepath.Join(dir, "b.prg")
	if err := Replace(q, []byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(q); err != nil || st.Mode() != 0o600 || read(t, q) != "b" {
		t.Errorf("a new file: %q, mode %v, %v", read(t, q), st.Mode(), err)
	}
	// A directory that does not exist: an error, nothing written.
	if err := Replace(filepath.Join(dir, "no", "c"), []byte("c"), nil); err == nil {
		t.Error("Replace into a missing directory succeeded")
	}
}
