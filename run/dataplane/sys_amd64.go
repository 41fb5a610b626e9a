package dataplane

// arch/x86/entry/syscalls/syscall_64.tbl
const (
	sysSendmmsg    = 307
	sysMemfdCreate = 319
	sysBPF         = 321
)
