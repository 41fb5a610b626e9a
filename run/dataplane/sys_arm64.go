package dataplane

// include/uapi/asm-generic/unistd.h
const (
	sysSendmmsg = 269
	sysBPF      = 280
)
