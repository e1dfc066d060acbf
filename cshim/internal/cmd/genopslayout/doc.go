// Command genopslayout writes cshim/zopslayout.h: for every known layout of
// libibverbs' private struct verbs_context_ops, the slot index of each op.
//
// It reads the struct's member list out of libibverbs/driver.h at the given
// revisions of an rdma-core git repository (git show REV:libibverbs/driver.h),
// so nothing from rdma-core is committed here: only member names and their
// positions, which are facts of the ABI. Usage (the exact command is recorded
// on line 1 of the output):
//
//	go run ./cshim/internal/cmd/genopslayout -git /path/to/rdma-core/.git \
//	    -o cshim/zopslayout.h L34=v34.0 L35=v35.0 ... L65=<master commit>
package main
