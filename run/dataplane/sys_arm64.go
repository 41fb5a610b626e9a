package dataplane

const sysSendmmsg = 269 // include/uapi/asm-generic/unistd.h
