// Test program: lists the devices the host's libibverbs enumerates and the
// provider that claimed each, then (with "open") tries to open each one.
// With "footprint" it also prints, before and after the opens, the process's
// thread count and whether the provider's Go part is mapped (issue 13: a
// process that opens none of our devices must have neither).
// Declares the few public libibverbs functions it uses itself, so the test
// needs libibverbs1 but not its -dev package.
#define _GNU_SOURCE // strerrorname_np
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proctask.h"

struct ibv_device;
struct ibv_context;
struct ibv_device **ibv_get_device_list(int *num_devices);
void ibv_free_device_list(struct ibv_device **list);
const char *ibv_get_device_name(struct ibv_device *device);
struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);

// struct verbs_device: ibv_device (664 bytes), then the provider's
// verbs_device_ops pointer, whose first member is the provider name.
static const char *provider_name(struct ibv_device *dev)
{
	const char *const *ops = *(const char *const *const *)((const char *)dev + 664);
	return ops ? ops[0] : "?";
}

static int go_part_mapped(void)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "/libusb4_rdma-go.so") != NULL;
	fclose(f);
	return found;
}

static void footprint(const char *when)
{
	printf("footprint %s threads %d go_part_mapped %d\n", when, count_threads(), go_part_mapped());
}

int main(int argc, char **argv)
{
	int n = 0;
	int show_footprint = argc > 1 && strcmp(argv[1], "footprint") == 0;
	int open_each = show_footprint || (argc > 1 && strcmp(argv[1], "open") == 0);
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		printf("ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	printf("devices %d\n", n);
	if (show_footprint)
		footprint("listed");
	for (int i = 0; i < n; i++) {
		printf("device %s provider %s\n", ibv_get_device_name(list[i]), provider_name(list[i]));
		if (!open_each)
			continue;
		errno = 0;
		struct ibv_context *ctx = ibv_open_device(list[i]);
		if (ctx) {
			printf("open %s ok\n", ibv_get_device_name(list[i]));
			ibv_close_device(ctx);
		} else {
			printf("open %s errno %s\n", ibv_get_device_name(list[i]), strerrorname_np(errno));
		}
	}
	if (show_footprint)
		footprint("opened");
	ibv_free_device_list(list);
	return 0;
}
