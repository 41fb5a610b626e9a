package diag

import (
	"strings"
	"testing"

	_ "github.com/dragonc/dragonc/internal/golden" // defines -update
)

func TestPositionAndSort(t *testing.T) {
	f := NewFile("a.prg", []byte("line one\nnöde two\n\nlast"))
	cases := []struct{ off, line, col int }{{0, 1, 1}, {8, 1, 9}, {9, 2, 1}, {13, 2, 4}, {19, 3, 1}, {20, 4, 1}, {99, 4, 5}}
	for _, c := range cases {
		if l, col := f.Position(c.off); l != c.line || col != c.col {
			t.Errorf("Position(%d) = %d:%d, want %d:%d", c.off, l, col, c.line, c.col)
		}
	}
	var l List
	l.Warnf(Range{File: f, Start: 9}, "W1", "later")
	l.Errorf(Range{File: f, Start: 0}, "E1", "first")
	l.Errorf(Range{File: f, Start: 0}, "E1", "first")
	l.Sort()
	if len(l) != 2 || l[0].Code != "E1" {
		t.Fatalf("Sort should order by position and drop duplicates: %v", l)
	}
	if got := l[0].String(); got != "a.prg:1:1: error: first [E1]" {
		t.Errorf("String() = %q", got)
	}
	if !l.HasErrors() || l.Err() == nil {
		t.Error("HasErrors")
	}
	if !strings.Contains(l[1].Long(), "nöde two\n    ^") {
		t.Errorf("Long() = %q", l[1].Long())
	}
}

func TestMaxErrors(t *testing.T) {
	f := NewFile("a", []byte(strings.Repeat("x\n", 100)))
	var l List
	for i := 0; i < 100; i++ {
		l.Errorf(Range{File: f, Start: 2 * i}, "E1", "e%d", i)
	}
	l.Sort()
	if len(l) != MaxErrors {
		t.Errorf("kept %d errors, want %d", len(l), MaxErrors)
	}
}
