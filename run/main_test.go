package run

import (
	"fmt"
	"os"
	"testing"
)

// TestMain keeps the runs of the tests' state apart from the host's
// (/run/dragonc): each test binary has a directory of its own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dragonc-run-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("DRAGONC_RUN_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
