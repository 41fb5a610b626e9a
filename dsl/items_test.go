package dsl

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseStackItems reads, in every stack of the repository that
// parses, the items between each two of its items (and between the last
// and the closing brace) on their own, and compares them with the whole
// file's: the same tree, positions (lines and columns) included. A range
// that does not end where an item starts, or holds a piece of one, is
// refused.
func TestParseStackItems(t *testing.T) {
	files := repoFiles(t)
	// Items on one line, after characters of more than one byte: their
	// columns count from the line's start.
	files["one-line.lpg"] = "stack s { interface eth0 { mac 00:1b:21:3a:4b:5c ip 10.0.0.1/24 } cores 0..1 " +
		"endpoint a udp listen *:1 { app \"ééé\" } endpoint b udp listen *:2 /* é */ endpoint c udp listen *:3 service arp }"
	n := 0
	for name, src := range files {
		s, diags := Parse(name, []byte(src))
		if diags.HasErrors() || s.AST.Stack == nil || len(s.AST.Stack.Items) == 0 {
			continue
		}
		n++
		items := s.AST.Stack.Items
		close := s.AST.Stack.EndPos.Offset - 1
		for j := range items {
			for m := j + 1; m <= len(items) && m <= j+4; m++ {
				to := close
				if m < len(items) {
					to = items[m].Pos.Offset
				}
				_, got, ok := ParseStackItems(name, []byte(src), items[j].EndPos.Offset, to)
				if !ok {
					t.Fatalf("%s: items %d to %d were refused", name, j+1, m-1)
				}
				if want := items[j+1 : m]; len(want)+len(got) > 0 && !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: items %d to %d read on their own differ from the file's:\n%#v\n%#v", name, j+1, m-1, got, want)
				}
			}
			if m := min(j+2, len(items)-1); m > j+1 {
				// Into the middle of an item, or from the middle of one.
				mid := (items[m].Pos.Offset + items[m].EndPos.Offset) / 2
				if _, _, ok := ParseStackItems(name, []byte(src), items[j].EndPos.Offset, mid); ok && strings.TrimSpace(src[items[m].Pos.Offset:mid]) != "" {
					t.Errorf("%s: a range ending inside item %d was read", name, m)
				}
				if _, _, ok := ParseStackItems(name, []byte(src), mid, close); ok {
					t.Errorf("%s: a range starting inside item %d was read", name, m)
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("only %d stacks", n)
	}
}
