package linux

import (
	"regexp"
	"strings"
	"testing"
)

// TestKinds: each kind's description names only its fields (Steps' Desc
// and the script's begin line expand the same template), and its
// function reads its words under those names.
func TestKinds(t *testing.T) {
	kinds := []*kind{setChannels, checkRxQueues, setFeature, setRSS, checkModuleParam, hashUDPPorts, addRule, bindIRQ(nil, 2)}
	for _, m := range queueMasks {
		kinds = append(kinds, m.kind)
	}
	ref := regexp.MustCompile(`\$\{?([a-z_]+)`)
	for _, k := range kinds {
		args := make([]string, len(k.fields))
		for i := range args {
			args[i] = "w" + string(rune('0'+i))
		}
		for _, m := range ref.FindAllStringSubmatch(k.desc, -1) {
			if !strings.Contains(" "+strings.Join(k.fields, " ")+" ", " "+m[1]+" ") && !strings.Contains(" "+strings.Join(k.fields, " "), " "+m[1]+"...") {
				t.Errorf("%s: the description names $%s, not a field", k.name, m[1])
			}
		}
		got := k.expand(args)
		if strings.Contains(got, "$") {
			t.Errorf("%s: %q keeps a $", k.name, got)
		}
		fn := k.function()
		for i, f := range k.fields {
			if name, ok := strings.CutSuffix(f, "..."); ok {
				if !strings.Contains(fn, "shift "+string(rune('1'+i))) {
					t.Errorf("%s: the function does not shift off the words before %s:\n%s", k.name, name, fn)
				}
				continue
			}
			if !strings.Contains(fn, " "+f+"=$"+string(rune('2'+i))) {
				t.Errorf("%s: the function does not read %s from its row:\n%s", k.name, f, fn)
			}
		}
	}
}

// TestNewStepPlainWords: a row word that would not read back as written
// is an internal error, never a row.
func TestNewStepPlainWords(t *testing.T) {
	for _, w := range []string{"", "a b", "'x'", "$ifc", "*", "a;b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("word %q made a row", w)
				}
			}()
			newStep(Step{}, setChannels, w)
		}()
	}
	if st := newStep(Step{}, addRule, "0", "1", "udp4", "dst-ip", "10.0.0.1"); st.Desc != "filter rule 0 (ethtool -N flow-type udp4 dst-ip 10.0.0.1 action 1)" {
		t.Errorf("Desc %q", st.Desc)
	}
}

// TestPlainWord: a node name a row cannot hold as it is becomes a plain
// word.
func TestPlainWord(t *testing.T) {
	for in, want := range map[string]string{"RxCRSS": "RxCRSS", "Rx C'RSS$": "Rx_C_RSS_", "": "_", "a.b-c": "a.b-c"} {
		if got := plainWord(in); got != want {
			t.Errorf("plainWord(%q) = %q, want %q", in, got, want)
		}
	}
}
