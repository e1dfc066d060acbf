// lazyvm: issue 13's "pay nothing unless used" on a real kernel (cshim/lazyvm.sh
// runs it in the VM, with our package installed beside the stock librxe).
//
//   lazyvm librxe-only  rxe is not claimed by us: the process lists, opens rxe0
//                       through librxe and allocates a PD; our front library is
//                       mapped (libibverbs loaded it), the Go part is not, and
//                       the process has one thread.
//   lazyvm prefork      run with USB4VERBS_CLAIM_RXE=1 and RDMAV_DRIVERS naming
//                       us: the parent lists (no Go part mapped), forks 4
//                       children; each opens rxe0 and rxe1 through us, connects
//                       an RC QP pair and moves 64 RDMA writes of 4 KiB, each
//                       checked byte for byte.
// Result lines are go-test-style (rel.h: --- PASS: rel/lazy/<case>).
#include "../../tests/reliability/rel.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include "proctask.h"

// mapped: whether /proc/self/maps has a file whose name ends with suffix.
static int mapped(const char *suffix)
{
	char line[4096];
	int found = 0;
	size_t sl = strlen(suffix);
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");
		line[n] = 0;
		found |= n >= sl && strcmp(line + n - sl, suffix) == 0;
	}
	fclose(f);
	return found;
}

// struct verbs_device: ibv_device (664 bytes), then its verbs_device_ops,
// whose first member is the provider's name.
static const char *provider_of(struct ibv_device *dev)
{
	const char *const *ops = *(const char *const *const *)((const char *)dev + 664);
	return ops ? ops[0] : "?";
}

static int librxe_only(void)
{
	double t0 = rel_now();
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = list ? rel_find_device(list, n, rel_devname(0)) : NULL;
	if (!dev) {
		rel_fail("librxe_only", t0, "no %s in the device list", rel_devname(0));
		return rel_exit_code();
	}
	const char *prov = provider_of(dev);
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	int threads = count_threads(), front = mapped("/libusb4_rdma.so"), gopart = mapped("/libusb4_rdma-go.so");
	rel_check(strcmp(prov, "rxe") == 0 && pd, "librxe_only/served_by_librxe", t0, "%s served by %s, open+alloc_pd %s",
		  rel_devname(0), prov, pd ? "ok" : rel_errname(errno));
	rel_check(front == 1, "librxe_only/front_loaded", t0, "libusb4_rdma.so mapped: %d (our package is installed)",
		  front);
	rel_check(gopart == 0 && threads == 1, "librxe_only/no_go_runtime", t0,
		  "threads %d, libusb4_rdma-go.so mapped %d (want 1 and 0)", threads, gopart);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	ibv_free_device_list(list);
	return rel_exit_code();
}

// child_traffic: one prefork worker; returns 0 or a small step number.
static int child_traffic(int id)
{
	struct rel_end a, b;
	const char *what = "";
	enum { LEN = 4096, WRITES = 64 };
	if (rel_end_open(&a, 0, 16, LEN, &what) || rel_end_open(&b, 1, 16, LEN, &what) ||
	    rel_pair_connect(&a, &b, 16, &what)) {
		fprintf(stderr, "child %d: %s: %s\n", id, what, rel_errname(errno));
		return 2;
	}
	if (strcmp(provider_of(a.ctx->device), "usb4_rdma") != 0) {
		fprintf(stderr, "child %d: %s served by %s, not us\n", id, rel_devname(0), provider_of(a.ctx->device));
		return 3;
	}
	for (int w = 0; w < WRITES; w++) {
		memset(a.buf, (id * WRITES + w) & 0xff, LEN);
		struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = LEN, .lkey = a.mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED,
					 .wr.rdma = {.remote_addr = (uintptr_t)b.buf, .rkey = b.mr->rkey}};
		struct ibv_send_wr *bad;
		struct ibv_wc wc;
		if (ibv_post_send(a.qp, &wr, &bad) || rel_poll_one(a.cq, &wc, 10) != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "child %d: write %d did not complete\n", id, w);
			return 4;
		}
		for (size_t i = 0; i < LEN; i++)
			if (((unsigned char *)b.buf)[i] != ((id * WRITES + w) & 0xff)) {
				fprintf(stderr, "child %d: write %d: byte %zu differs\n", id, w, i);
				return 5;
			}
	}
	rel_end_close(&a);
	rel_end_close(&b);
	return 0;
}

static int prefork(void)
{
	enum { CHILDREN = 4 };
	double t0 = rel_now();
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = list ? rel_find_device(list, n, rel_devname(0)) : NULL;
	int gopart = mapped("/libusb4_rdma-go.so");
	rel_check(dev && strcmp(provider_of(dev), "usb4_rdma") == 0 && gopart == 0, "prefork/parent_listed", t0,
		  "%s served by %s; parent: threads %d, Go part mapped %d", rel_devname(0), dev ? provider_of(dev) : "-",
		  count_threads(), gopart);
	pid_t pids[CHILDREN];
	fflush(stdout);
	for (int i = 0; i < CHILDREN; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(child_traffic(i));
	}
	int ok = 0;
	char note[256] = "";
	size_t off = 0;
	for (int i = 0; i < CHILDREN; i++) {
		int st = 0;
		double end = rel_now() + 120;
		pid_t r;
		while ((r = waitpid(pids[i], &st, WNOHANG)) == 0 && rel_now() < end)
			usleep(10000);
		if (r == 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &st, 0);
		}
		int good = r == pids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0;
		ok += good;
		off += (size_t)snprintf(note + off, sizeof(note) - off, "%schild %d: %s", i ? ", " : "", i,
					good ? "ok"
					: r == 0 ? "hung"
					: WIFSIGNALED(st) ? "signal"
							  : "failed");
		if (off >= sizeof(note))
			off = sizeof(note) - 1;
	}
	rel_check(ok == CHILDREN, "prefork/children_traffic", t0, "%s (each: open rxe0+rxe1, RC pair, 64 x 4 KiB writes checked)",
		  note);
	ibv_free_device_list(list);
	return rel_exit_code();
}

int main(int argc, char **argv)
{
	rel_prog = "lazy";
	if (argc > 1 && strcmp(argv[1], "librxe-only") == 0)
		return librxe_only();
	if (argc > 1 && strcmp(argv[1], "prefork") == 0)
		return prefork();
	fprintf(stderr, "usage: lazyvm librxe-only|prefork\n");
	return 2;
}
