package dsl_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/dragonc/dragonc/dsl"
)

// TestFormatTables pins how long values are broken: a table a row a line
// with its columns aligned (numbers to the right), a list of plain values
// filling its lines, a list inside a list broken the same way,
// comments after a row staying after it, and whatever fits on one line
// left there.
func TestFormatTables(t *testing.T) {
	src := `graph g {
    engine VIA {
        short [[4B 1.5] [8B 2.5]]
        latency [[4B 43.3 57.6 45.1 45.0] [8B 43.4 57.9 45.4 45.4] /* big */ [32KiB 2910.2 3053.7 3135.6 3053.4]
                 [64KiB 5820.4 6107.4 6271.2 6106.8] // measured
        ]
        names [alpha_one alpha_two alpha_three alpha_four alpha_five alpha_six alpha_seven alpha_eight alpha_nine]
        mixed [[a b] c [d e] f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg hh ii jj kk]
        deep [[[x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15 x16 x17 x18 x19 x20 x21 x22 x23 x24 x25 x26]]]
    }
    node Q {
        port queues[Queue0 Queue1 Queue2 Queue3 Queue4 Queue5 Queue6 Queue7 Queue8 Queue9 Queue10 Queue11 Queue12]
        port out[]
    }
}
`
	want := `graph g {
    engine VIA {
        short [[4B 1.5] [8B 2.5]]
        latency [
            [4B      43.3   57.6   45.1   45.0]
            [8B      43.4   57.9   45.4   45.4] /* big */
            [32KiB 2910.2 3053.7 3135.6 3053.4]
            [64KiB 5820.4 6107.4 6271.2 6106.8] // measured
        ]
        names [
            alpha_one alpha_two alpha_three alpha_four alpha_five alpha_six alpha_seven alpha_eight
            alpha_nine
        ]
        mixed [
            [a b]
            c
            [d e]
            f
            g
            h
            i
            j
            k
            l
            m
            n
            o
            p
            q
            r
            s
            t
            u
            v
            w
            x
            y
            z
            aa
            bb
            cc
            dd
            ee
            ff
            gg
            hh
            ii
            jj
            kk
        ]
        deep [
            [
                [
                    x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15 x16 x17 x18 x19 x20 x21 x22
                    x23 x24 x25 x26
                ]
            ]
        ]
    }
    node Q {
        port queues[Queue0 Queue1 Queue2 Queue3 Queue4 Queue5 Queue6 Queue7 Queue8 Queue9 Queue10
                    Queue11 Queue12]
        port out[]
    }
}
`
	s, diags := dsl.Parse("t.prg", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff(want, string(dsl.Format(s))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkFormat(t, "t.prg", []byte(src))
}

// TestFormatOneLineConfig: a configuration of one property keeps to one
// line when it fits and holds no comment.
func TestFormatOneLineConfig(t *testing.T) {
	src := `graph g {
    config C {
        enum {
            feature rx_checksum
        }
        port on off[]
    }
    config D {
        enum { feature rx_checksum // why
        }
        port on off[]
    }
}
`
	want := `graph g {
    config C {
        enum { feature rx_checksum }
        port on off[]
    }
    config D {
        enum {
            feature rx_checksum // why
        }
        port on off[]
    }
}
`
	s, diags := dsl.Parse("t.prg", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff(want, string(dsl.Format(s))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkFormat(t, "t.prg", []byte(src))
}

// TestFormatWidth formats every language file of the repository and
// finds no line past 100 columns that the formatter could have broken:
// only comments and quoted strings, which are printed as written, may
// pass it.
func TestFormatWidth(t *testing.T) {
	for _, path := range globAll(t, "nics/*.prg", "nics/dragonet/*.unicorn", "examples/*.lpg", "testdata/graphs/*.prg", "testdata/graphs/*.unicorn", "testdata/unicorn/*.unicorn", "testdata/unicorn/dragonet/*.unicorn") {
		s, diags := dsl.Parse(rel(path), read(t, path))
		if diags.HasErrors() {
			t.Fatalf("%s: %s", rel(path), diags.Error())
		}
		for i, line := range strings.Split(string(dsl.Format(s)), "\n") {
			if utf8.RuneCountInString(line) > 100 && !strings.Contains(line, "//") && !strings.Contains(line, "/*") && !strings.Contains(line, `"`) {
				t.Errorf("%s:%d: formatted line of %d columns: %s", rel(path), i+1, utf8.RuneCountInString(line), line)
			}
		}
	}
}
