/* footprint: what loading the providers costs a process, and what opening a
 * device adds, read from the process's own /proc/self/status.
 *
 *   footprint [DEV] [LABELS...]
 *
 * It calls ibv_get_device_list() (libibverbs dlopens every provider there when
 * a device is unmatched), then, if DEV is given, ibv_open_device(DEV) and
 * ibv_alloc_pd() on it (an open of one of ours loads the Go part). It prints
 * one "@@BENCH tool=footprint ... metric=NAME value=V" line per figure:
 *   list_threads, list_rss_kb  Threads and VmRSS after the list
 *   list_us                    the ibv_get_device_list() call
 *   list_gopart                1 when libusb4_rdma-go.so is mapped after the list
 *   open_threads, open_rss_kb  after the open and the PD (DEV given only)
 *   open_us                    the ibv_open_device() call (DEV given only)
 * with loaded=<providers mapped at the end> (usb4_rdma, rxe, usb4_rdma+rxe,
 * none) and, with DEV, served=<the provider serving DEV> in every line.
 * LABELS (key=value words) are copied into every line.
 * A DEV word contains no '='; exit status 1 with one "footprint: ..." line
 * on stderr when a call fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* status_field returns the number after "NAME:" in /proc/self/status, -1 if absent. */
static long status_field(const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long v = -1;
	size_t n = strlen(name);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* mapped says whether a file whose name contains needle is mapped. */
static int mapped(const char *needle)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	char line[1024];
	int hit = 0;
	while (!hit && fgets(line, sizeof(line), f))
		hit = strstr(line, needle) != NULL;
	fclose(f);
	return hit;
}

int main(int argc, char **argv)
{
	const char *dev = argc > 1 && !strchr(argv[1], '=') ? argv[1] : NULL;
	char labels[512];
	size_t off = 0;
	labels[0] = '\0';
	for (int i = dev ? 2 : 1; i < argc && off < sizeof(labels); i++)
		off += (size_t)snprintf(labels + off, sizeof(labels) - off, " %s", argv[i]);

	double t0 = now_us();
	struct ibv_device **list = ibv_get_device_list(NULL);
	double list_us = now_us() - t0;
	if (!list) {
		fprintf(stderr, "footprint: ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	long list_threads = status_field("Threads"), list_rss = status_field("VmRSS");
	int list_gopart = mapped("libusb4_rdma-go");

	long open_threads = -1, open_rss = -1;
	double open_us = -1;
	const char *served = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	if (dev) {
		struct ibv_device *d = NULL;
		for (int i = 0; list[i] && !d; i++)
			if (strcmp(ibv_get_device_name(list[i]), dev) == 0)
				d = list[i];
		if (!d) {
			fprintf(stderr, "footprint: %s: no such device\n", dev);
			return 1;
		}
		served = ((const struct verbs_device_head *)d)->ops->name;
		t0 = now_us();
		ctx = ibv_open_device(d);
		open_us = now_us() - t0;
		if (!ctx) {
			fprintf(stderr, "footprint: ibv_open_device(%s): %s\n", dev, strerror(errno));
			return 1;
		}
		pd = ibv_alloc_pd(ctx);
		if (!pd) {
			fprintf(stderr, "footprint: ibv_alloc_pd(%s): %s\n", dev, strerror(errno));
			return 1;
		}
		open_threads = status_field("Threads");
		open_rss = status_field("VmRSS");
	}

	int ours = mapped("libusb4_rdma"), rxe = mapped("librxe");
	const char *loaded = ours && rxe ? "usb4_rdma+rxe" : ours ? "usb4_rdma" : rxe ? "rxe" : "none";
	char tail[640];
	snprintf(tail, sizeof(tail), "%s loaded=%s%s%s", labels, loaded, served ? " served=" : "",
		 served ? served : "");
#define EMIT(metric, fmt, v) printf("@@BENCH tool=footprint size=0 qps=1 pl=1%s metric=" metric " value=" fmt "\n", tail, v)
	EMIT("list_threads", "%ld", list_threads);
	EMIT("list_rss_kb", "%ld", list_rss);
	EMIT("list_us", "%.1f", list_us);
	EMIT("list_gopart", "%d", list_gopart);
	if (dev) {
		EMIT("open_threads", "%ld", open_threads);
		EMIT("open_rss_kb", "%ld", open_rss);
		EMIT("open_us", "%.1f", open_us);
	}
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
