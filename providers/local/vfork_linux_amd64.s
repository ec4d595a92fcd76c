#include "textflag.h"

// func vforkClone(flags uintptr) (pid uintptr, errno uintptr)
//
// clone(2) for CLONE_VM|CLONE_VFORK. The child runs on this stack until it
// executes a program or exits, and its calls may overwrite the slot that
// holds this function's return address; so the address is kept in R12
// (preserved by the kernel) across the system call and stored back after
// it. Arguments are read before, results written after, the pop and push.
TEXT ·vforkClone(SB),NOSPLIT|NOFRAME,$0-24
	MOVQ	flags+0(FP), DI
	XORQ	SI, SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$56, AX // SYS_clone
	POPQ	R12
	SYSCALL
	PUSHQ	R12
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	NEGQ	AX
	MOVQ	$0, pid+8(FP)
	MOVQ	AX, errno+16(FP)
	RET
ok:
	MOVQ	AX, pid+8(FP)
	MOVQ	$0, errno+16(FP)
	RET
