package run

import (
	"testing"

	"github.com/dragonc/dragonc/internal/netnstest"
)

// TestMain keeps the runs of the tests' state apart from the host's
// (/run/dragonc): each test binary has a directory of its own.
func TestMain(m *testing.M) { netnstest.Main(m) }
