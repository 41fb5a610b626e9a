package run

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/lpg"
)

// An artefact of `dragonc build` is the dragonc program with a stack's
// server appended: a zip archive holding what it was built from
// (artefact.json) and the helper program the go command built for it. The
// archive is found through a trailer at the end of the file (the magic
// and the archive's length), so the program runs as it is and reads its
// own tail. `ARTEFACT run IFACE` serves the stack with the helper from the
// archive: the host needs no go command.

// Artefact says what an artefact was built from.
type Artefact struct {
	NIC   string `json:"nic"`
	Stack string `json:"stack"`  // the stack file's name
	Src   []byte `json:"source"` // and its text
	// Embed are the embed flags it was planned with (name to value).
	Embed map[string]string `json:"embed"`
	// HelperKey is the digest of the helper's files (filesKey): serving
	// checks that the plan it makes again still gives the same program.
	HelperKey string `json:"helper_key"`
	GoVersion string `json:"go_version"` // what built the helper
}

const artefactMagic = "DRAGONC-BUILD\x00\x00\x01" // 16 bytes

// BuildArtefact writes to out the program at base with a's archive and the
// helper program at helper appended, executable. It returns whether the
// result is statically linked (an ELF file without an interpreter).
func BuildArtefact(out, base string, a Artefact, helper string) (static bool, err error) {
	prog, err := os.ReadFile(base)
	if err != nil {
		return false, err
	}
	if n, ok := payloadStart(prog); ok {
		prog = prog[:n] // an artefact built from an artefact: the program only
	}
	hb, err := os.ReadFile(helper)
	if err != nil {
		return false, err
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	meta, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return false, err
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{"artefact.json", meta}, {"helper", hb}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate})
		if err != nil {
			return false, err
		}
		if _, err := w.Write(f.b); err != nil {
			return false, err
		}
	}
	if err := zw.Close(); err != nil {
		return false, err
	}
	var trailer [24]byte
	copy(trailer[:16], artefactMagic)
	binary.LittleEndian.PutUint64(trailer[16:], uint64(zb.Len()))
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return false, err
	}
	for _, b := range [][]byte{prog, zb.Bytes(), trailer[:]} {
		if _, err := f.Write(b); err != nil {
			f.Close()
			os.Remove(tmp)
			return false, err
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return false, err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return false, err
	}
	return isStatic(base), nil
}

// payloadStart returns where an artefact's archive starts in b.
func payloadStart(b []byte) (int, bool) {
	if len(b) < 24 || string(b[len(b)-24:len(b)-8]) != artefactMagic {
		return 0, false
	}
	n := binary.LittleEndian.Uint64(b[len(b)-8:])
	if n > uint64(len(b)-24) {
		return 0, false
	}
	return len(b) - 24 - int(n), true
}

// isStatic reports whether an ELF program needs no dynamic loader.
func isStatic(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// ReadArtefact reads the archive of the artefact at path; nil, nil for a
// program without one.
func ReadArtefact(path string) (*Artefact, *zip.Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	size := fi.Size()
	var trailer [24]byte
	if size < 24 {
		f.Close()
		return nil, nil, nil
	}
	if _, err := f.ReadAt(trailer[:], size-24); err != nil || string(trailer[:16]) != artefactMagic {
		f.Close()
		return nil, nil, err
	}
	n := int64(binary.LittleEndian.Uint64(trailer[16:]))
	if n > size-24 {
		f.Close()
		return nil, nil, fmt.Errorf("%s: the archive's length %d exceeds the file", path, n)
	}
	zr, err := zip.NewReader(io.NewSectionReader(f, size-24-n, n), n)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	rc, err := zr.Open("artefact.json")
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	defer rc.Close()
	var a Artefact
	if err := json.NewDecoder(rc).Decode(&a); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: artefact.json: %w", path, err)
	}
	return &a, zr, nil
}

// Self is the artefact this program is, or nil.
func Self() (*Artefact, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	a, _, err := ReadArtefact(exe)
	return a, err
}

// HelperFor builds the helper program of a plan for an artefact, as run
// would build it, and returns its path and its files' digest.
func HelperFor(r *dembed.Result, st *lpg.Stack, work string, progress func(string, ...any)) (string, string, error) {
	g, err := lpg.Derive(st)
	if err != nil {
		return "", "", err
	}
	chains, err := TxChains(g, r.Plan, st)
	if err != nil {
		return "", "", err
	}
	vs, err := viaOf(r.Plan, st)
	if err != nil {
		return "", "", err
	}
	files, err := helperFiles(r, st, chains, builtinHandlers(st, nil), vs)
	if err != nil {
		return "", "", err
	}
	bin, err := buildHelper(work, files, progress)
	return bin, filesKey(files), err
}

// helperBinary is the helper program of files: from this program's own
// artefact when it is one, or built with the go command.
func (sv *serving) helperBinary(work string, files map[string][]byte) (string, error) {
	progress := func(format string, args ...any) { sv.out.note("note", format, args...) }
	exe, err := os.Executable()
	if err != nil {
		return buildHelper(work, files, progress)
	}
	a, zr, err := ReadArtefact(exe)
	if err != nil {
		return "", err
	}
	if a == nil {
		return buildHelper(work, files, progress)
	}
	if a.HelperKey != filesKey(files) {
		return "", errors.New("this artefact's program was built for another plan (the stack, NIC or flags differ from what dragonc build was given)")
	}
	rc, err := zr.Open("helper")
	if err != nil {
		return "", err
	}
	defer rc.Close()
	bin := filepath.Join(work, "helper")
	f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	progress("the generated stack's program comes from this artefact (built by %s)", a.GoVersion)
	return bin, nil
}
