package dataplane

const sysSendmmsg = 307 // arch/x86/entry/syscalls/syscall_64.tbl
