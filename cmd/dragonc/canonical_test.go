package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBuiltinFilesCanonical: every built-in model written for dragonc and
// every example is in the layout dragonc fmt prints (fmt -l lists
// nothing). Dragonet's own .unicorn files are left out: they are kept byte
// for byte as published.
func TestBuiltinFilesCanonical(t *testing.T) {
	var files []string
	for _, pattern := range []string{"nics/*.prg", "examples/*.lpg"} {
		m, err := filepath.Glob(filepath.Join("../..", pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: %v, %d files", pattern, err, len(m))
		}
		for _, f := range m {
			files = append(files, strings.TrimPrefix(filepath.ToSlash(f), "../../"))
		}
	}
	code, stdout, stderr := dragonc(t, append([]string{"fmt", "-l"}, files...)...)
	if code != 0 || stdout != "" {
		t.Errorf("fmt -l exit %d, lists (dragonc fmt -w them):\n%s%s", code, stdout, stderr)
	}
}
