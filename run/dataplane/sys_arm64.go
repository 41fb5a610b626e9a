package dataplane

// include/uapi/asm-generic/unistd.h
const (
	sysSendmmsg    = 269
	sysMemfdCreate = 279
	sysBPF         = 280
)
