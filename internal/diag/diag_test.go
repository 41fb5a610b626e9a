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

// TestUserTextClipped: a message quotes a name as long as the file (a
// 50 MB stack name was repeated whole in an error) by its first MaxQuoted
// characters and its length, and Long shows the part of its line around
// the range.
func TestUserTextClipped(t *testing.T) {
	huge := strings.Repeat("é", 25<<20) // 50 MB
	f := NewFile("s.lpg", []byte("stack "+huge+" { }\n"))
	var l List
	l.Errorf(Range{File: f, Start: 6, End: 6 + len(huge)}, "E512", "stack %q declares no interface", huge)
	l.Warnf(Range{File: f, Start: len(huge) + 7}, "W1", "%s, %-4s|%s", huge, "ab", "short")
	head := strings.Repeat("é", MaxQuoted) + "…"
	if got, want := l[0].String(), `s.lpg:1:7: error: stack "`+head+`" (52428800 bytes) declares no interface [E512]`; got != want {
		t.Errorf("String() = %.200q, want %q", got, want)
	}
	if got, want := l[1].Summary, head+" (52428800 bytes), ab  |short"; got != want {
		t.Errorf("Warnf = %.200q, want %q", got, want)
	}
	if got := l[0].Long(); len(got) > 1024 || !strings.Contains(got, "\n    stack "+strings.Repeat("é", 10)) || !strings.HasSuffix(got, "^") {
		t.Errorf("Long() = %.300q (%d bytes)", got, len(got))
	}
	if got, want := Quote(huge), `"`+head+`" (52428800 bytes)`; got != want {
		t.Errorf("Quote = %.200q", got)
	}
	if got, want := Clip("short"), "short"; got != want {
		t.Errorf("Clip = %q, want %q", got, want)
	}
	if got, want := Sprintf("%q and %d", "x\ty", 3), `"x\ty" and 3`; got != want {
		t.Errorf("Sprintf = %q, want %q", got, want)
	}
	var names Names
	for i := 0; i < 30; i++ {
		names = append(names, huge[:2*i+2])
	}
	if got := names.String(); len(got) > 4000 || !strings.HasSuffix(got, " and 10 more") || !strings.HasPrefix(got, "é, éé, ") {
		t.Errorf("Names = %.300q (%d bytes)", got, len(got))
	}
}

// TestLongWindow: of a long line, Long shows the characters around the
// range, the caret under the range's first.
func TestLongWindow(t *testing.T) {
	line := strings.Repeat("x", 4999) + "Y" + strings.Repeat("z", 5000)
	f := NewFile("a", []byte("first\n"+line+"\nlast"))
	d := Diagnostic{Severity: Error, Summary: "here", Range: Range{File: f, Start: 6 + 4999, End: 6 + 5000}}
	parts := strings.Split(d.Long(), "\n")
	if len(parts) != 3 {
		t.Fatalf("Long() = %q", d.Long())
	}
	shown, caret := []rune(strings.TrimPrefix(parts[1], "    ")), strings.TrimPrefix(parts[2], "    ")
	col := strings.Index(caret, "^")
	if len(shown) > maxShownLine+2 || shown[0] != '…' || shown[len(shown)-1] != '…' || col < 0 || shown[col] != 'Y' || caret[col:] != "^" {
		t.Errorf("Long() = %q", d.Long())
	}
}

// TestClosestLongNames: names longer than a typo's worth get no
// suggestion; the distance of two names of 50 MB took days.
func TestClosestLongNames(t *testing.T) {
	long := strings.Repeat("a", 4096)
	if got := Closest(long+"b", []string{long + "c"}); got != "" {
		t.Errorf("Closest suggested a name of %d bytes", len(got))
	}
	if got := Closest("ValidCrc", []string{"ValidCRC", long}); got != "ValidCRC" {
		t.Errorf("Closest = %q, want ValidCRC", got)
	}
}
