// faults: what the kernel or the system does to a running provider.
//
//   faults enomem   the kernel refusing memory: reg_mr past RLIMIT_MEMLOCK
//                   without CAP_IPC_LOCK (the kernel's ENOMEM), and the queue
//                   mmap of create_cq / create_qp refused under a tight
//                   RLIMIT_AS. Each must fail with ENOMEM, leave no kernel
//                   object behind, and the process must work on afterwards.
//   faults watch    opens dev0 with a PD, CQ, QP and MR and collects async
//                   events for FAULT_SECS (default 25) or until
//                   IBV_EVENT_DEVICE_FATAL, while faults.sh takes the port
//                   down and up and deletes the rxe link. Then every later
//                   verb must return an error (after DEVICE_FATAL) or work
//                   (without), teardown must not crash, and the process exits 0.
//   faults waiter async|epoll|cqevent
//                   opens dev0 and waits the way RDMA libraries do, with no
//                   timeout of its own: a thread blocked in ibv_get_async_event
//                   (NCCL), an epoll loop on the O_NONBLOCK async fd (UCX), a
//                   thread blocked in ibv_get_cq_event (gloo), while faults.sh
//                   deletes the rxe link. It must wake with
//                   IBV_EVENT_DEVICE_FATAL or an error, then, still alive, see
//                   no uverbs fd or mapping of its own left and the device gone
//                   from `rdma dev`, and tear down and exit by itself.
#include "rel.h"

#include <linux/capability.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>

// set_ipc_lock raises or drops CAP_IPC_LOCK in the effective set (the
// permitted set keeps it, so it can come back).
static int set_ipc_lock(int on)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d))
		return errno;
	if (on)
		d[0].effective |= 1u << CAP_IPC_LOCK;
	else
		d[0].effective &= ~(1u << CAP_IPC_LOCK);
	return syscall(SYS_capset, &h, d) ? errno : 0;
}

static long vmsize_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

// kobjects: the "pd N cq N qp N ..." part of `rdma resource show` for dev.
static void kobjects(const char *dev, char *out, size_t len)
{
	snprintf(out, len, "?");
	FILE *p = popen("rdma resource show 2>/dev/null", "r");
	char line[512], key[64];
	snprintf(key, sizeof(key), " %s: ", dev);
	while (p && fgets(line, sizeof(line), p)) {
		char *s = strstr(line, key);
		if (s) {
			s += strlen(key);
			s[strcspn(s, "\n")] = 0;
			snprintf(out, len, "%s", s);
		}
	}
	if (p)
		pclose(p);
}

static int mode_enomem(void)
{
	struct rel_end A;
	const char *what = "";
	double t0 = rel_now();
	int rc = rel_end_open(&A, 0, 16, 4096, &what);
	if (rc) {
		rel_fail("setup", t0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	const char *dev = rel_devname(0);
	char before[256], after[256];

	// 1. Pinning past RLIMIT_MEMLOCK without CAP_IPC_LOCK: the kernel says ENOMEM.
	t0 = rel_now();
	struct rlimit old_ml;
	getrlimit(RLIMIT_MEMLOCK, &old_ml);
	size_t big = 4 << 20;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, big) == 0)
		memset(buf, 1, big);
	kobjects(dev, before, sizeof(before));
	struct rlimit ml = {.rlim_cur = 64 << 10, .rlim_max = old_ml.rlim_max};
	int caprc = set_ipc_lock(0);
	int lrc = setrlimit(RLIMIT_MEMLOCK, &ml) ? errno : 0;
	errno = 0;
	struct ibv_mr *mr = (caprc || lrc || !buf) ? NULL : ibv_reg_mr(A.pd, buf, big, IBV_ACCESS_LOCAL_WRITE);
	int e = errno;
	setrlimit(RLIMIT_MEMLOCK, &old_ml);
	set_ipc_lock(1);
	kobjects(dev, after, sizeof(after));
	if (caprc || lrc)
		rel_skip("reg_mr_memlock_enomem", "cannot drop CAP_IPC_LOCK (%s) or set RLIMIT_MEMLOCK (%s)",
			 rel_errname(caprc), rel_errname(lrc));
	else
		rel_check(!mr && e == ENOMEM && strcmp(before, after) == 0, "reg_mr_memlock_enomem", t0,
			  "reg_mr of 4 MiB with a 64 KiB memlock limit: %s errno %s (want NULL, ENOMEM); kernel objects "
			  "\"%s\" -> \"%s\"",
			  mr ? "an MR" : "NULL", rel_errname(e), before, after);
	if (mr)
		ibv_dereg_mr(mr);
	// And after the limit is back, the same registration works.
	t0 = rel_now();
	mr = buf ? ibv_reg_mr(A.pd, buf, big, IBV_ACCESS_LOCAL_WRITE) : NULL;
	e = errno;
	rel_check(mr != NULL, "reg_mr_after_enomem", t0, "reg_mr of 4 MiB with the limit restored: %s",
		  mr ? "ok" : rel_errname(e));
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);

	// 2. Queue mmaps refused: RLIMIT_AS just above what the process has mapped.
	struct ibv_device_attr da;
	ibv_query_device(A.ctx, &da);
	struct rlimit old_as;
	getrlimit(RLIMIT_AS, &old_as);
	for (int which = 0; which < 2; which++) {
		const char *name = which ? "create_qp_mmap_refused" : "create_cq_mmap_refused";
		t0 = rel_now();
		kobjects(dev, before, sizeof(before));
		long vm = vmsize_kib();
		struct rlimit as = {.rlim_cur = (rlim_t)(vm + 512) << 10, .rlim_max = old_as.rlim_max};
		lrc = vm > 0 && setrlimit(RLIMIT_AS, &as) ? errno : 0;
		errno = 0;
		void *obj;
		if (!which) {
			obj = ibv_create_cq(A.ctx, da.max_cqe, NULL, NULL, 0);
		} else {
			obj = rel_create_rc_qp(A.pd, A.cq, A.cq, (uint32_t)da.max_qp_wr);
		}
		e = errno;
		setrlimit(RLIMIT_AS, &old_as);
		kobjects(dev, after, sizeof(after));
		if (lrc || vm <= 0) {
			rel_skip(name, "cannot set RLIMIT_AS: %s", rel_errname(lrc));
		} else {
			rel_check(!obj && e == ENOMEM && strcmp(before, after) == 0, name, t0,
				  "%s of %d entries with RLIMIT_AS = VmSize + 512 KiB: %s errno %s (want NULL, ENOMEM); "
				  "kernel objects \"%s\" -> \"%s\"",
				  which ? "create_qp" : "create_cq", which ? da.max_qp_wr : da.max_cqe,
				  obj ? "an object" : "NULL", rel_errname(e), before, after);
		}
		if (obj && !which)
			ibv_destroy_cq(obj);
		else if (obj)
			ibv_destroy_qp(obj);
	}
	t0 = rel_now();
	struct ibv_cq *cq = ibv_create_cq(A.ctx, da.max_cqe, NULL, NULL, 0);
	e = errno;
	rel_check(cq != NULL, "create_cq_after_enomem", t0, "create_cq of %d entries with the limit restored: %s",
		  da.max_cqe, cq ? "ok" : rel_errname(e));
	if (cq)
		ibv_destroy_cq(cq);
	rel_end_close(&A);
	return rel_exit_code();
}

static int mode_watch(void)
{
	struct rel_end A;
	const char *what = "";
	double t0 = rel_now();
	int rc = rel_end_open(&A, 0, 16, 4096, &what);
	if (!rc && !(A.qp = rel_create_rc_qp(A.pd, A.cq, A.cq, 16)))
		rc = errno, what = "create_qp";
	if (!rc)
		rc = rel_qp_to_init(A.qp), what = "modify_qp INIT";
	if (rc) {
		rel_fail("setup", t0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	double secs = atof(rel_env("FAULT_SECS", "25"));
	printf("# faults: watching %s for %.0f s\n", rel_devname(0), secs);
	fflush(stdout);
	double end = rel_now() + secs, t_err = 0, t_act = 0, t_fatal = 0;
	int n_events = 0;
	while (rel_now() < end && !t_fatal) {
		struct pollfd p = {.fd = A.ctx->async_fd, .events = POLLIN};
		int pr = poll(&p, 1, 200);
		if (pr <= 0)
			continue;
		struct ibv_async_event ev;
		if (ibv_get_async_event(A.ctx, &ev)) {
			printf("# faults: ibv_get_async_event failed: %s\n", rel_errname(errno));
			break;
		}
		double t = rel_now() - t0;
		printf("# faults: event %s at %.1f s\n", ibv_event_type_str(ev.event_type), t);
		fflush(stdout);
		n_events++;
		if (ev.event_type == IBV_EVENT_PORT_ERR && !t_err)
			t_err = t;
		if (ev.event_type == IBV_EVENT_PORT_ACTIVE && t_err && !t_act)
			t_act = t;
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL)
			t_fatal = t;
		ibv_ack_async_event(&ev);
	}
	rel_check(t_err > 0, "port_err_event", t0, "IBV_EVENT_PORT_ERR %s after the netdev went down",
		  t_err > 0 ? "delivered" : "not delivered");
	rel_check(t_act > 0, "port_active_event", t0, "IBV_EVENT_PORT_ACTIVE %s after it came back",
		  t_act > 0 ? "delivered" : "not delivered");
	if (t_fatal)
		rel_pass("device_fatal_event", t0, "IBV_EVENT_DEVICE_FATAL at %.1f s", t_fatal);
	else
		rel_skip("device_fatal_event",
			 "no IBV_EVENT_DEVICE_FATAL within %.0f s of the link delete: the kernel sends it only when "
			 "it can disassociate the device (driver op disassociate_ucontext, which rxe lacks); "
			 "the delete waits for this process to close instead",
			 secs);

	// Later calls: errors after DEVICE_FATAL, or working verbs while the
	// device is still registered. Neither may crash or hang.
	t0 = rel_now();
	struct ibv_port_attr pa;
	int qrc = ibv_query_port(A.ctx, 1, &pa);
	struct ibv_pd *pd = ibv_alloc_pd(A.ctx);
	int pe = errno;
	struct ibv_cq *cq = ibv_create_cq(A.ctx, 4, NULL, NULL, 0);
	int ce = errno;
	struct ibv_sge s = {.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &s, .num_sge = 1}, *rbad;
	int rrc = ibv_post_recv(A.qp, &rw, &rbad);
	char note[300];
	snprintf(note, sizeof(note), "query_port %s, alloc_pd %s, create_cq %s, post_recv %s", rel_errname(qrc),
		 pd ? "ok" : rel_errname(pe), cq ? "ok" : rel_errname(ce), rel_errname(rrc));
	if (t_fatal)
		rel_check(qrc && !pd && !cq, "calls_after_fatal", t0, "%s (want errors)", note);
	else
		rel_check(!qrc && pd && cq, "calls_without_fatal", t0, "%s (device still registered: want success)",
			  note);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	t0 = rel_now();
	int d1 = ibv_destroy_qp(A.qp);
	A.qp = NULL;
	int d2 = ibv_dereg_mr(A.mr);
	A.mr = NULL;
	int d3 = ibv_destroy_cq(A.cq);
	A.cq = NULL;
	int d4 = ibv_dealloc_pd(A.pd);
	A.pd = NULL;
	int d5 = ibv_close_device(A.ctx);
	A.ctx = NULL;
	// After DEVICE_FATAL, destroy may report EIO (rdma-core: verbs_is_destroy_err); close must succeed.
	int ok = d5 == 0 && (t_fatal ? 1 : !(d1 || d2 || d3 || d4));
	rel_check(ok, "teardown", t0, "destroy_qp %s, dereg_mr %s, destroy_cq %s, dealloc_pd %s, close_device %s",
		  rel_errname(d1), rel_errname(d2), rel_errname(d3), rel_errname(d4), rel_errname(d5));
	rel_end_close(&A);
	(void)n_events;
	return rel_exit_code();
}

// uverbs_left counts this process's fds and mappings of /dev/infiniband/uverbs*.
static int uverbs_left(char *note, size_t len)
{
	int fds = 0, maps = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		char path[300], target[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = 0;
			if (strstr(target, "/dev/infiniband/uverbs"))
				fds++;
		}
	}
	if (d)
		closedir(d);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/infiniband/uverbs"))
			maps++;
	if (f)
		fclose(f);
	snprintf(note, len, "%d uverbs fds, %d uverbs mappings", fds, maps);
	return fds + maps;
}

// dev_listed: whether `rdma dev` still lists dev.
static int dev_listed(const char *dev)
{
	char cmd[128], line[512], key[80];
	snprintf(cmd, sizeof(cmd), "rdma dev show 2>/dev/null");
	snprintf(key, sizeof(key), " %s:", dev);
	FILE *p = popen(cmd, "r");
	int found = 0;
	while (p && fgets(line, sizeof(line), p))
		if (strstr(line, key))
			found = 1;
	if (p)
		pclose(p);
	return found;
}

static int mode_waiter(const char *kind)
{
	struct rel_end A;
	const char *what = "";
	char name[64], note[200];
	double t0 = rel_now();
	int rc = rel_end_open(&A, 0, 16, 4096, &what);
	struct ibv_comp_channel *ch = NULL;
	struct ibv_cq *cq = NULL;
	int ep = -1;
	if (!rc && strcmp(kind, "cqevent") == 0) {
		if (!(ch = ibv_create_comp_channel(A.ctx)))
			rc = errno, what = "create_comp_channel";
		else if (!(cq = ibv_create_cq(A.ctx, 4, NULL, ch, 0)))
			rc = errno, what = "create_cq";
		else if ((rc = ibv_req_notify_cq(cq, 0)) != 0)
			what = "req_notify_cq";
	} else if (!rc && strcmp(kind, "epoll") == 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0xfa17};
		int fl = fcntl(A.ctx->async_fd, F_GETFL);
		if (fl < 0 || fcntl(A.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
			rc = errno, what = "O_NONBLOCK";
		else if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, A.ctx->async_fd, &ev))
			rc = errno, what = "epoll";
	} else if (!rc && strcmp(kind, "async") != 0) {
		fprintf(stderr, "faults waiter: async, epoll or cqevent\n");
		return 2;
	}
	snprintf(name, sizeof(name), "waiter_%s_setup", kind);
	if (rc) {
		rel_fail(name, t0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	printf("# faults: waiter %s ready on %s\n", kind, rel_devname(0));
	fflush(stdout);
	int fatal = 0, err = 0;
	if (strcmp(kind, "cqevent") == 0) {
		struct ibv_cq *evcq;
		void *cctx;
		if (ibv_get_cq_event(ch, &evcq, &cctx)) {
			err = errno ? errno : EIO;
		} else {
			ibv_ack_cq_events(evcq, 1);
			struct ibv_wc wc;
			int n = ibv_poll_cq(cq, 1, &wc);
			err = n < 0 ? -n : 0; // the wake and then a failing poll
			fatal = n < 0;
		}
	} else {
		for (;;) {
			if (ep >= 0) {
				struct epoll_event got;
				int n = epoll_wait(ep, &got, 1, -1);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0) {
					err = errno;
					break;
				}
			}
			struct ibv_async_event ev;
			if (ibv_get_async_event(A.ctx, &ev)) {
				if (ep >= 0 && errno == EAGAIN)
					continue;
				err = errno ? errno : EIO;
				break;
			}
			int et = ev.event_type;
			ibv_ack_async_event(&ev);
			if (et == IBV_EVENT_DEVICE_FATAL) {
				fatal = 1;
				break;
			}
		}
	}
	double woke = rel_now();
	FILE *up = fopen("/proc/uptime", "r");
	double uptime = 0;
	if (up) {
		if (fscanf(up, "%lf", &uptime) != 1)
			uptime = 0;
		fclose(up);
	}
	snprintf(name, sizeof(name), "waiter_%s_woke", kind);
	rel_pass(name, t0, "woke at uptime %.1f s with %s", uptime,
		 fatal ? (strcmp(kind, "cqevent") == 0 ? "a completion event, then poll_cq failing" : "IBV_EVENT_DEVICE_FATAL")
		       : rel_errname(err));
	// Still alive: nothing of the device may be left in this process, and
	// the kernel's unregistration goes on without us (up to 20 s to see it).
	int left = 1, listed = 1;
	for (double end = woke + 20; rel_now() < end; usleep(100 * 1000)) {
		left = uverbs_left(note, sizeof(note));
		listed = dev_listed(rel_devname(0));
		if (!left && !listed)
			break;
	}
	snprintf(name, sizeof(name), "waiter_%s_released", kind);
	rel_check(!left, name, woke, "%s while still running", note);
	snprintf(name, sizeof(name), "waiter_%s_device_gone", kind);
	rel_check(!listed, name, woke, "%s %s `rdma dev` while this process still runs", rel_devname(0),
		  listed ? "still in" : "left");
	t0 = rel_now();
	if (cq)
		ibv_destroy_cq(cq);
	if (ch)
		ibv_destroy_comp_channel(ch);
	if (ep >= 0)
		close(ep);
	rel_end_close(&A);
	snprintf(name, sizeof(name), "waiter_%s_teardown", kind);
	rel_pass(name, t0, "teardown returned");
	return rel_exit_code();
}

int main(int argc, char **argv)
{
	rel_prog = "faults";
	if (argc == 2 && strcmp(argv[1], "enomem") == 0)
		return mode_enomem();
	if (argc == 2 && strcmp(argv[1], "watch") == 0)
		return mode_watch();
	if (argc == 3 && strcmp(argv[1], "waiter") == 0)
		return mode_waiter(argv[2]);
	fprintf(stderr, "usage: faults enomem|watch|waiter async|epoll|cqevent\n");
	return 2;
}
