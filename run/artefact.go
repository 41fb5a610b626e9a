package run

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	dembed "github.com/dragonc/dragonc/embed"
	"github.com/dragonc/dragonc/internal/outdir"
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
	if start, _, ok := trailer(bytes.NewReader(prog), int64(len(prog))); ok {
		prog = prog[:start] // an artefact built from an artefact: the program only
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
	data := slices.Concat(prog, zb.Bytes(), trailer[:])
	if err := outdir.Replace(out, data, func(f *os.File) error { return f.Chmod(0o755) }); err != nil {
		return false, err
	}
	return isStatic(base), nil
}

// trailer reads the trailer at the end of r (size bytes): where the
// archive starts and how long it is; ok is false for a file without one.
func trailer(r io.ReaderAt, size int64) (start, n int64, ok bool) {
	var t [24]byte
	if size < 24 {
		return 0, 0, false
	}
	if _, err := r.ReadAt(t[:], size-24); err != nil || string(t[:16]) != artefactMagic {
		return 0, 0, false
	}
	u := binary.LittleEndian.Uint64(t[16:])
	if u > uint64(size-24) {
		return 0, 0, false
	}
	return size - 24 - int64(u), int64(u), true
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

// ReadArtefact reads what the artefact at path was built from and, if
// helper is not nil, copies its helper program there; nil, nil for a
// program without an archive.
func ReadArtefact(path string, helper io.Writer) (*Artefact, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start, n, ok := trailer(f, fi.Size())
	if !ok {
		return nil, nil
	}
	zr, err := zip.NewReader(io.NewSectionReader(f, start, n), n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var a Artefact
	if err := unzip(zr, "artefact.json", func(r io.Reader) error { return json.NewDecoder(r).Decode(&a) }); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if helper != nil {
		if err := unzip(zr, "helper", func(r io.Reader) error { _, err := io.Copy(helper, r); return err }); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &a, nil
}

func unzip(zr *zip.Reader, name string, f func(io.Reader) error) error {
	rc, err := zr.Open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	return f(rc)
}

// Self is the artefact this program is, or nil.
func Self() (*Artefact, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return ReadArtefact(exe, nil)
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
	files, _, err := helperFiles(r, st, chains, builtinHandlers(st), vs)
	if err != nil {
		return "", "", err
	}
	bin, err := buildHelper(context.Background(), work, files, progress)
	return bin, filesKey(files), err
}

// helperBinary is the helper program of files: from this program's own
// artefact when it is one built for these files, or built with the go
// command. The artefact's program runs from a memory file (memfd), so
// that a host whose temporary directory is mounted noexec serves too.
func (sv *serving) helperBinary(work string, files map[string][]byte) (string, error) {
	progress := func(format string, args ...any) { sv.out.note("note", format, args...) }
	a, err := Self()
	if err != nil {
		return "", err
	}
	if a == nil || a.HelperKey != filesKey(files) {
		if a != nil {
			progress("this artefact was built for another plan (stack, NIC or flags); building the program of this one")
		}
		return buildHelper(sv.ctx, work, files, progress)
	}
	mfd, err := unix.MemfdCreate("dragonc-helper", unix.MFD_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("memfd_create: %w", err)
	}
	// Above the descriptors the helper inherits (3, 4, ...), which the
	// child takes before it executes /proc/self/fd/N.
	fd, err := unix.FcntlInt(uintptr(mfd), unix.F_DUPFD_CLOEXEC, 100)
	unix.Close(mfd)
	if err != nil {
		return "", fmt.Errorf("moving the memfd: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "dragonc-helper")
	exe, _ := os.Executable()
	if _, err := ReadArtefact(exe, mf); err != nil {
		mf.Close()
		return "", err
	}
	sv.cleanup = append(sv.cleanup, func() { mf.Close() })
	progress("the generated stack's program comes from this artefact (built by %s)", a.GoVersion)
	return fmt.Sprintf("/proc/self/fd/%d", fd), nil
}
