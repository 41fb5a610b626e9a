package discover

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreqData is struct ifreq with ifr_data, the pointer SIOCETHTOOL reads
// (include/uapi/linux/if.h): the name, then the 24-byte union.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// Ioctl asks a network interface's driver through SIOCETHTOOL, the
// ioctl ethtool itself falls back on (net/ethtool/ioctl.c dev_ethtool).
type Ioctl struct {
	fd    int
	iface string
}

// OpenIoctl opens the socket the ioctls go through.
func OpenIoctl(iface string) (*Ioctl, error) {
	if len(iface) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("%q is longer than an interface name (%d bytes)", iface, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket for SIOCETHTOOL: %w", err)
	}
	return &Ioctl{fd: fd, iface: iface}, nil
}

// Close closes the socket.
func (x *Ioctl) Close() error { return unix.Close(x.fd) }

// call runs one ETHTOOL_* command; buf starts with the command word.
func (x *Ioctl) call(buf []byte) error {
	var ifr ifreqData
	copy(ifr.name[:], x.iface)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(x.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		return errno
	}
	return nil
}

// words is a command buffer of n 32-bit words, the first one cmd.
func words(cmd uint32, n int) []byte {
	b := make([]byte, 4*n)
	binary.NativeEndian.PutUint32(b, cmd)
	return b
}

func word(b []byte, i int) uint32 { return binary.NativeEndian.Uint32(b[4*i:]) }

// Driver implements Ethtool: ETHTOOL_GDRVINFO.
func (x *Ioctl) Driver() (string, error) {
	info, err := unix.IoctlGetEthtoolDrvinfo(x.fd, x.iface)
	if err != nil {
		return "", fmt.Errorf("ETHTOOL_GDRVINFO: %w", err)
	}
	return unix.ByteSliceToString(info.Driver[:]), nil
}

// Channels implements Ethtool: ETHTOOL_GCHANNELS (struct
// ethtool_channels: cmd, then the four maximums and the four counts).
func (x *Ioctl) Channels() (Channels, error) {
	b := words(unix.ETHTOOL_GCHANNELS, 9)
	if err := x.call(b); err != nil {
		return Channels{}, fmt.Errorf("ETHTOOL_GCHANNELS: %w", err)
	}
	return Channels{MaxRX: word(b, 1), MaxTX: word(b, 2), MaxOther: word(b, 3), MaxCombined: word(b, 4),
		RX: word(b, 5), TX: word(b, 6), Other: word(b, 7), Combined: word(b, 8)}, nil
}

// ethSSFeatures is ETH_SS_FEATURES, the string set of feature names
// (include/uapi/linux/ethtool.h enum ethtool_stringset).
const ethSSFeatures = 4

// Features implements Ethtool: the feature names (ETHTOOL_GSSET_INFO and
// ETHTOOL_GSTRINGS for ETH_SS_FEATURES) and their state
// (ETHTOOL_GFEATURES: per block of 32 features the available, requested,
// active and never_changed bit masks).
func (x *Ioctl) Features() ([]KernelFeature, error) {
	// struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[].
	si := make([]byte, 20)
	binary.NativeEndian.PutUint32(si, unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(si[8:], 1<<ethSSFeatures)
	if err := x.call(si); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: %w", err)
	}
	if binary.NativeEndian.Uint64(si[8:])&(1<<ethSSFeatures) == 0 {
		return nil, fmt.Errorf("ETHTOOL_GSSET_INFO: no feature strings")
	}
	n := int(binary.NativeEndian.Uint32(si[16:]))
	// struct ethtool_gstrings: cmd, string_set, len, then len names of
	// ETH_GSTRING_LEN (32) bytes.
	gs := make([]byte, 12+32*n)
	binary.NativeEndian.PutUint32(gs, unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(gs[4:], ethSSFeatures)
	binary.NativeEndian.PutUint32(gs[8:], uint32(n))
	if err := x.call(gs); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err)
	}
	// struct ethtool_gfeatures: cmd, size (blocks), then blocks of four
	// u32: available, requested, active, never_changed.
	blocks := (n + 31) / 32
	gf := words(unix.ETHTOOL_GFEATURES, 2+4*blocks)
	binary.NativeEndian.PutUint32(gf[4:], uint32(blocks))
	if err := x.call(gf); err != nil {
		return nil, fmt.Errorf("ETHTOOL_GFEATURES: %w", err)
	}
	out := make([]KernelFeature, n)
	for i := range out {
		name := gs[12+32*i : 12+32*(i+1)]
		if k := bytes.IndexByte(name, 0); k >= 0 {
			name = name[:k]
		}
		blk, bit := 2+4*(i/32), uint32(1)<<(i%32)
		out[i] = KernelFeature{Name: string(name),
			Available: word(gf, blk)&bit != 0, Requested: word(gf, blk+1)&bit != 0,
			Active: word(gf, blk+2)&bit != 0, NeverChanged: word(gf, blk+3)&bit != 0}
	}
	return out, nil
}

// RSS implements Ethtool: ETHTOOL_GRSSH (struct ethtool_rxfh: cmd,
// rss_context, indir_size, key_size, hfunc, input_xfrm, 2 reserved bytes,
// a reserved word, then the table and the key), asked once for the sizes
// and once for the key.
func (x *Ioctl) RSS() (int, []byte, error) {
	const hdr = 24
	b := make([]byte, hdr)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GRSSH)
	if err := x.call(b); err != nil {
		return 0, nil, fmt.Errorf("ETHTOOL_GRSSH: %w", err)
	}
	indir, keySize := int(binary.NativeEndian.Uint32(b[8:])), int(binary.NativeEndian.Uint32(b[12:]))
	if keySize == 0 {
		return indir, nil, nil
	}
	full := make([]byte, hdr+4*indir+keySize)
	copy(full, b[:16])
	if err := x.call(full); err != nil {
		return indir, nil, fmt.Errorf("ETHTOOL_GRSSH (key): %w", err)
	}
	return indir, bytes.Clone(full[hdr+4*indir:]), nil
}

// FlowHash implements Ethtool: ETHTOOL_GRXFH, the RXH_* fields hashed for
// a flow type (struct ethtool_rxnfc: cmd, flow_type, u64 data, then the
// flow spec and rule fields this command leaves alone; the buffer has room
// for the whole structure, 192 bytes on 64-bit).
func (x *Ioctl) FlowHash(flowType uint32) (uint64, error) {
	b := make([]byte, 256)
	binary.NativeEndian.PutUint32(b, unix.ETHTOOL_GRXFH)
	binary.NativeEndian.PutUint32(b[4:], flowType)
	if err := x.call(b); err != nil {
		return 0, fmt.Errorf("ETHTOOL_GRXFH: %w", err)
	}
	return binary.NativeEndian.Uint64(b[8:]), nil
}
