// dmabuf: memory regions over dma-bufs (ibv_reg_dmabuf_mr) through libibverbs
// and whichever provider serves the devices (RDMAV_DRIVERS picks ours or the
// module's C provider), on the bed's two hosts (USB4VERBS_DEV0 on host 0,
// USB4VERBS_DEV1 on host 1) or on rxe0/rxe1.
//
// The dma-bufs come from vgem, the DRM driver without hardware: a dumb
// buffer (DRM_IOCTL_MODE_CREATE_DUMB) exported with PRIME
// (DRM_IOCTL_PRIME_HANDLE_TO_FD) is a dma-buf backed by shmem pages, and the
// exporter's own mapping (DRM_IOCTL_MODE_MAP_DUMB, mmap of the DRM fd) is
// where every byte is written before and checked after a transfer. No GPU
// is involved: peer-to-peer BAR memory stays untested.
//
// One line per case, --- PASS|FAIL|SKIP: rel/dmabuf/<case>, and for each
// case an outcome line "@@DMABUF <case> <outcome>" (ok, or the errno name)
// that guest-dmabuf.sh compares between the two providers of one boot.
//
//   nccl_probe        ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0): NCCL's probe;
//                     anything but EOPNOTSUPP/EPROTONOSUPPORT means supported
//   reg               a whole dumb buffer, at an iova of its own
//   reg_offset        a part of it, from a page offset (iova on the same page offset)
//   reg_fd-1          fd -1 with a real length
//   reg_not_dmabuf    an fd that is no dma-buf (/dev/null)
//   reg_offset_past   offset at the end of the buffer
//   reg_length_past   length beyond the buffer
//   reg_iova_misaligned offset and iova on different page offsets
//   nccl_predicts     NCCL's probe said what "reg" then did (outcome yes/no):
//                     supported exactly where a real dma-buf registers (issue 33)
//   reg_mr_ex_probe   NCCL's probe through ibv_reg_mr_ex (rdma-core 59+: fd,
//                     fd_offset, iova, length 0, fd -1): nccl_probe's answer
//   reg_mr_ex_fd      4096 bytes of the vgem buffer through ibv_reg_mr_ex:
//                     ibv_reg_dmabuf_mr's answer for the same arguments
//   reg_mr_ex_addr    a heap buffer through ibv_reg_mr_ex (addr): registers
//                     (libibverbs routes the slot we leave to it to our reg_mr)
//   control_<op>      the four transfers below between ordinary MRs, so that the
//                     cases and their checks are known to work on the device pair
//   write, read, send_recv, write_with_imm
//                     host 0 -> host 1 with both sides' buffers in dma-buf MRs
//                     (READ: host 0 reads host 1's), bytes checked through the
//                     receiver's mapping, bytes outside the target unchanged
//
// dmabuf --zcopy runs only the zcopy_* cases (zcopy_main below: RDMA WRITE
// out of a vgem and a udmabuf MR on hellas-gda-v2's zero-copy send path,
// and the directions it refuses), each on a fresh QP pair.
//
// DMABUF_EXPECT=reg (the tree registers dma-bufs) makes a refused "reg" a
// FAIL; DMABUF_EXPECT=refuse makes a successful one a FAIL; unset: either.
#include "../reliability/rel.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

// DRM UAPI (linux:include/uapi/drm/drm.h, drm_mode.h), declared here because
// the build host need not have libdrm's headers.
struct drm_version_k {
	int version_major, version_minor, version_patchlevel;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};
struct drm_mode_create_dumb_k {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};
struct drm_mode_map_dumb_k {
	uint32_t handle, pad;
	uint64_t offset;
};
struct drm_prime_handle_k {
	uint32_t handle, flags;
	int32_t fd;
};
struct drm_gem_close_k {
	uint32_t handle, pad;
};
#define DRM_IOCTL_VERSION_K _IOWR('d', 0x00, struct drm_version_k)
#define DRM_IOCTL_GEM_CLOSE_K _IOW('d', 0x09, struct drm_gem_close_k)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD_K _IOWR('d', 0x2d, struct drm_prime_handle_k)
#define DRM_IOCTL_MODE_CREATE_DUMB_K _IOWR('d', 0xB2, struct drm_mode_create_dumb_k)
#define DRM_IOCTL_MODE_MAP_DUMB_K _IOWR('d', 0xB3, struct drm_mode_map_dumb_k)

enum {
	BUF_SIZE = 256 * 1024, // 1024 x 64 at 32 bpp
	XFER_OFF = 4096 + 7,   // where a transfer lands inside a buffer: not page aligned
	XFER_LEN = 65536 + 333,
	GUARD = 0xEE,
};
static const uint64_t IOVA_BASE = 0x7f0000000000ull;

// One dumb buffer: its GEM handle, dma-buf fd and the exporter's mapping.
struct dbuf {
	uint32_t handle;
	int fd;
	uint8_t *map;
	size_t size;
	uint64_t base;	    // the address WRs use for byte 0: the MR's iova, or map for an ordinary MR
	const char *kind;   // "vgem", "udmabuf", NULL for ordinary memory
	int memfd;	    // udmabuf: the memfd behind it (map is its mapping), else 0
};

static int drm_fd = -1;

// vgem_open: the first /dev/dri/card* whose driver is vgem; -1 with why set.
static int vgem_open(char *why, size_t n)
{
	for (int i = 0; i < 16; i++) {
		char path[32], name[32] = "";
		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct drm_version_k v = {.name_len = sizeof(name) - 1, .name = name};
		if (ioctl(fd, DRM_IOCTL_VERSION_K, &v) == 0 && strcmp(name, "vgem") == 0)
			return fd;
		close(fd);
	}
	snprintf(why, n, "no vgem card under /dev/dri (modprobe vgem; CONFIG_DRM_VGEM)");
	return -1;
}

static int dbuf_new(struct dbuf *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = -1;
	struct drm_mode_create_dumb_k c = {.height = 64, .width = 1024, .bpp = 32};
	if (ioctl(drm_fd, DRM_IOCTL_MODE_CREATE_DUMB_K, &c))
		return errno;
	b->handle = c.handle;
	b->size = (size_t)c.size;
	struct drm_prime_handle_k p = {.handle = c.handle, .flags = O_CLOEXEC | O_RDWR, .fd = -1};
	if (ioctl(drm_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD_K, &p))
		return errno;
	b->fd = p.fd;
	struct drm_mode_map_dumb_k m = {.handle = c.handle};
	if (ioctl(drm_fd, DRM_IOCTL_MODE_MAP_DUMB_K, &m))
		return errno;
	void *map = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, drm_fd, (off_t)m.offset);
	if (map == MAP_FAILED)
		return errno;
	b->map = map;
	b->base = IOVA_BASE;
	b->kind = "vgem";
	memset(b->map, GUARD, b->size);
	return 0;
}

// struct udmabuf_create and UDMABUF_CREATE (linux:include/uapi/linux/udmabuf.h).
struct udmabuf_create_k {
	uint32_t memfd, flags;
	uint64_t offset, size;
};
#define UDMABUF_CREATE_K _IOW('u', 0x42, struct udmabuf_create_k)
#define UDMABUF_FLAGS_CLOEXEC_K 0x01

// udmabuf_new: BUF_SIZE bytes of a sealed memfd exported through
// /dev/udmabuf (CONFIG_UDMABUF); the exporter's mapping is the memfd's own.
// 0, or an errno.
static int udmabuf_new(struct dbuf *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = -1;
	b->size = BUF_SIZE;
	int mfd = memfd_create("dmabuf-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return errno;
	b->memfd = mfd;
	if (ftruncate(mfd, BUF_SIZE) || fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK))
		return errno;
	int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return errno;
	struct udmabuf_create_k c = {.memfd = (uint32_t)mfd, .flags = UDMABUF_FLAGS_CLOEXEC_K, .size = BUF_SIZE};
	b->fd = ioctl(dev, UDMABUF_CREATE_K, &c);
	int e = errno;
	close(dev);
	if (b->fd < 0)
		return e;
	void *map = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED)
		return errno;
	b->map = map;
	b->base = IOVA_BASE;
	b->kind = "udmabuf";
	memset(b->map, GUARD, b->size);
	return 0;
}

static void dbuf_free(struct dbuf *b)
{
	if (b->map && !b->kind)
		free(b->map);
	else if (b->map)
		munmap(b->map, b->size);
	if (b->memfd > 0)
		close(b->memfd);
	if (b->fd >= 0)
		close(b->fd);
	if (b->handle) {
		struct drm_gem_close_k g = {.handle = b->handle};
		ioctl(drm_fd, DRM_IOCTL_GEM_CLOSE_K, &g);
	}
	memset(b, 0, sizeof(*b));
	b->fd = -1;
}

static const int ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

static void outcome(const char *name, const char *what)
{
	printf("@@DMABUF %s %s\n", name, what);
	fflush(stdout);
}

static const char *expect(void)
{
	return rel_env("DMABUF_EXPECT", "");
}

// reg_case: one registration, kept in *keep when asked (else deregistered).
static struct ibv_mr *reg_case(const char *name, struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd,
			       int want_ok, int want_err, int keep)
{
	double t0 = rel_now();
	errno = 0;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, off, len, iova, fd, ACCESS);
	int e = errno;
	outcome(name, mr ? "ok" : rel_errname(e));
	if (mr) {
		if (!want_ok)
			rel_fail(name, t0, "registered (lkey %#x); want an errno", mr->lkey);
		else if (mr->length != len || (uint64_t)(uintptr_t)mr->addr != off || mr->pd != pd)
			rel_fail(name, t0, "ibv_mr addr %p length %zu pd %s; want addr %#" PRIx64 " length %zu",
				 mr->addr, mr->length, mr->pd == pd ? "ok" : "wrong", off, len);
		else
			rel_pass(name, t0, "lkey %#x rkey %#x", mr->lkey, mr->rkey);
		if (!keep) {
			int rc = ibv_dereg_mr(mr);
			if (rc)
				rel_fail("dereg", t0, "ibv_dereg_mr %s", rel_errname(rc));
			mr = NULL;
		}
		return mr;
	}
	if (want_ok)
		rel_fail(name, t0, "refused with %s; this tree registers dma-bufs (DMABUF_EXPECT=reg)", rel_errname(e));
	else if (e == 0)
		rel_fail(name, t0, "NULL with errno 0");
	else if (want_err && e != want_err)
		rel_pass(name, t0, "refused with %s (the kernel's %s is the usual answer)", rel_errname(e),
			 rel_errname(want_err));
	else
		rel_pass(name, t0, "refused with %s", rel_errname(e));
	return NULL;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

// check_buf: the target range carries the pattern and everything else is
// still GUARD; 0, or -1 with why set.
static int check_buf(const struct dbuf *b, size_t off, size_t len, unsigned seed, char *why, size_t n)
{
	uint8_t want[XFER_LEN];
	fill(want, len, seed);
	for (size_t i = 0; i < b->size; i++) {
		uint8_t w = (i >= off && i < off + len) ? want[i - off] : GUARD;
		if (b->map[i] != w) {
			size_t bad = 0;
			for (size_t j = i; j < b->size; j++)
				bad += b->map[j] != ((j >= off && j < off + len) ? want[j - off] : GUARD);
			snprintf(why, n, "byte %zu is %#x, want %#x (%s); %zu bytes wrong", i, b->map[i], w,
				 i >= off && i < off + len ? "target" : "outside the target", bad);
			return -1;
		}
	}
	return 0;
}

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, char *why, size_t n, const char *who)
{
	int rc = rel_poll_one(cq, wc, 20);
	if (rc <= 0) {
		snprintf(why, n, "%s: %s", who, rc == 0 ? "no completion in 20 s" : "poll_cq failed");
		return -1;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(why, n, "%s: completion %s (vendor %#x)", who, ibv_wc_status_str(wc->status), wc->vendor_err);
		return -1;
	}
	return 0;
}

enum op { OP_WRITE, OP_READ, OP_SEND, OP_WRITE_IMM };

// summary_counter: counter NAME of the module's debugfs summary ("NAME: N"
// lines), -1 when there is none.
static long long summary_counter(const char *name)
{
	FILE *f = fopen("/sys/kernel/debug/thunderbolt_ibverbs/summary", "re");
	long long v = -1;
	char line[256];
	size_t n = strlen(name);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, n) == 0 && line[n] == ':')
			v = strtoll(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

// zcopy_count: the module's data_wr_zcopy counter (the WRs it sent
// zero-copy, hellas-gda-v2:kernel/debugfs.c:146, counted at
// hellas-gda-v2:kernel/ibdev.c:4643), -1 when there is none.
static long long zcopy_count(void)
{
	return summary_counter("data_wr_zcopy");
}

// want_zcopy: the module's data_wr_zcopy counter must move too.
static void data_case(const char *name, enum op op, struct rel_end *A, struct rel_end *B, struct dbuf *ba,
		      struct dbuf *bb, struct ibv_mr *ma, struct ibv_mr *mb, unsigned seed, int want_zcopy)
{
	double t0 = rel_now();
	char why[256] = "";
	long long zc0 = zcopy_count(), rxe0 = summary_counter("data_rx_copy_error");
	memset(ba->map, GUARD, ba->size);
	memset(bb->map, GUARD, bb->size);
	// The source is A's buffer, except for READ, where A reads B's.
	struct dbuf *src = op == OP_READ ? bb : ba, *dst = op == OP_READ ? ba : bb;
	fill(src->map + XFER_OFF, XFER_LEN, seed);
	uint32_t imm = 0x5eed0000u | seed;
	struct ibv_wc wc;
	if (op == OP_SEND || op == OP_WRITE_IMM) {
		struct ibv_sge rs = {.addr = bb->base + XFER_OFF, .length = op == OP_SEND ? XFER_LEN : 0, .lkey = mb->lkey};
		struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &rs, .num_sge = op == OP_SEND ? 1 : 0}, *bad;
		int rc = ibv_post_recv(B->qp, &rwr, &bad);
		if (rc) {
			rel_fail(name, t0, "post_recv: %s", rel_errname(rc));
			outcome(name, rel_errname(rc));
			return;
		}
	}
	struct ibv_sge s = {.addr = ba->base + XFER_OFF, .length = XFER_LEN, .lkey = ma->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &s, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED}, *bad;
	switch (op) {
	case OP_WRITE:
		wr.opcode = IBV_WR_RDMA_WRITE;
		break;
	case OP_READ:
		wr.opcode = IBV_WR_RDMA_READ;
		break;
	case OP_SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case OP_WRITE_IMM:
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl(imm);
		break;
	}
	wr.wr.rdma.remote_addr = bb->base + XFER_OFF;
	wr.wr.rdma.rkey = mb->rkey;
	int rc = ibv_post_send(A->qp, &wr, &bad);
	if (rc) {
		rel_fail(name, t0, "post_send: %s", rel_errname(rc));
		outcome(name, rel_errname(rc));
		return;
	}
	if (wait_wc(A->cq, &wc, why, sizeof(why), "sender"))
		goto fail;
	if (op == OP_SEND || op == OP_WRITE_IMM) {
		if (wait_wc(B->cq, &wc, why, sizeof(why), "receiver"))
			goto fail;
		if (op == OP_WRITE_IMM && (!(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != imm)) {
			snprintf(why, sizeof(why), "receive completion: imm %#x (flags %#x), want %#x", ntohl(wc.imm_data),
				 wc.wc_flags, imm);
			goto fail;
		}
		if (op == OP_SEND && wc.byte_len != XFER_LEN) {
			snprintf(why, sizeof(why), "receive completion: byte_len %u, want %d", wc.byte_len, XFER_LEN);
			goto fail;
		}
	}
	if (check_buf(dst, XFER_OFF, XFER_LEN, seed, why, sizeof(why)))
		goto fail;
	char w2[200];
	if (check_buf(src, XFER_OFF, XFER_LEN, seed, w2, sizeof(w2))) {
		snprintf(why, sizeof(why), "source changed: %s", w2);
		goto fail;
	}
	long long zc1 = zcopy_count();
	char zc[96] = "";
	if (want_zcopy && (zc0 < 0 || zc1 <= zc0)) {
		snprintf(why, sizeof(why), "bytes right, but the module's data_wr_zcopy %s",
			 zc0 < 0 ? "is not in its debugfs summary" : "did not move");
		goto fail;
	}
	if (zc0 >= 0)
		snprintf(zc, sizeof(zc), "; data_wr_zcopy +%lld", zc1 - zc0);
	outcome(name, "ok");
	rel_pass(name, t0, "%d bytes at offset %d, every byte of both %zu-byte buffers checked (source %s, target %s)%s",
		 XFER_LEN, XFER_OFF, dst->size, src->kind ? src->kind : "ordinary", dst->kind ? dst->kind : "ordinary", zc);
	return;
fail:
	outcome(name, "fail");
	{
		// The receive side's part, where the module counts it.
		long long rxe1 = summary_counter("data_rx_copy_error");
		if (rxe0 >= 0 && rxe1 > rxe0) {
			size_t l = strlen(why);
			snprintf(why + l, sizeof(why) - l, "; the module's data_rx_copy_error +%lld", rxe1 - rxe0);
		}
	}
	rel_fail(name, t0, "%s", why);
}

// struct ibv_mr_init_attr of rdma-core 59+ (this file builds against older
// headers too: ibv_reg_mr_ex is looked up at run time), zero tail for fields
// later releases add behind a comp_mask bit we never set.
struct mr_init_attr59 {
	size_t length;
	int access;
	uint64_t comp_mask;
	uint64_t iova;
	void *addr;
	int fd;
	uint64_t fd_offset;
	void *dmah;
	uint64_t tail[8];
};
enum { MR59_IOVA = 1, MR59_ADDR = 2, MR59_FD = 4, MR59_FD_OFFSET = 8 };
typedef struct ibv_mr *(*reg_mr_ex_fn)(struct ibv_pd *, struct mr_init_attr59 *);

static reg_mr_ex_fn reg_mr_ex(void)
{
	return (reg_mr_ex_fn)dlsym(RTLD_DEFAULT, "ibv_reg_mr_ex");
}

// mr_ex_case: ibv_reg_mr_ex with an fd, against ibv_reg_dmabuf_mr's answer
// (want: "ok" or an errno name) for the same arguments.
static void mr_ex_case(const char *name, struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd, int access,
		       const char *want)
{
	double t0 = rel_now();
	reg_mr_ex_fn f = reg_mr_ex();
	if (!f) {
		outcome(name, "skip");
		rel_skip(name, "no ibv_reg_mr_ex in this libibverbs (rdma-core < 59)");
		return;
	}
	struct mr_init_attr59 in = {.length = len, .access = access, .comp_mask = MR59_FD | MR59_FD_OFFSET | MR59_IOVA,
				    .iova = iova, .fd = fd, .fd_offset = off};
	errno = 0;
	struct ibv_mr *mr = f(pd, &in);
	const char *got = mr ? "ok" : rel_errname(errno);
	outcome(name, got);
	if (mr) {
		int type;
		memcpy(&type, (char *)mr + 48, sizeof(type)); // verbs_mr.mr_type
		rel_check(strcmp(want, "ok") == 0 && type == 3 && mr->length == len, name, t0,
			  "registered, mr_type %d length %zu; ibv_reg_dmabuf_mr: %s", type, mr->length, want);
		ibv_dereg_mr(mr);
		return;
	}
	rel_check(strcmp(got, want) == 0, name, t0, "%s; ibv_reg_dmabuf_mr: %s", got, want);
}

// ---- dmabuf --zcopy (issue 33 item 1) ----
//
// The direction hellas-gda-v2 can move: an RDMA WRITE or WRITE_WITH_IMM whose
// source is a dma-buf MR, with the module loaded (or set at run time) with
// native_p2p_zcopy=1 and zcopy_min_bytes>0 (hellas-gda-v2:kernel/ibdev.c:104-111):
// the send path then streams the source from the exporter's DMA addresses
// (tbv_send_segments_dma_mapped, tbv_umem_dma_from_addr:
// hellas-gda-v2:kernel/ibdev.c:4623-4672, 6856-6900) instead of copying it with
// the CPU, which cannot read a dma-buf umem (:4095). guest-dmabuf.sh sets the
// parameters and runs this pass through each provider. Each case on a fresh QP
// pair: a failed WR consumes its PSN and the QP's next case would fail for it
// (hellas-gda-v2:kernel/ibdev.c:5346-5352, 8852-8855).
//   zcopy_write, zcopy_write_with_imm           vgem source -> ordinary target
//   zcopy_write_udmabuf, zcopy_write_with_imm_udmabuf   udmabuf source -> ordinary
//   zcopy_dmabuf_target   WRITE from ordinary memory into a vgem MR on host 1
//   zcopy_send            SEND from a vgem MR into an ordinary receive
//   zcopy_read            host 0 READs host 1's vgem MR into ordinary memory
// The first four move XFER_LEN bytes, checked byte for byte (the source
// through the exporter's mapping, unchanged), and data_wr_zcopy must move.

// fresh_qps: a new connected QP pair on A and B, the CQs drained.
static int fresh_qps(struct rel_end *A, struct rel_end *B, const char **what)
{
	struct ibv_wc wc[8];
	if (A->qp)
		ibv_destroy_qp(A->qp);
	if (B->qp)
		ibv_destroy_qp(B->qp);
	A->qp = B->qp = NULL;
	while (ibv_poll_cq(A->cq, 8, wc) > 0)
		;
	while (ibv_poll_cq(B->cq, 8, wc) > 0)
		;
	return rel_pair_connect(A, B, 16, what);
}

static struct ibv_mr *reg_dbuf(struct ibv_pd *pd, struct dbuf *b)
{
	if (!b->kind)
		return ibv_reg_mr(pd, b->map, b->size, ACCESS);
	return ibv_reg_dmabuf_mr(pd, 0, b->size, IOVA_BASE, b->fd, ACCESS);
}

static int ordinary_new(struct dbuf *b)
{
	memset(b, 0, sizeof(*b));
	b->fd = -1;
	b->size = BUF_SIZE;
	if (posix_memalign((void **)&b->map, 4096, BUF_SIZE))
		return ENOMEM;
	b->base = (uintptr_t)b->map;
	memset(b->map, GUARD, b->size);
	return 0;
}

static int zcopy_main(void)
{
	static const char *names[] = {"zcopy_write", "zcopy_write_with_imm", "zcopy_write_udmabuf",
				      "zcopy_write_with_imm_udmabuf", "zcopy_dmabuf_target", "zcopy_send", "zcopy_read"};
	enum { N = sizeof(names) / sizeof(names[0]) };
	struct rel_end A, B;
	const char *what = "";
	char why[200];
	int rc = rel_pair_open(&A, &B, 16, 4096, 16, &what);
	if (rc) {
		rel_fail("zcopy_setup", 0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	struct dbuf v0, v1, u0, o0, o1;
	drm_fd = vgem_open(why, sizeof(why));
	if (drm_fd < 0 || (rc = dbuf_new(&v0)) || (rc = dbuf_new(&v1))) {
		for (size_t i = 0; i < N; i++) {
			outcome(names[i], "skip");
			rel_skip(names[i], "%s", drm_fd < 0 ? why : rel_errname(rc));
		}
		return rel_exit_code();
	}
	int urc = udmabuf_new(&u0);
	if ((rc = ordinary_new(&o0)) || (rc = ordinary_new(&o1))) {
		rel_fail("zcopy_setup", 0, "heap buffers: %s", rel_errname(rc));
		return rel_exit_code();
	}
	errno = 0;
	struct ibv_mr *mv0 = reg_dbuf(A.pd, &v0), *mv1 = mv0 ? reg_dbuf(B.pd, &v1) : NULL;
	int e = errno;
	struct ibv_mr *mu0 = urc ? NULL : reg_dbuf(A.pd, &u0);
	int ue = urc ? urc : errno;
	struct ibv_mr *mo0 = reg_dbuf(A.pd, &o0), *mo1 = reg_dbuf(B.pd, &o1);
	if (!mo0 || !mo1) {
		rel_fail("zcopy_setup", 0, "ordinary MRs: %s", rel_errname(errno));
		return rel_exit_code();
	}
	printf("# zcopy: data_wr_zcopy %lld at the start\n", zcopy_count());
	for (int i = 0; i < (int)N; i++) {
		int udma = i == 2 || i == 3;
		if (udma ? !mu0 : !(mv0 && mv1)) {
			outcome(names[i], "skip");
			rel_skip(names[i], "no dma-buf MR: %s registration refused with %s", udma ? "udmabuf" : "vgem",
				 rel_errname(udma ? ue : e));
			continue;
		}
		if ((rc = fresh_qps(&A, &B, &what))) {
			outcome(names[i], rel_errname(rc));
			rel_fail(names[i], 0, "a fresh QP pair: %s: %s", what, rel_errname(rc));
			continue;
		}
		unsigned seed = 40 + (unsigned)i;
		switch (i) {
		case 0:
			data_case(names[i], OP_WRITE, &A, &B, &v0, &o1, mv0, mo1, seed, 1);
			break;
		case 1:
			data_case(names[i], OP_WRITE_IMM, &A, &B, &v0, &o1, mv0, mo1, seed, 1);
			break;
		case 2:
			data_case(names[i], OP_WRITE, &A, &B, &u0, &o1, mu0, mo1, seed, 1);
			break;
		case 3:
			data_case(names[i], OP_WRITE_IMM, &A, &B, &u0, &o1, mu0, mo1, seed, 1);
			break;
		case 4:
			data_case(names[i], OP_WRITE, &A, &B, &o0, &v1, mo0, mv1, seed, 0);
			break;
		case 5:
			data_case(names[i], OP_SEND, &A, &B, &v0, &o1, mv0, mo1, seed, 0);
			break;
		case 6: // A reads B's buffer: the source is host 1's vgem MR
			data_case(names[i], OP_READ, &A, &B, &o0, &v1, mo0, mv1, seed, 0);
			break;
		}
	}
	printf("# zcopy: data_wr_zcopy %lld at the end\n", zcopy_count());
	struct ibv_mr *mrs[] = {mv0, mv1, mu0, mo0, mo1};
	for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
		if (mrs[i] && (rc = ibv_dereg_mr(mrs[i])))
			rel_fail("dereg", 0, "ibv_dereg_mr: %s", rel_errname(rc));
	rel_end_close(&A);
	rel_end_close(&B);
	dbuf_free(&v0);
	dbuf_free(&v1);
	dbuf_free(&u0);
	dbuf_free(&o0);
	dbuf_free(&o1);
	close(drm_fd);
	return rel_exit_code();
}

int main(int argc, char **argv)
{
	rel_prog = "dmabuf";
	if (argc > 1 && strcmp(argv[1], "--zcopy") == 0)
		return zcopy_main();
	static const char *data_cases[] = {"write", "read", "send_recv", "write_with_imm"};
	const char *regs[] = {"reg", "reg_offset", "reg_fd-1", "reg_not_dmabuf", "reg_offset_past", "reg_length_past",
			      "reg_iova_misaligned", "nccl_predicts", "reg_mr_ex_fd"};
	struct rel_end A, B;
	const char *what = "";
	// rel_pair_open registers an ordinary buffer too (unused here).
	int rc = rel_pair_open(&A, &B, 16, 4096, 16, &what);
	if (rc) {
		rel_fail("setup", 0, "%s: %s", what, rel_errname(rc));
		return rel_exit_code();
	}
	double t0 = rel_now();
	errno = 0;
	struct ibv_mr *pm = ibv_reg_dmabuf_mr(A.pd, 0, 0, 0, -1, 0);
	int e = errno;
	int supported = pm || (e != EOPNOTSUPP && e != EPROTONOSUPPORT);
	outcome("nccl_probe", pm ? "ok" : rel_errname(e));
	if (pm) {
		ibv_dereg_mr(pm);
		rel_fail("nccl_probe", t0, "registered a length-0 MR of fd -1");
	} else {
		rel_check(e != 0, "nccl_probe", t0, "%s: NCCL reads dma-buf MRs as %s", rel_errname(e),
			  supported ? "supported" : "unsupported");
	}
	mr_ex_case("reg_mr_ex_probe", A.pd, 0, 0, 0, -1, 0, pm ? "ok" : rel_errname(e));
	{
		double ta = rel_now();
		reg_mr_ex_fn f = reg_mr_ex();
		void *heap = NULL;
		if (!f) {
			outcome("reg_mr_ex_addr", "skip");
			rel_skip("reg_mr_ex_addr", "no ibv_reg_mr_ex in this libibverbs (rdma-core < 59)");
		} else if (!posix_memalign(&heap, 4096, 8192)) {
			struct mr_init_attr59 in = {
				.length = 8192, .access = ACCESS, .comp_mask = MR59_ADDR, .addr = heap};
			errno = 0;
			struct ibv_mr *mr = f(A.pd, &in);
			int e = errno;
			outcome("reg_mr_ex_addr", mr ? "ok" : rel_errname(e));
			if (!mr && e == EOPNOTSUPP)
				// rdma-core 61's ibv_reg_mr_ex asks a provider op that no provider
				// fills (librxe answers the same, seen in the same boot); 65's
				// routes the address form to reg_mr.
				rel_skip("reg_mr_ex_addr", "EOPNOTSUPP: this libibverbs's ibv_reg_mr_ex does not reach reg_mr");
			else
				rel_check(mr != NULL, "reg_mr_ex_addr", ta, "%s", mr ? "registered" : rel_errname(e));
			if (mr)
				ibv_dereg_mr(mr);
		}
		free(heap);
	}

	// control_*: the same transfers between ordinary MRs (ibv_reg_mr on heap
	// buffers), so the cases and their checks are known to work on this
	// device pair whatever the dma-buf MRs do.
	{
		struct dbuf ca = {.fd = -1, .size = BUF_SIZE}, cb = {.fd = -1, .size = BUF_SIZE};
		struct ibv_mr *mca = NULL, *mcb = NULL;
		static const char *cnames[] = {"control_write", "control_read", "control_send_recv", "control_write_with_imm"};
		double tc = rel_now();
		if (!posix_memalign((void **)&ca.map, 4096, BUF_SIZE) && !posix_memalign((void **)&cb.map, 4096, BUF_SIZE)) {
			ca.base = (uintptr_t)ca.map;
			cb.base = (uintptr_t)cb.map;
			mca = ibv_reg_mr(A.pd, ca.map, BUF_SIZE, ACCESS);
			mcb = ibv_reg_mr(B.pd, cb.map, BUF_SIZE, ACCESS);
		}
		if (mca && mcb) {
			for (int i = 0; i < 4; i++)
				data_case(cnames[i], (enum op)i, &A, &B, &ca, &cb, mca, mcb, 10 + (unsigned)i, 0);
		} else {
			rel_fail("control", tc, "ordinary MRs: %s", rel_errname(errno));
		}
		if (mca)
			ibv_dereg_mr(mca);
		if (mcb)
			ibv_dereg_mr(mcb);
		free(ca.map);
		free(cb.map);
	}

	char why[200];
	drm_fd = vgem_open(why, sizeof(why));
	if (drm_fd < 0) {
		for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
			rel_skip(regs[i], "%s", why);
		for (size_t i = 0; i < 4; i++)
			rel_skip(data_cases[i], "%s", why);
		rel_end_close(&A);
		rel_end_close(&B);
		return rel_exit_code();
	}
	struct dbuf ba, bb;
	if ((rc = dbuf_new(&ba)) || (rc = dbuf_new(&bb))) {
		rel_fail("vgem_buffer", 0, "dumb buffer / PRIME export / map: %s", rel_errname(rc));
		return rel_exit_code();
	}
	int want_ok = strcmp(expect(), "reg") == 0, want_refuse = strcmp(expect(), "refuse") == 0;
	struct ibv_mr *ma = NULL, *mb = NULL;
	{
		double t = rel_now();
		errno = 0;
		ma = ibv_reg_dmabuf_mr(A.pd, 0, ba.size, IOVA_BASE, ba.fd, ACCESS);
		e = errno;
		if (ma)
			mb = ibv_reg_dmabuf_mr(B.pd, 0, bb.size, IOVA_BASE, bb.fd, ACCESS);
		int e2 = errno;
		outcome("reg", ma && mb ? "ok" : rel_errname(ma ? e2 : e));
		if (ma && mb) {
			int type;
			memcpy(&type, (char *)ma + 48, sizeof(type)); // verbs_mr.mr_type
			if (want_refuse)
				rel_fail("reg", t, "registered; this tree has no dma-buf MRs (DMABUF_EXPECT=refuse)");
			else if (ma->length != ba.size || ma->addr != NULL || type != 3)
				rel_fail("reg", t, "ibv_mr addr %p length %zu mr_type %d; want 0, %zu, 3", ma->addr,
					 ma->length, type, ba.size);
			else
				rel_pass("reg", t, "both hosts: %zu-byte vgem buffers at iova %#" PRIx64
						   ", lkey %#x rkey %#x / lkey %#x rkey %#x, verbs_mr type DMABUF",
					 ba.size, IOVA_BASE, ma->lkey, ma->rkey, mb->lkey, mb->rkey);
		} else if (want_ok) {
			rel_fail("reg", t, "refused with %s; this tree registers dma-bufs (DMABUF_EXPECT=reg)",
				 rel_errname(ma ? e2 : e));
		} else {
			rel_pass("reg", t, "refused with %s", rel_errname(ma ? e2 : e));
		}
	}
	int registers = ma && mb;
	outcome("nccl_predicts", supported == registers ? "yes" : "no");
	rel_check(supported == registers, "nccl_predicts", rel_now(), "NCCL's probe said %s, the first real registration %s",
		  supported ? "supported" : "unsupported", registers ? "registered" : "was refused");
	if (!registers && ma) {
		ibv_dereg_mr(ma);
		ma = NULL;
	}
	// The registrations the kernel must check whether or not the tree registers.
	reg_case("reg_offset", A.pd, 8192, 65536, IOVA_BASE + 8192, ba.fd, registers, 0, 0);
	reg_case("reg_fd-1", A.pd, 0, 4096, 0, -1, 0, registers ? EBADF : EOPNOTSUPP, 0);
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	reg_case("reg_not_dmabuf", A.pd, 0, 4096, 0, nullfd, 0, registers ? EINVAL : EOPNOTSUPP, 0);
	close(nullfd);
	reg_case("reg_offset_past", A.pd, ba.size, 4096, 0, ba.fd, 0, registers ? EINVAL : EOPNOTSUPP, 0);
	reg_case("reg_length_past", A.pd, 0, ba.size + 4096, 0, ba.fd, 0, registers ? EINVAL : EOPNOTSUPP, 0);
	reg_case("reg_iova_misaligned", A.pd, 0, 4096, 0x100, ba.fd, 0, registers ? EINVAL : EOPNOTSUPP, 0);
	{
		errno = 0;
		struct ibv_mr *d = ibv_reg_dmabuf_mr(A.pd, 0, 4096, IOVA_BASE, ba.fd, ACCESS);
		char want[32];
		snprintf(want, sizeof(want), "%s", d ? "ok" : rel_errname(errno));
		if (d)
			ibv_dereg_mr(d);
		mr_ex_case("reg_mr_ex_fd", A.pd, 0, 4096, IOVA_BASE, ba.fd, ACCESS, want);
	}

	if (!registers) {
		for (size_t i = 0; i < 4; i++) {
			outcome(data_cases[i], "skip");
			rel_skip(data_cases[i], "no dma-buf MR: reg refused");
		}
	} else {
		data_case("write", OP_WRITE, &A, &B, &ba, &bb, ma, mb, 1, 0);
		data_case("read", OP_READ, &A, &B, &ba, &bb, ma, mb, 2, 0);
		data_case("send_recv", OP_SEND, &A, &B, &ba, &bb, ma, mb, 3, 0);
		data_case("write_with_imm", OP_WRITE_IMM, &A, &B, &ba, &bb, ma, mb, 4, 0);
	}
	// Deregistered before the QPs go: the order an application takes.
	if (ma && (rc = ibv_dereg_mr(ma)))
		rel_fail("dereg", 0, "ibv_dereg_mr: %s", rel_errname(rc));
	if (mb && (rc = ibv_dereg_mr(mb)))
		rel_fail("dereg", 0, "ibv_dereg_mr: %s", rel_errname(rc));
	rel_end_close(&A);
	rel_end_close(&B);
	dbuf_free(&ba);
	dbuf_free(&bb);
	close(drm_fd);
	return rel_exit_code();
}
