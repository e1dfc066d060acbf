/*
 * The data-path engine: post_send, post_recv, post_srq_recv, poll_cq and
 * req_notify_cq for four backends (rxe rings, usb4 kernel commands, usb4
 * mapped CQ ring, usb4 DV send queues). The Go API of this package and the
 * libibverbs ops table in cshim/ both call these functions, so there is one
 * implementation. Entry points take the PUBLIC libibverbs structs, mirrored
 * below, and return what rdma-core providers return: a positive errno with
 * *bad_wr set for post, a count or a negative errno for poll.
 */
#ifndef USB4V_ENGINE_H
#define USB4V_ENGINE_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "kabi.h"

/*
 * Public libibverbs structs. Layouts are stable v28..v65
 * (reference: rdma-core-private-abi.md Appendix B; rdma-core:libibverbs/verbs.h).
 */
struct usb4v_ibv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct usb4v_ibv_ah {
	void *context;
	void *pd;
	uint32_t handle;
};

struct usb4v_ibv_send_wr {
	uint64_t wr_id;
	struct usb4v_ibv_send_wr *next;
	struct usb4v_ibv_sge *sg_list;
	int num_sge;
	uint32_t opcode;     /* enum ibv_wr_opcode */
	uint32_t send_flags;
	uint32_t imm_data;   /* big endian, or invalidate_rkey */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct usb4v_ibv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			void *mw;
			uint32_t rkey;
			struct {
				void *mr;
				uint64_t addr;
				uint64_t length;
				unsigned int mw_access_flags;
			} bind_info;
		} bind_mw;
		struct {
			void *hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	} ext;
};

struct usb4v_ibv_recv_wr {
	uint64_t wr_id;
	struct usb4v_ibv_recv_wr *next;
	struct usb4v_ibv_sge *sg_list;
	int num_sge;
};

struct usb4v_ibv_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data;
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

_Static_assert(sizeof(struct usb4v_ibv_sge) == 16, "ibv_sge");
_Static_assert(sizeof(struct usb4v_ibv_send_wr) == 128, "ibv_send_wr");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, num_sge) == 24, "ibv_send_wr.num_sge");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, opcode) == 28, "ibv_send_wr.opcode");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, send_flags) == 32, "ibv_send_wr.send_flags");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, imm_data) == 36, "ibv_send_wr.imm_data");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, wr) == 40, "ibv_send_wr.wr");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, qp_type) == 72, "ibv_send_wr.qp_type");
_Static_assert(offsetof(struct usb4v_ibv_send_wr, ext) == 80, "ibv_send_wr.bind_mw");
_Static_assert(sizeof(struct usb4v_ibv_recv_wr) == 32, "ibv_recv_wr");
_Static_assert(sizeof(struct usb4v_ibv_wc) == 48, "ibv_wc");
_Static_assert(offsetof(struct usb4v_ibv_wc, imm_data) == 24, "ibv_wc.imm_data");
_Static_assert(offsetof(struct usb4v_ibv_wc, wc_flags) == 36, "ibv_wc.wc_flags");
_Static_assert(offsetof(struct usb4v_ibv_wc, pkey_index) == 40, "ibv_wc.pkey_index");
_Static_assert(offsetof(struct usb4v_ibv_wc, dlid_path_bits) == 45, "ibv_wc.dlid_path_bits");
_Static_assert(sizeof(struct usb4v_ibv_ah) == 24, "ibv_ah");

/* enum ibv_wr_opcode, ibv_send_flags, ibv_wc_opcode, ibv_wc_status (verbs.h). */
enum {
	USB4V_WR_RDMA_WRITE = 0,
	USB4V_WR_RDMA_WRITE_WITH_IMM = 1,
	USB4V_WR_SEND = 2,
	USB4V_WR_SEND_WITH_IMM = 3,
	USB4V_WR_RDMA_READ = 4,
	USB4V_WR_ATOMIC_CMP_AND_SWP = 5,
	USB4V_WR_ATOMIC_FETCH_AND_ADD = 6,
	USB4V_WR_LOCAL_INV = 7,
	USB4V_WR_BIND_MW = 8,
	USB4V_WR_SEND_WITH_INV = 9,
	USB4V_WR_ATOMIC_WRITE = 15,
};
enum {
	USB4V_SEND_FENCE = 1,
	USB4V_SEND_SIGNALED = 2,
	USB4V_SEND_SOLICITED = 4,
	USB4V_SEND_INLINE = 8,
};
enum {
	USB4V_WC_SEND = 0,
	USB4V_WC_RDMA_WRITE = 1,
	USB4V_WC_RDMA_READ = 2,
	USB4V_WC_COMP_SWAP = 3,
	USB4V_WC_FETCH_ADD = 4,
	USB4V_WC_RECV = 128,
	USB4V_WC_RECV_RDMA_WITH_IMM = 129,
};
enum {
	USB4V_WC_SUCCESS = 0,
	USB4V_WC_LOC_LEN_ERR = 1,
	USB4V_WC_LOC_PROT_ERR = 4,
	USB4V_WC_WR_FLUSH_ERR = 5,
	USB4V_WC_REM_ACCESS_ERR = 10,
	USB4V_WC_RETRY_EXC_ERR = 12,
	USB4V_WC_RNR_RETRY_EXC_ERR = 13,
	USB4V_WC_GENERAL_ERR = 21,
};
enum { USB4V_WC_WITH_IMM = 2 };
/* enum ibv_qp_type */
enum { USB4V_QPT_RC = 2, USB4V_QPT_UC = 3, USB4V_QPT_UD = 4 };
/* enum ibv_qp_state */
enum { USB4V_QPS_RESET = 0, USB4V_QPS_INIT = 1, USB4V_QPS_RTR = 2, USB4V_QPS_RTS = 3, USB4V_QPS_ERR = 6 };

/*
 * The syscall seam. The engine never calls write/ioctl/mmap itself; tests plug
 * a kernel double in here. Every function returns >= 0 on success or -errno.
 */
struct usb4v_sys {
	void *ctx;
	ssize_t (*write)(void *ctx, int fd, const void *buf, size_t len);
	int (*ioctl)(void *ctx, int fd, unsigned long req, void *arg);
	int (*mmap)(void *ctx, int fd, uint64_t offset, size_t len, void **addr);
	int (*munmap)(void *ctx, void *addr, size_t len);
	/* This process's id (NULL: getpid); a fork() child's differs from the
	 * parent's, which is how the engine tells an inherited object. */
	int (*getpid)(void *ctx);
};

/* The libc implementation of the seam. */
const struct usb4v_sys *usb4v_libc_sys(void);

enum usb4v_backend {
	USB4V_BACKEND_NONE = 0,
	USB4V_BACKEND_RXE = 1,    /* rxe mapped rings */
	USB4V_BACKEND_KCMD = 2,   /* usb4 kernel commands */
	USB4V_BACKEND_CQRING = 3, /* usb4 mapped CQ ring (ABI 2) */
	USB4V_BACKEND_DV = 4,     /* usb4 DV send queue (v2) */
	USB4V_BACKEND_SRQ_EMU = 5, /* SRQ only: the provider's, over the QPs' kernel RQs (srqemu.c) */
};

/* An AH as the engine needs it: cshim allocates its ibv_ah inside this. */
struct usb4v_ah {
	struct usb4v_ibv_ah ibv_ah; /* must stay first: the engine casts */
	uint32_t ah_num;            /* rxe: kernel AH index, 0 on old kernels */
	struct usb4v_rxe_av av;     /* rxe: copied into UD WQEs when ah_num == 0 */
};

/* One mapped rxe queue (producer of SQ/RQ/SRQ, consumer of CQ is user space). */
struct usb4v_rxe_ring {
	struct usb4v_rxe_queue_buf *buf;
	uint8_t *data;
	uint32_t mask;
	uint32_t log2_elem;
	size_t map_len;
	int owned; /* unmap on destroy */
};

struct usb4v_qp;
struct usb4v_srq_emu;
struct usb4v_wrex;

/* When a DV batch rings KICK (dv.c usb4v_dv_post_send). A batch that finds
 * the queue idle (every earlier WQE consumed, no signaled one waiting for its
 * CQE) KICKs in every mode: the KICK transmits at once, where the kernel's
 * poller would take it at its next scan, 10-15 us later. */
enum {
	USB4V_DV_KICK_UNKNOWN = 0, /* no busy batch yet: idle ones KICK; the first busy one learns */
	USB4V_DV_KICK_ALWAYS,      /* no kernel poller seen: KICK every batch */
	USB4V_DV_KICK_IDLE,        /* the kernel polls the queue: KICK an idle queue (and a full SQ) only */
};

/* Who holds the QP's DV send queue, as far as the provider knows
 * (usb4v_dv_owner). */
enum {
	USB4V_DV_OWNER_NONE = 0,  /* none of ours: not offered, not usable, or the provider's use is off */
	USB4V_DV_OWNER_PENDING,   /* ours at the first post_send (usb4v_qp_defer_dv) */
	USB4V_DV_OWNER_OURS,      /* the provider's: sends go through it */
	USB4V_DV_OWNER_APP,       /* our CREATE_QUEUE got EBUSY: the application attached one first */
};

/* What a deferred DV attach needs at the first post (usb4v_qp_defer_dv). */
struct usb4v_dv_defer {
	pthread_mutex_t mu; /* one attach; posters that come meanwhile wait */
	struct usb4v_usb4_rdma_dv_query_caps_resp caps;
	uint32_t driver_id;
	uint32_t max_send_wr;
	int pid; /* the process that deferred it: only it attaches */
};

struct usb4v_dv {
	struct usb4v_usb4_rdma_dv_wqe *sq;
	struct usb4v_usb4_rdma_dv_cqe *cq;
	struct usb4v_usb4_rdma_dv_doorbell *db;
	uint32_t sq_entries, cq_entries;
	uint32_t caps;
	uint8_t gen;
	uint32_t sq_tail;        /* private producer counter (24-bit space) */
	uint32_t cq_head;        /* private consumer counter */
	/* Serialises posters from writing a WQE to the KICK that carries its
	 * tail: a KICK with a tail another poster already kicked past marks
	 * the queue in error (pleite-gda:kernel/ibdev.c tbv_dv_drain_sq_locked:
	 * -EOVERFLOW), and the KICK is a system call, so a mutex, not a
	 * spinlock. */
	pthread_mutex_t post_mu;
	uint32_t signaled_inflight; /* bounds what the DV CQ must hold */
	/* USB4V_DV_KICK_*: whether a batch needs a KICK; a poller is
	 * learned at the first batch that finds the queue busy (dv.c
	 * dv_learn_kick). */
	int kick;
	uint64_t kicks;             /* KICKs rung (under post_mu; read relaxed) */
	int refusal_logged;         /* one EOPNOTSUPP log line per QP */
};

/* An engine object's place in its context's removal record (struct
 * usb4v_dev): a circular list under dev->mu. dev is NULL while the object
 * belongs to no record (not joined yet, left, or a fork() parent's). */
struct usb4v_dev_link {
	struct usb4v_dev_link *prev, *next;
	struct usb4v_dev *dev;
	int kind; /* USB4V_DEV_CQ, _QP, _SRQ */
};

enum { USB4V_DEV_HEAD, USB4V_DEV_CQ, USB4V_DEV_QP, USB4V_DEV_SRQ };

/* One per context: where device removal finds the context's data-path
 * objects, and whether it happened (docs/DESIGN.md, "Locks and device
 * removal"). An object joins when the control path made it and leaves when
 * it is freed, both under mu; the removal takes mu and, under it, only
 * stores atomics and trylocks object locks, so mu is a leaf: no thread
 * waits for another lock while holding it. The context holds one reference
 * and every joined object one, so an object freed after its context closed
 * (objects.c frees a destroyed CQ once its events are acknowledged) still
 * leaves a valid record. */
struct usb4v_dev {
	pthread_mutex_t mu;
	int gone;      /* atomic: the device was removed */
	unsigned refs; /* under mu */
	struct usb4v_dev_link objs;
};

struct usb4v_cq {
	int backend;
	struct usb4v_dev_link dev_link;
	const struct usb4v_sys *sys;
	int cmd_fd;
	uint32_t handle;
	uint32_t cqe;
	pthread_spinlock_t lock;
	/* Serialises pollers of a kernel-command CQ, taken before lock: their
	 * POLL_CQ write() is a whole system call, so they sleep here instead
	 * of spinning on lock. Guards pollbuf. */
	pthread_mutex_t poll_mu;
	/* USB4V_CQ_SLOW_*: 0 exactly when poll_cq may take the rxe fast path
	 * (rxe_ring.h usb4v_rxe_poll_cq_fast). Written under lock. */
	uint32_t slow;
	int maps_released; /* removal: its rings are anonymous memory now (atomic; set under lock) */
	int error; /* latched negative errno (overrun): permanent */
	struct usb4v_rxe_ring rxe;
	struct {
		struct usb4v_tbv_cq_shm *hdr;
		struct usb4v_ib_uverbs_wc *ring;
		uint32_t cqe;
		uint32_t head;     /* private slot cursor */
		uint32_t consumed; /* private total, published to hdr->consumed */
		size_t map_len;
	} shm;
	struct usb4v_qp *dv_qps; /* DV QPs whose send CQ this is (list via dv_next) */
	/* Kernel-path completions this CQ may still get: signaled sends and
	 * receives posted through kernel commands, less those polled (atomic).
	 * A kernel-command CQ that DV QPs feed asks the kernel only while it is
	 * not 0 (usb4v_poll_cq_kcmd_held), or kwork_always is set (an SRQ's
	 * receives land in any of its QPs' CQs), or every 256th poll that
	 * skipped it (kskip, under poll_mu): a completion we did not count is
	 * late, never lost. The pleite trees write no CQE for an unsignaled
	 * kernel-path send, failed or not (pleite-gda:kernel/ibdev.c
	 * tbv_send_complete, tbv_read_complete), and a DV QP's own
	 * completions, errors and flushes included, go to its DV CQ. */
	uint32_t kwork;
	int kwork_always;
	uint32_t kskip;
	/* A QP on a provider SRQ (srqemu.c) receives into this CQ: polled
	 * receive completions go through usb4v_srq_emu_fixup (atomic,
	 * sticky). */
	int srq_emu;
	/* kernel-command poll scratch */
	uint8_t *pollbuf;
	size_t pollbuf_len;
	/* Completions a kernel-command ibv_start_poll batch took from the
	 * kernel and ibv_end_poll left unread (cqex.c): every poller hands
	 * them out first. Guarded by poll_mu. */
	struct usb4v_ibv_wc *stash;
	uint32_t stash_pos, stash_n;
	char fallback_reason[96];
};

/* Why a CQ must be polled through usb4v_poll_cq rather than the rxe fast path. */
enum {
	USB4V_CQ_SLOW_BACKEND = 1, /* backend is not RXE */
	USB4V_CQ_SLOW_ERROR = 2,   /* error latched */
	USB4V_CQ_SLOW_DV = 4,      /* DV QPs merge into this CQ */
	USB4V_CQ_SLOW_GONE = 8,    /* device removed: error is -EIO, arming fails */
	USB4V_CQ_SLOW_SRQ_EMU = 16, /* a provider SRQ's QP receives into it (rxe with USB4VERBS_SRQ=provider):
				     * its completions go through usb4v_srq_emu_fixup, which the fast path skips */
};

struct usb4v_srq {
	int backend;
	struct usb4v_dev_link dev_link;
	const struct usb4v_sys *sys;
	int cmd_fd;
	uint32_t handle;
	uint32_t max_sge;
	/* A mutex, not a spinlock: a resize holds it across MODIFY_SRQ and
	 * the mmap of the new ring, and posters should sleep meanwhile. */
	pthread_mutex_t lock;
	struct usb4v_rxe_ring rq;
	int ring_error; /* errno: a resize left no usable ring (permanent) */
	int maps_released; /* removal: its ring is anonymous memory now (atomic; set under lock) */
	struct usb4v_srq_emu *emu; /* USB4V_BACKEND_SRQ_EMU: the provider's queue (srqemu.c) */
};

struct usb4v_qp {
	int send_backend;
	struct usb4v_dev_link dev_link;
	int recv_backend;
	const struct usb4v_sys *sys;
	int cmd_fd;
	uint32_t handle;
	uint32_t qp_num;
	uint32_t qp_type;
	int state; /* kept current by the control path */
	int sq_sig_all;
	/* Granted send queue depth: the most WRs one post_send takes (0: no
	 * bound known). Kernel commands need it: hellas-main's post_send
	 * takes WRs without a bound (kernel/ibdev.c tbv_post_send_one). */
	uint32_t max_send_wr;
	uint32_t max_send_sge, max_recv_sge, max_inline;
	pthread_spinlock_t sq_lock;
	pthread_spinlock_t rq_lock;
	struct usb4v_rxe_ring sq, rq;
	struct usb4v_srq *srq;
	int srq_member; /* provider SRQ: 1 + the QP's index in the SRQ's members (under srq->lock), 0: none */
	struct usb4v_cq *send_cq, *recv_cq;
	struct usb4v_dv *dv;
	struct usb4v_qp *dv_next;
	/* 1 while a DV attach waits for the first post_send (dv_defer
	 * holds what it needs); cleared, with release, once decided. */
	int dv_pending;
	struct usb4v_dv_defer *dv_defer;
	int dv_owner; /* USB4V_DV_OWNER_* (atomic) */
	int debug;    /* USB4VERBS_DEBUG: decisions made in C are logged */
	int gone; /* device removed: every post fails with EIO (atomic) */
	int maps_released; /* removal: its rings are anonymous memory now (atomic) */
	char fallback_reason[96];
	int kcmd_refusal_logged; /* one log line per QP for WRs kcmd.c refuses */
	struct usb4v_wrex *wrex; /* ibv_qp_ex batch state (wrex.c); NULL for a plain QP */
};

/* ---- data-path entry points ---- */
/* Whether wr asks for a completion on qp (IBV_SEND_SIGNALED or sq_sig_all). */
static inline int usb4v_wr_signaled(const struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *wr)
{
	return qp->sq_sig_all || (wr->send_flags & USB4V_SEND_SIGNALED);
}

int usb4v_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr,
		    struct usb4v_ibv_send_wr **bad_wr);
/* post_send of a whole batch or nothing (ibv_wr_complete, wrex.c). */
int usb4v_post_send_whole(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr,
			  struct usb4v_ibv_send_wr **bad_wr);
int usb4v_post_recv(struct usb4v_qp *qp, struct usb4v_ibv_recv_wr *wr,
		    struct usb4v_ibv_recv_wr **bad_wr);
int usb4v_post_srq_recv(struct usb4v_srq *srq, struct usb4v_ibv_recv_wr *wr,
			struct usb4v_ibv_recv_wr **bad_wr);
int usb4v_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);
int usb4v_req_notify_cq(struct usb4v_cq *cq, int solicited_only);

/*
 * The extended poll API (ibv_start_poll / ibv_next_poll / ibv_end_poll,
 * cqex.c). A cursor belongs to one ibv_cq_ex; between a start_poll that
 * returned 0 and the end_poll it holds the CQ as librxe does: the rxe ring
 * under cq->lock (read in place, consumed as next_poll moves on), kernel
 * commands under cq->poll_mu (POLL_CQ batches of USB4V_CQ_EX_BATCH, the
 * rest kept in cq->stash for the next poller of any kind), every other case
 * (mapped CQ ring, DV merge, a latched error) under the cursor's mutex, one
 * usb4v_poll_cq at a time. start/next return 0, ENOENT when the CQ is
 * empty, or the errno poll_cq would return negated (the hold is then
 * released). The hold belongs to the cursor: next_poll and end_poll act
 * for any thread, as librxe's do; end_poll while nothing is held is a no-op.
 */
enum { USB4V_CQ_EX_BATCH = 16 };
enum {
	USB4V_CURSOR_IDLE = 0,
	USB4V_CURSOR_RING = 1,
	USB4V_CURSOR_KCMD = 2,
	USB4V_CURSOR_GENERIC = 3,
};
struct usb4v_cq_cursor {
	int mode;              /* USB4V_CURSOR_*, atomic: what the holder took */
	uint32_t cons;         /* RING: ring index of cur, or of the next one */
	int live;              /* RING: cur still occupies slot cons */
	pthread_mutex_t mu;    /* GENERIC */
	struct usb4v_ibv_wc cur; /* the completion the accessors read */
};
void usb4v_cq_cursor_init(struct usb4v_cq_cursor *c);
void usb4v_cq_cursor_destroy(struct usb4v_cq_cursor *c);
int usb4v_cq_start_poll(struct usb4v_cq *cq, struct usb4v_cq_cursor *c);
int usb4v_cq_next_poll(struct usb4v_cq *cq, struct usb4v_cq_cursor *c);
void usb4v_cq_end_poll(struct usb4v_cq *cq, struct usb4v_cq_cursor *c);
/* poll_cq of a kernel-command CQ with poll_mu already held (engine.c). */
int usb4v_poll_cq_kcmd_held(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);

/* ---- object lifecycle (called by the control path) ---- */
struct usb4v_cq *usb4v_cq_new(const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t cqe);
/* rxe: map (or adopt, if addr != NULL) the CQ ring. 0 or -errno. */
int usb4v_cq_attach_rxe(struct usb4v_cq *cq, void *addr, uint64_t offset, size_t size);
/* usb4: try the mapped CQ ring offered by create_cq's response tail; on any
 * problem the CQ stays on kernel commands and 0 is returned with the reason
 * in cq->fallback_reason. Returns 1 when the ring is in use. */
int usb4v_cq_try_shm(struct usb4v_cq *cq, const struct usb4v_tbv_uresp_create_cq *tail,
		     uint32_t requested_cqe);
/* Resizing an rxe CQ (resize_cq): the kernel copies the outstanding
 * completions into a new ring during RESIZE_CQ, from the consumer index we
 * published, so pollers are held off (cq->lock, as librxe holds its CQ
 * lock) from before the command (begin) until the engine is on the new
 * ring (end with remap set and the ring's mmap offset and size as the
 * kernel wrote them back; remap 0 when the command failed). end returns 0
 * or a negative errno; after a failed remap every poll returns that errno.
 * Other backends only bracket the command. */
void usb4v_cq_resize_begin(struct usb4v_cq *cq);
int usb4v_cq_resize_end(struct usb4v_cq *cq, int remap, uint64_t offset, size_t size);
void usb4v_cq_free(struct usb4v_cq *cq);

struct usb4v_srq *usb4v_srq_new(const struct usb4v_sys *sys, int cmd_fd, uint32_t handle, uint32_t max_sge);
int usb4v_srq_attach_rxe(struct usb4v_srq *srq, void *addr, uint64_t offset, size_t size);
/* Resizing an rxe SRQ (modify_srq with IB_SRQ_MAX_WR): the kernel copies the
 * outstanding WQEs into a new ring during MODIFY_SRQ, so posters are held off
 * from before that command (begin) until the engine is on the new ring
 * (end with remap set and the ring's mmap offset and size, as the kernel
 * wrote them back; remap 0 when the command failed). end returns 0 or a
 * negative errno; after a failed remap every post fails with that errno. */
void usb4v_srq_resize_begin(struct usb4v_srq *srq);
int usb4v_srq_resize_end(struct usb4v_srq *srq, int remap, uint64_t offset, size_t size);
void usb4v_srq_free(struct usb4v_srq *srq);

/* ---- the provider's SRQ (srqemu.c) ----
 *
 * For a usb4 kernel without SRQs (max_srq 0 on every module tree): the
 * SRQ's receive WRs are lent to the kernel receive queues of the QPs
 * attached to it (POST_RECV on each QP, at most depth WRs per QP, the
 * SRQ's WRs shared among the QPs that can take receives), with a wr_id
 * that names the SRQ's slot; polling translates each receive completion
 * back (the application's wr_id, the QP's qp_num), lends the QP new WRs,
 * and puts a WR the kernel flushed (the QP went to ERR, or is being
 * destroyed) back in the SRQ instead of reporting it, as an SRQ keeps its
 * WRs when one of its QPs fails (linux:drivers/infiniband/sw/rxe/rxe_resp.c
 * flush_recv_queue). docs/srq.md has the design and its limits. */
struct usb4v_srq *usb4v_srq_new_emu(const struct usb4v_sys *sys, int cmd_fd, uint32_t max_wr,
				    uint32_t max_sge, uint32_t limit, uint64_t user_handle);
/* qp (created with this srq) joins the SRQ with a kernel RQ of depth WRs;
 * it is lent WRs once its state takes receives (INIT, RTR, RTS). 0 or
 * ENOMEM. */
int usb4v_srq_emu_attach(struct usb4v_srq *srq, struct usb4v_qp *qp, uint32_t depth);
enum { USB4V_SRQ_EMU_MAX_WR = 1, USB4V_SRQ_EMU_LIMIT = 2 }; /* ibv_srq_attr_mask */
/* modify_srq: max_wr (not below the WRs posted and not consumed: EINVAL)
 * and/or the limit (above max_wr: EINVAL; arms the limit event). */
int usb4v_srq_emu_modify(struct usb4v_srq *srq, uint32_t max_wr, uint32_t limit, int mask);
struct usb4v_srq_emu_stats {
	uint32_t max_wr, max_sge, limit; /* limit: 0 once the event fired */
	uint32_t posted;   /* WRs posted and not consumed */
	uint32_t pending;  /* ... of which not lent to any QP */
	uint32_t lent;     /* ... of which in QPs' kernel RQs */
	uint32_t qps;      /* attached QPs (destroy_srq: EBUSY while any) */
	uint32_t zombies;  /* destroyed QPs whose lent WRs still come back */
	uint64_t events;   /* limit events raised */
	uint64_t refills;  /* POST_RECV commands that lent WRs */
};
void usb4v_srq_emu_stats(struct usb4v_srq *srq, struct usb4v_srq_emu_stats *st);
/* Where the limit event goes: a socket (SOCK_SEQPACKET) whose other end is
 * the application's async fd; -1: nowhere (the event is still counted). */
void usb4v_srq_emu_set_event_fd(struct usb4v_srq *srq, int fd);
/* WRs lent to qp's kernel RQ now. */
uint32_t usb4v_srq_emu_lent(struct usb4v_qp *qp);
/* Polled completions of cq (wc[0..n)): translates the provider SRQ's,
 * drops the flushed ones it takes back, lends WRs again; the new count. */
int usb4v_srq_emu_fixup(struct usb4v_cq *cq, struct usb4v_ibv_wc *wc, int n);
/* Internal hooks (engine.c). */
void usb4v_srq_emu_qp_state(struct usb4v_qp *qp, int state);
void usb4v_srq_emu_detach(struct usb4v_qp *qp);
void usb4v_srq_emu_cq_gone(struct usb4v_cq *cq);
void usb4v_srq_emu_free(struct usb4v_srq *srq);
int usb4v_srq_emu_post(struct usb4v_srq *srq, struct usb4v_ibv_recv_wr *wr, struct usb4v_ibv_recv_wr **bad_wr);
/* The provider SRQ's lending into one QP's receive queue, as that QP's kernel
 * takes receives (engine.c): its rxe ring, else the POST_RECV command. */
int usb4v_srq_emu_post_qp(struct usb4v_srq *srq, struct usb4v_qp *qp, uint32_t handle,
			  struct usb4v_ibv_recv_wr *wr, struct usb4v_ibv_recv_wr **bad_wr);

struct usb4v_qp *usb4v_qp_new(const struct usb4v_sys *sys, int cmd_fd, uint32_t handle,
			      uint32_t qp_num, uint32_t qp_type, int sq_sig_all,
			      uint32_t max_send_sge, uint32_t max_recv_sge, uint32_t max_inline,
			      struct usb4v_cq *send_cq, struct usb4v_cq *recv_cq,
			      struct usb4v_srq *srq);
int usb4v_qp_attach_rxe(struct usb4v_qp *qp, void *sq_addr, uint64_t sq_off, size_t sq_size,
			void *rq_addr, uint64_t rq_off, size_t rq_size);
/* usb4 DV: QUERY_CAPS answer (0 or -errno). */
int usb4v_dv_query_caps(const struct usb4v_sys *sys, int cmd_fd, uint32_t driver_id,
			struct usb4v_usb4_rdma_dv_query_caps_resp *caps);
/* usb4 DV: CREATE_QUEUE for this QP, sized for its granted max_send_wr;
 * 1 when in use, 0 when it stays on kernel commands (reason in
 * qp->fallback_reason). */
int usb4v_qp_try_dv(struct usb4v_qp *qp, uint32_t driver_id,
		    const struct usb4v_usb4_rdma_dv_query_caps_resp *caps, uint32_t max_send_wr);
/* usb4 DV, deferred: the same checks now, the CREATE_QUEUE at the QP's
 * first post_send (from kernel commands), so that a QP nobody posts on
 * through the provider never gets a queue of ours. 1 when deferred, 0 when
 * it stays on kernel commands (reason in qp->fallback_reason), -ENOMEM. */
int usb4v_qp_defer_dv(struct usb4v_qp *qp, uint32_t driver_id,
		      const struct usb4v_usb4_rdma_dv_query_caps_resp *caps, uint32_t max_send_wr);
/* The deferred attach, run by the first post_send (dv.c); a no-op once
 * decided. A fork() child's copy of the QP never attaches: it stays on
 * kernel commands. */
void usb4v_dv_attach_pending(struct usb4v_qp *qp);
/* Frees a DV queue's memory (MADV_DONTFORK pages) and the struct. */
void usb4v_dv_free(struct usb4v_dv *dv);
void usb4v_qp_set_state(struct usb4v_qp *qp, int state);
/* Detach (DESTROY_QUEUE, unmap, unlink) and free, while the kernel QP lives
 * (or with the whole context going away). */
void usb4v_qp_free(struct usb4v_qp *qp, uint32_t driver_id);
/* The same after a successful DESTROY_QP: no DESTROY_QUEUE (the kernel tore
 * the queue down, and the handle may already be another QP's). */
void usb4v_qp_free_destroyed(struct usb4v_qp *qp);

/* A context's removal record, with the context's reference; NULL on
 * ENOMEM. usb4v_dev_put drops a reference (the context's at close); the
 * last one frees the record. */
struct usb4v_dev *usb4v_dev_new(void);
void usb4v_dev_put(struct usb4v_dev *dev);
/* The object joins dev's record (once, right after the control path made
 * it): from then on the removal finds it, until its free leaves. Joining a
 * record whose device is gone marks the object gone at once. */
void usb4v_cq_join(struct usb4v_cq *cq, struct usb4v_dev *dev);
void usb4v_qp_join(struct usb4v_qp *qp, struct usb4v_dev *dev);
void usb4v_srq_join(struct usb4v_srq *srq, struct usb4v_dev *dev);
/* A fork() child's copy of a parent's object forgets the parent's record
 * without touching it (its lock may have been held at the fork): the
 * child's removal is not the parent's. */
void usb4v_cq_forget_dev(struct usb4v_cq *cq);
void usb4v_qp_forget_dev(struct usb4v_qp *qp);
void usb4v_srq_forget_dev(struct usb4v_srq *srq);
/* The device was removed: marks dev gone and every joined object gone
 * (mark_gone below), then releases their mappings (release_maps below).
 * Returns how many objects were held (EBUSY from release_maps): call again
 * later, holding none of the locks a verb takes, until it returns 0. */
int usb4v_dev_remove(struct usb4v_dev *dev);

/* The device was removed (provider/removal.go): from now on posts return
 * EIO with *bad_wr at the first WR, poll_cq -EIO, req_notify_cq EIO. Safe
 * against concurrent data ops; the objects stay valid until freed. */
void usb4v_cq_mark_gone(struct usb4v_cq *cq);
void usb4v_qp_mark_gone(struct usb4v_qp *qp);
void usb4v_srq_mark_gone(struct usb4v_srq *srq);
/* After mark_gone: the rings mapped from the command fd become anonymous
 * memory, so they no longer hold the kernel's file (engine.c). 0, or EBUSY
 * when the object's lock is held: call again later, holding none of the
 * locks a verb takes. */
int usb4v_cq_release_maps(struct usb4v_cq *cq);
void usb4v_qp_release_maps(struct usb4v_qp *qp);
int usb4v_srq_release_maps(struct usb4v_srq *srq);

const char *usb4v_backend_name(int backend);
/* The QP's USB4V_DV_KICK_* (-1 without a DV queue), for tests and logs. */
int usb4v_dv_kick_mode(const struct usb4v_qp *qp);
/* KICKs the QP's DV queue rang so far (0 without one). */
uint64_t usb4v_dv_kicks(const struct usb4v_qp *qp);
/* The QP's USB4V_DV_OWNER_*. */
int usb4v_dv_owner(const struct usb4v_qp *qp);

/* ---- ibv_qp_ex work-request builders (wrex.c) ----
 *
 * The libibverbs ibv_wr_* API (rdma-core:libibverbs/man/ibv_wr_post.3): a
 * batch opened by usb4v_wr_start, one builder per WR, setters that complete
 * the WR built last, and usb4v_wr_complete posting the batch with one
 * doorbell (rxe: WQEs written in place into the SQ ring; other backends:
 * the batch staged and handed to usb4v_post_send as one list). Errors are
 * latched and returned by wr_complete, which then posts nothing, as librxe
 * does (rdma-core:providers/rxe/rxe.c). */

/* public struct ibv_mw (32 bytes) and ibv_mr, the members the engine reads. */
enum {
	USB4V_IBV_MW_RKEY = 16,
	USB4V_IBV_MW_TYPE = 24,
	USB4V_IBV_MR_LKEY = 36,
};
/* enum ibv_qp_create_send_ops_flags (verbs.h). */
enum {
	USB4V_QP_EX_WITH_RDMA_WRITE = 1 << 0,
	USB4V_QP_EX_WITH_RDMA_WRITE_WITH_IMM = 1 << 1,
	USB4V_QP_EX_WITH_SEND = 1 << 2,
	USB4V_QP_EX_WITH_SEND_WITH_IMM = 1 << 3,
	USB4V_QP_EX_WITH_RDMA_READ = 1 << 4,
	USB4V_QP_EX_WITH_ATOMIC_CMP_AND_SWP = 1 << 5,
	USB4V_QP_EX_WITH_ATOMIC_FETCH_AND_ADD = 1 << 6,
	USB4V_QP_EX_WITH_LOCAL_INV = 1 << 7,
	USB4V_QP_EX_WITH_BIND_MW = 1 << 8,
	USB4V_QP_EX_WITH_SEND_WITH_INV = 1 << 9,
	USB4V_QP_EX_WITH_TSO = 1 << 10,
	USB4V_QP_EX_WITH_FLUSH = 1 << 11,
	USB4V_QP_EX_WITH_ATOMIC_WRITE = 1 << 12,
};
/* The send_ops_flags a QP of this type and backend can carry (atomic
 * write only where the kernel has it: has_atomic_write). */
uint64_t usb4v_wrex_supported_ops(int send_backend, uint32_t qp_type, int has_atomic_write);
/* Gives qp the batch state for ops (a subset of the supported ones) and
 * max_send_wr slots. 0 or ENOMEM. */
int usb4v_qp_enable_wrex(struct usb4v_qp *qp, uint64_t ops, uint32_t max_send_wr);
void usb4v_wrex_free(struct usb4v_wrex *w);
void usb4v_wr_start(struct usb4v_qp *qp);
int usb4v_wr_complete(struct usb4v_qp *qp);
void usb4v_wr_abort(struct usb4v_qp *qp);
/* Builds one WR from tmpl: opcode, wr_id, send_flags, imm_data (or the
 * invalidate rkey) and the wr union; bind_mw as in ibv_send_wr. ATOMIC_WRITE
 * (no ibv_send_wr form) takes rdma.remote_addr/rkey from wr.rdma and its
 * 8 bytes from wr.atomic.swap (offset 16), which does not overlap them. */
void usb4v_wr_build(struct usb4v_qp *qp, const struct usb4v_ibv_send_wr *tmpl);
void usb4v_wr_set_sge_list(struct usb4v_qp *qp, size_t n, const struct usb4v_ibv_sge *sge);
/* struct ibv_data_buf (verbs.h). */
struct usb4v_ibv_data_buf {
	void *addr;
	size_t length;
};
_Static_assert(sizeof(struct usb4v_ibv_data_buf) == 16, "ibv_data_buf");
/* Inline data gathered from n buffers, copied before the call returns. */
void usb4v_wr_set_inline_list(struct usb4v_qp *qp, size_t n, const struct usb4v_ibv_data_buf *buf);
void usb4v_wr_set_ud_addr(struct usb4v_qp *qp, struct usb4v_ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey);
/* A call the QP cannot honour (why, for the one log line): the open batch
 * fails with err at wr_complete. */
void usb4v_wr_fail(struct usb4v_qp *qp, int err, const char *why);

/* ---- helpers shared by backends (engine.c) ---- */
/* Maps (addr NULL) or adopts a kernel rxe ring and validates its header
 * against the element size; 0 or -errno. release unmaps what setup mapped. */
int usb4v_rxe_ring_setup(const struct usb4v_sys *sys, int fd, struct usb4v_rxe_ring *r, void *addr,
			 uint64_t offset, size_t size, size_t min_elem);
void usb4v_rxe_ring_release(const struct usb4v_sys *sys, struct usb4v_rxe_ring *r);
void usb4v_uwc_to_ibv(const struct usb4v_ib_uverbs_wc *in, struct usb4v_ibv_wc *out);
/* The same, for the rxe fast path to inline. */
static inline void usb4v_uwc_to_ibv_inline(const struct usb4v_ib_uverbs_wc *in, struct usb4v_ibv_wc *out)
{
	out->wr_id = in->wr_id;
	out->status = in->status;
	out->opcode = in->opcode;
	out->vendor_err = in->vendor_err;
	out->byte_len = in->byte_len;
	out->imm_data = in->ex.imm_data;
	out->qp_num = in->qp_num;
	out->src_qp = in->src_qp;
	/* Copied verbatim, as rdma-core's ibv_cmd_poll_cq and rxe do. */
	out->wc_flags = in->wc_flags;
	out->pkey_index = in->pkey_index;
	out->slid = in->slid;
	out->sl = in->sl;
	out->dlid_path_bits = in->dlid_path_bits;
}

int usb4v_uverbs_ioctl(const struct usb4v_sys *sys, int fd, uint32_t driver_id,
		       uint16_t object, uint16_t method,
		       struct usb4v_ib_uverbs_attr *attrs, uint16_t nattrs);

/* Per-backend operations (rxe.c, kcmd.c, cqring.c, dv.c). */
/* rxe: the zero-WR POST_SEND that makes the kernel run the requester over
 * what was published; 0 or a positive errno. */
int usb4v_rxe_doorbell(struct usb4v_qp *qp);
int usb4v_rxe_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad);
struct usb4v_rxe_send_wqe;
void usb4v_rxe_wqe_header(struct usb4v_rxe_send_wqe *wqe, const struct usb4v_ibv_send_wr *wr);
int usb4v_rxe_post_recv(struct usb4v_rxe_ring *rq, uint32_t max_sge, struct usb4v_ibv_recv_wr *wr,
			struct usb4v_ibv_recv_wr **bad);
int usb4v_rxe_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);
int usb4v_kcmd_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad);
/* The whole list in one command, or nothing (ibv_wr_complete). On an error
 * *bad is the first WR the kernel did not take: the head when nothing went
 * out. */
int usb4v_kcmd_post_send_whole(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad);
int usb4v_kcmd_post_recv(const struct usb4v_sys *sys, int fd, uint32_t cmd, uint32_t handle,
			 struct usb4v_ibv_recv_wr *wr, struct usb4v_ibv_recv_wr **bad);
int usb4v_kcmd_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);
int usb4v_kcmd_req_notify(const struct usb4v_sys *sys, int fd, uint32_t handle, int solicited);
int usb4v_shm_poll_cq(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);
int usb4v_shm_validate(const struct usb4v_tbv_cq_shm *hdr, const struct usb4v_tbv_uresp_create_cq *tail,
		       uint32_t requested_cqe, size_t mapped_len, const char **why);
int usb4v_dv_post_send(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad);
/* Every WR of the list or none (ibv_wr_complete): encodes and room checked
 * first. */
int usb4v_dv_post_send_whole(struct usb4v_qp *qp, struct usb4v_ibv_send_wr *wr, struct usb4v_ibv_send_wr **bad);
/* DV CQEs of the CQ's DV QPs: a count, or -EIO (latched on cq). */
int usb4v_dv_poll_merge(struct usb4v_cq *cq, int ne, struct usb4v_ibv_wc *wc);
/* The DV caps an RC or UC QP needs before it gets a DV queue. */
uint32_t usb4v_dv_caps_needed(uint32_t qp_type);
int usb4v_dv_encode_wqe(const struct usb4v_ibv_send_wr *wr, uint32_t caps, uint8_t gen,
			struct usb4v_usb4_rdma_dv_wqe *out);
void usb4v_dv_cqe_to_ibv(const struct usb4v_usb4_rdma_dv_cqe *cqe, uint32_t qp_num, struct usb4v_ibv_wc *out);

#endif
