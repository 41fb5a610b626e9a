//go:build linux

package sovia

// sysSendmmsg is sendmmsg(2)'s number, which package syscall does not
// name (arch/x86/entry/syscalls/syscall_64.tbl: 307;
// include/uapi/asm-generic/unistd.h, used by arm64: 269).
const sysSendmmsg = 269
