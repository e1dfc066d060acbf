// Opens the device named argv[1] through libibverbs and prints, one line
// each, what the errno contracts of our ops table give: the ops left to
// libibverbs' dummies on purpose, the dmabuf probe, create_cq_ex's refusals, argument
// checks made in C, a fork() child's control verbs on the parent's context
// and objects (adopted by the child's copy of the Go part, no hang) and on a
// context it opened itself (works).
// Run with testdata/gostub.c standing in for Go (shim_test.go).
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "testdev.h"

static void report(const char *what, const void *obj)
{
	printf("%s %s\n", what, obj ? "ok" : strerrorname_np(errno));
	fflush(stdout);
}

// prefork: a parent that only listed the devices forks; the child opens
// one of ours and uses it (the parent never loaded the Go part, so the child
// loads its own: issue 13), then the parent opens too.
static int prefork(struct ibv_device *dev, struct ibv_device **list)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		errno = 0;
		struct ibv_context *ctx = ibv_open_device(dev);
		report("child_open", ctx);
		if (ctx) {
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			report("child_alloc_pd", pd);
			if (pd)
				printf("child_dealloc_pd %d\n", ibv_dealloc_pd(pd));
			printf("child_close %d\n", ibv_close_device(ctx));
		}
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	struct ibv_context *ctx = ibv_open_device(dev);
	report("open", ctx);
	if (ctx)
		printf("close %d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}

// dmabuf: our reg_dmabuf_mr op as libibverbs calls it. NCCL's probe
// (ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0): anything but EOPNOTSUPP or
// EPROTONOSUPPORT means dma-buf MRs are supported), a registration, the
// verbs_mr fields libibverbs reads at ibv_dereg_mr (mr_type@48, access@52:
// struct verbs_mr is not in the public headers), and the dereg.
static int dmabuf(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	report("alloc_pd", pd);
	if (!pd)
		return 1;
	errno = 0;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	int e = errno;
	printf("nccl_probe %s supported %s\n", mr ? "object" : strerrorname_np(e),
	       !mr && (e == EOPNOTSUPP || e == EPROTONOSUPPORT) ? "no" : "yes");
	if (mr)
		ibv_dereg_mr(mr);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, 4096, 8192, 4096, 5, access);
	if (!mr) {
		printf("reg %s\n", strerrorname_np(errno));
	} else {
		int type, acc;
		memcpy(&type, (char *)mr + 48, sizeof(type));
		memcpy(&acc, (char *)mr + 52, sizeof(acc));
		printf("reg ok handle %u lkey %#x rkey %#x addr %p length %zu mr_type %d access %d context %s pd %s\n",
		       mr->handle, mr->lkey, mr->rkey, mr->addr, mr->length, type, acc,
		       mr->context == ctx ? "ok" : "wrong", mr->pd == pd ? "ok" : "wrong");
		printf("dereg %d\n", ibv_dereg_mr(mr));
	}
	errno = 0;
	report("reg_fd-1", ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, access));
	printf("dealloc_pd %d\n", ibv_dealloc_pd(pd));
	return 0;
}

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = find_device(list, n, argc > 1 ? argv[1] : NULL);
	if (!dev)
		return 1;
	if (argc > 2 && strcmp(argv[2], "prefork") == 0)
		return prefork(dev, list);
	struct ibv_context *ctx = ibv_open_device(dev);
	report("open", ctx);
	if (!ctx)
		return 1;
	if (argc > 2 && strcmp(argv[2], "dmabuf") == 0) {
		int rc = dmabuf(ctx);
		printf("close %d\n", ibv_close_device(ctx));
		ibv_free_device_list(list);
		return rc;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	report("alloc_pd", pd);
	if (pd) {
		errno = 0;
		report("reg_dmabuf_mr_fd-1", ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0));
	}
	// Completion timestamps: refused in C, before any Go (cqex.c).
	struct ibv_cq_init_attr_ex cqx = {.cqe = 1, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	errno = 0;
	report("create_cq_ex_timestamp", ibv_create_cq_ex(ctx, &cqx));
	errno = 0;
	report("create_cq_cqe0", ibv_create_cq(ctx, 0, NULL, NULL, 0));
	errno = 0;
	report("create_cq_vector-1", ibv_create_cq(ctx, 1, NULL, NULL, -1));
	struct ibv_pd *ppd = ibv_alloc_pd(ctx); // for the child to dealloc
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		errno = 0;
		report("child_alloc_pd", ibv_alloc_pd(ctx));
		// The parent's PD: adopted by the child's copy of the Go part by
		// its kernel handle (issue 24); EBADF before.
		if (ppd)
			printf("child_dealloc_parent_pd %s\n", strerrorname_np(ibv_dealloc_pd(ppd)) ?: "0");
		errno = 0;
		report("child_create_cq", ibv_create_cq(ctx, 1, NULL, NULL, 0));
		// A fresh open in the child works (cshim/README.md "fork()"): the
		// child's copy of the Go part serves its own context and the
		// parent's, which it adopted at child_alloc_pd.
		errno = 0;
		struct ibv_context *own = ibv_open_device(dev);
		report("child_open_device", own);
		if (own) {
			struct ibv_pd *opd = ibv_alloc_pd(own);
			report("child_own_alloc_pd", opd);
			if (opd)
				printf("child_own_dealloc_pd %d\n", ibv_dealloc_pd(opd));
			errno = 0;
			report("child_alloc_pd_again", ibv_alloc_pd(ctx));
			printf("child_own_close %d\n", ibv_close_device(own));
		}
		fflush(stdout);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	if (pd)
		printf("dealloc_pd %d\n", ibv_dealloc_pd(pd));
	printf("close %d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
