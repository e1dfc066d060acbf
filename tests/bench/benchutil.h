/* tests/bench/benchutil.h: what the bench programs (microbench.c, ctrlbench.c,
 * footprint.c) share. */
#ifndef BENCHUTIL_H
#define BENCHUTIL_H

#include <infiniband/verbs.h>
#include <string.h>
#include <time.h>

/* The head of libibverbs' private struct verbs_device: the public ibv_device,
 * then a pointer to the provider's verbs_device_ops, whose first member is the
 * provider name. Stable from rdma-core v31 to v65
 * (linux-rdma/rdma-core:libibverbs/driver.h; rdma-core-private-abi.md §5). */
struct verbs_device_head {
	struct ibv_device device;
	const struct {
		const char *name;
	} *ops;
};

static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline struct ibv_device *find_device(struct ibv_device **list, const char *name)
{
	for (int i = 0; list[i]; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			return list[i];
	return NULL;
}

#endif
