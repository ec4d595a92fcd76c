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

// func cloneVM(flags, stack uintptr, a *spawnArgs) (pid uintptr, errno uintptr)
//
// clone(2) with CLONE_VM and a stack of the child's own: the child shares
// this process's memory but none of its stacks, and runs nsInit(a) on the
// new stack (never returning); the parent returns the child's pid.
TEXT ·cloneVM(SB),NOSPLIT,$0-40
	MOVQ	flags+0(FP), DI
	MOVQ	stack+8(FP), SI
	MOVQ	a+16(FP), R12
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$56, AX // SYS_clone
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	parent
	NEGQ	AX
	MOVQ	$0, pid+24(FP)
	MOVQ	AX, errno+32(FP)
	RET
parent:
	MOVQ	AX, pid+24(FP)
	MOVQ	$0, errno+32(FP)
	RET
child:
	// The new stack: pass a (ABI0, on the stack) and run nsInit.
	PUSHQ	R12
	CALL	·nsInit(SB)
	MOVQ	$125, DI
	MOVQ	$231, AX // SYS_exit_group
	SYSCALL
	INT	$3
