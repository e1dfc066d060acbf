/* A test double of the usb4 (thunderbolt_ibverbs) kernel side, plugged in at
 * the engine's syscall seam. */
#ifndef USB4V_DOUBLE_H
#define USB4V_DOUBLE_H
#include "engine.h"

enum {
	DBL_MAX_MR = 64, DBL_MAX_CQ = 16, DBL_MAX_QP = 16, DBL_RQ_DEPTH = 512,
	DBL_MAX_CQE = 8192, DBL_MAX_PARK = 1024,
	DBL_PARKED = 0x7fff, /* exec_op: the message waits for a receive (rnr_wait) */
};

/* How create_cq's ring offer is spoiled (tests of malformed offers). */
enum {
	DBL_SHM_OK = 0, DBL_SHM_BAD_MAGIC, DBL_SHM_BAD_ENTRY_SIZE, DBL_SHM_RING_OUTSIDE,
	DBL_SHM_CQE_MISMATCH, DBL_SHM_PRE_OVERFLOW, DBL_SHM_REFUSE_MMAP, DBL_SHM_NO_OFFER,
};

struct dbl_mr { int used; uint64_t addr, len; uint32_t lkey, rkey, access; };
struct dbl_recv { uint64_t wr_id; uint32_t num_sge; struct usb4v_ib_uverbs_sge sge; };
struct dbl_cq {
	int used;
	uint32_t cqe;
	struct usb4v_ib_uverbs_wc *priv; /* private ring (kernel-command polling) */
	uint32_t ph, pt;
	int shm_offered, shm_mode;
	uint8_t *shm;
	size_t shm_len;
	uint64_t mmap_off;
	uint32_t shm_produced, shm_consumed; /* private counters */
	int armed, solicited_only;
	uint64_t notifies, overflows;
};
struct dbl_qp {
	int used;
	uint32_t qpn, type, send_cq, recv_cq;
	int peer;
	struct dbl_recv rq[DBL_RQ_DEPTH];
	uint32_t rh, rt;
	uint32_t rq_depth; /* create_qp's max_recv_wr (0: DBL_RQ_DEPTH) */
	int err;           /* moved to ERR (dbl_qp_error): receives refused */
	uint64_t posted, delivered, flushed; /* receive WRs */
	/* DV */
	int dv;
	struct usb4v_usb4_rdma_dv_wqe *sq;
	struct usb4v_usb4_rdma_dv_cqe *dcq;
	struct usb4v_usb4_rdma_dv_doorbell *db;
	uint32_t sq_entries, cq_entries, sq_head, cq_tail;
	uint8_t gen;
	int dv_error; /* queue marked in error (pleite: dv_cq_overflow) */
};
/* Which module tree's DV side the double plays (facts cited in double.c). */
enum {
	DBL_DV_PLEITE = 0,     /* pleite-gda: DV v2, caps V2, KICK drains every opcode */
	DBL_DV_HELLAS_GDA_V2,  /* hellas-gda-v2: caps 0, KICK handles NOP only */
};

/* A message that met an empty RQ with rnr_wait on. */
struct dbl_parked {
	uint32_t from, to; /* QP handles */
	uint32_t opcode, flags, imm;
	uint64_t wr_id;
	uint8_t *buf;
	uint64_t len;
};

struct dbl {
	pthread_mutex_t mu;
	int rnr_wait; /* an empty RQ parks the message until a receive comes (rnr_retry 7) */
	int freed_qp_num_on;   /* DESTROY_QP: the QP's unpolled CQEs read freed_qp_num */
	uint32_t freed_qp_num; /* (the module's poll reads qp_num from the freed QP) */
	struct dbl_parked park[DBL_MAX_PARK];
	uint32_t park_head, npark;
	uint64_t rnr_naks; /* messages that met an empty RQ and waited */
	struct dbl_mr mr[DBL_MAX_MR];
	struct dbl_cq cq[DBL_MAX_CQ];
	struct dbl_qp qp[DBL_MAX_QP];
	struct usb4v_sys sys;
	int shm_spoil;
	int dv_enabled;
	int dv_model;     /* DBL_DV_* */
	uint32_t dv_caps; /* QUERY_CAPS caps of the pleite model */
	int dv_bad_gen_resp;
	int dv_stale_next;
	long kick_entry_delay_ns; /* sleep before a KICK reaches the double */
	uint8_t next_gen;
	uint64_t writes, ioctls, kicks, mmaps;
	uint64_t destroy_queues; /* DESTROY_QUEUE calls, failed ones included */
	uint64_t create_queues;  /* CREATE_QUEUE calls, failed ones included */
	/* Queue pages the application side allocated (dbl_app_create_queue),
	 * freed with the double. */
	void *app_mem[3 * DBL_MAX_QP];
	int app_mem_n;
	uint32_t poll_delay_us;  /* POLL_CQ sleeps this long, as a slow syscall */
	int poll_hold;           /* POLL_CQ waits while set: a syscall that ends when the test says */
	uint64_t polls_entered;  /* POLL_CQ writes that reached the double */
	uint64_t polls_done;     /* ... and that it answered */
	uint64_t kick_errors, post_send_busy;
	int pid; /* what getpid answers: dbl_fork changes it */
	/* The kernel's DV poll worker (pleite-gda:kernel/ibdev.c
	 * tbv_dv_poll_thread): a thread that drains every DV queue up to its
	 * producer sq_tail, so posts need no KICK. */
	int poller_on;
	pthread_t poller;
	uint64_t poller_scans;
};

struct dbl *dbl_new(void);
void dbl_free(struct dbl *d);
int dbl_reg_mr(struct dbl *d, uint64_t addr, uint64_t len, uint32_t access, uint32_t *lkey, uint32_t *rkey);
int dbl_create_cq(struct dbl *d, uint32_t cqe, struct usb4v_tbv_uresp_create_cq *tail);
int dbl_create_qp(struct dbl *d, uint32_t type, uint32_t send_cq, uint32_t recv_cq, uint32_t *qpn);
/* DESTROY_QP: tears the QP's DV queue down with it; the handle is reused. */
int dbl_destroy_qp(struct dbl *d, uint32_t h);
void dbl_set_poll_delay(struct dbl *d, uint32_t us);
void dbl_hold_polls(struct dbl *d, int hold);
uint64_t dbl_polls_entered(struct dbl *d);
uint64_t dbl_polls_done(struct dbl *d);
void dbl_connect(struct dbl *d, uint32_t a, uint32_t b);
/* Produces n dummy completions into a CQ, as a flood from the wire would. */
void dbl_flood_cq(struct dbl *d, uint32_t cq, uint32_t n);
/* Publishes a DV cq_tail beyond what the CQ holds, as a buggy kernel would. */
void dbl_spoil_dv_cq_tail(struct dbl *d, uint32_t qp, uint32_t ahead);
/* The application's side of DV (a GPU producer's, usb4_rdma_dv.h): its own
 * SQ/CQ/doorbell pages and a CREATE_QUEUE on the QP's handle through the
 * same ioctl the provider uses. 0 or the ioctl's negative errno; *gen gets
 * the queue's generation. */
int dbl_app_create_queue(struct dbl *d, uint32_t qp, uint32_t *gen);
/* What the engine sees after a fork(): another process id (the double's
 * memory stands for the child's copy of everything). */
void dbl_fork(struct dbl *d);
/* The QP's kernel RQ holds at most depth WRs (create_qp's max_recv_wr). */
void dbl_set_rq_depth(struct dbl *d, uint32_t h, uint32_t depth);
/* on: a message that meets an empty RQ waits for the next receive, as the
 * module's sender does with rnr_retry 7; off: RNR_RETRY_EXC_ERR at once. */
void dbl_set_rnr_wait(struct dbl *d, int on);
/* on: DESTROY_QP leaves its unpolled CQEs (kernel-command rings) with qp_num
 * qpn, as the module's poll reads the number from the freed QP. */
void dbl_set_freed_qp_num(struct dbl *d, int on, uint32_t qpn);
/* modify_qp to ERR: the RQ's WRs flushed into the receive CQ. */
int dbl_qp_error(struct dbl *d, uint32_t h);
void dbl_qp_counts(struct dbl *d, uint32_t h, uint64_t *posted, uint64_t *delivered, uint64_t *flushed, uint32_t *held);
uint64_t dbl_rnr_naks(struct dbl *d);
/* Starts (on) or stops the DV poll worker; 0 or a positive errno. */
int dbl_set_dv_poller(struct dbl *d, int on);
#endif
