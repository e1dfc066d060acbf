/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tbloop: a loopback Thunderbolt bus standing in for thunderbolt.ko.
 *
 * Two to four hosts live in one kernel, joined by cables. By default two
 * hosts, each one domain (struct tb) with an NHI whose DMA device is a
 * platform device, with one or two cables between them; with a topology
 * (hosts=, topology=) every cable end is a port of its own domain. Each
 * cable end is an XDomain device on its domain. Frames queued on a TX ring
 * reach the RX ring that the peer's XDomain path maps them to.
 * README.md in this directory says what is modelled and what is not.
 */
#ifndef TBLOOP_H
#define TBLOOP_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/platform_device.h>
#include <linux/spinlock.h>
#include <linux/thunderbolt.h>
#include <linux/uuid.h>
#include <linux/version.h>
#include <linux/workqueue.h>

/* Machines (hosts=), domains (one per host, or one per port with a topology), cables. */
#define TBL_MAX_HOSTS		4
#define TBL_MAX_CABLES		6	/* every pair of four hosts */
#define TBL_MAX_DOMAINS		(2 * TBL_MAX_CABLES)
/* Hop 0 carries the control channel on a real NHI; data rings use 1..hop_count-1. */
#define TBL_NHI_HOPS		12
/* First HopID usable for DMA paths (linux:drivers/thunderbolt/tb.h TB_PATH_MIN_HOPID). */
#define TBL_MIN_HOPID		8
#define TBL_MAX_HOPID		15
/* Control packets: at most 256 bytes with the 4-byte CRC (linux:drivers/thunderbolt/ctl.c). */
#define TBL_CTL_MAX_PAYLOAD	(TB_FRAME_SIZE - 4)
#define TBL_XDOMAIN_HDR_SIZE	12

/* 6.12's header has neither; a frame's 12-bit size 0 means 4096 there too. */
#ifndef TB_MAX_FRAME_SIZE
#define TB_MAX_FRAME_SIZE	4096
static inline size_t tb_ring_frame_size(const struct ring_frame *frame)
{
	return frame->size ? frame->size : TB_MAX_FRAME_SIZE;
}
#endif

struct tbl_host;
struct tbl_cable;

/* One DMA path of tb_xdomain_enable_paths(), owned by the XDomain end that set it. */
struct tbl_path {
	struct list_head node;
	int transmit_path;
	int transmit_ring;
	int receive_path;
	int receive_ring;
};

/* One cable end: the XDomain device its host sees for the peer. */
struct tbl_xd {
	struct tb_xdomain xd;		/* first: the device core frees via xd.dev */
	struct tbl_host *host;
	struct tbl_cable *cable;
	int side;			/* cable->end[side] == this */
	struct list_head paths;		/* struct tbl_path, under tbl_fabric_lock */
	struct list_head requests;	/* outstanding tb_xdomain_request()s, same lock */
	bool registered;
	char name[32];
};

struct tbl_cable {
	int index;
	bool plugged;
	unsigned int link_speed;	/* Gb/s per lane, as xd->link_speed */
	enum tb_link_width link_width;
	int dom[2];			/* the domain (tbl_hosts index) of each end */
	struct tbl_xd *end[2];		/* end[s]: domain dom[s]'s XDomain, NULL when unplugged */
	struct dentry *debugfs;
};

/* One domain with its NHI: a host, or with a topology one port of a host. */
struct tbl_host {
	int index;			/* domain index, tb->index */
	int machine;			/* the host it belongs to: 0 = A, 1 = B, ... */
	int port;			/* its port on that host (0 without a topology) */
	/* The NHI device: DMA device and parent of the domain. */
	struct platform_device *pdev;	/* 7.x: nhi->dev */
	struct pci_dev *pci;		/* kernels whose nhi has a pci_dev (6.12) */
	struct tb *tb;
	struct tb_nhi nhi;
	uuid_t uuid;
	struct workqueue_struct *wq;	/* XDomain requests delivered to this host */
};

struct tbl_ring {
	struct tb_ring ring;		/* what the caller sees */
	struct tbl_host *host;
	struct list_head posted;	/* frames queued, not yet transferred */
	struct list_head done;		/* transferred, callback not yet run */
	struct list_head kick_node;	/* on tbl_kicked while the fabric owes it work */
	bool kicked;
	bool irq_masked;		/* poll mode: start_poll called, waiting for poll_complete */
	int cb_active;			/* callbacks running now (tb_ring_stop waits for 0) */
	bool e2e_blocked;		/* TX: head frame waits for a buffer on the peer */
	wait_queue_head_t wait;		/* callbacks done, frames moved (6.12 has no ring->wait) */
	u64 frames;
	u64 bytes;
};

static inline struct tbl_ring *tbl_ring(struct tb_ring *ring)
{
	return container_of(ring, struct tbl_ring, ring);
}

static inline struct device *tbl_nhi_dev(struct tbl_host *host)
{
#ifdef TBL_NHI_PCI
	return &host->nhi.pdev->dev;
#else
	return host->nhi.dev;
#endif
}

static inline struct tbl_xd *tbl_xd(struct tb_xdomain *xd)
{
	return container_of(xd, struct tbl_xd, xd);
}

/* main.c */
extern struct tbl_host tbl_hosts[TBL_MAX_DOMAINS];
extern int tbl_ndomains;
extern struct tbl_cable tbl_cables[TBL_MAX_CABLES];
extern int tbl_ncables;
extern spinlock_t tbl_fabric_lock;
extern struct mutex tbl_topology_lock;
extern struct dentry *tbl_debugfs;
int tbl_cable_plug(struct tbl_cable *cable);
void tbl_cable_unplug(struct tbl_cable *cable);

/* fault knobs and counters (main.c) */
struct tbl_stats {
	atomic64_t frames_delivered;
	atomic64_t bytes_delivered;
	atomic64_t frames_no_path;
	atomic64_t frames_no_buffer;
	atomic64_t frames_pdf_mismatch;
	atomic64_t frames_too_big;
	atomic64_t frames_bad_address;
	atomic64_t frames_dropped_fault;
	atomic64_t frames_corrupted;
	atomic64_t frames_canceled;
	atomic64_t requests;
	atomic64_t requests_timed_out;
	atomic64_t requests_failed_unplug;
	atomic64_t requests_unhandled;
	atomic64_t responses;
	atomic64_t responses_unmatched;
	atomic64_t ring_alloc_rejected;
};
extern struct tbl_stats tbl_stats;
bool tbl_fault_drop(void);
bool tbl_fault_corrupt(void);
bool tbl_fault_reject_ring(void);

/* bus.c */
extern const struct device_type tbl_domain_type;
int tbl_bus_init(void);
void tbl_bus_exit(void);
int tbl_xd_register(struct tbl_xd *x);
void tbl_xd_unregister(struct tbl_xd *x);
void tbl_services_sync(struct tbl_xd *x);
void tbl_services_remove_all(struct tbl_xd *x);
void tbl_services_rescan_all(void);

/* property.c */
struct tbl_local_dir {
	struct list_head node;
	char key[TB_PROPERTY_KEY_SIZE + 1];
	struct tb_property_dir *dir;
};
extern struct list_head tbl_local_dirs;	/* under tbl_dirs_lock */
extern struct mutex tbl_dirs_lock;
void tbl_schedule_rescan(void);

/* ring.c */
int tbl_fabric_init(void);
void tbl_fabric_exit(void);
void tbl_fabric_kick(struct tbl_ring *tr);

/* xdomain.c */
void tbl_xd_fail_requests(struct tbl_xd *x, int err);
void tbl_xd_drop_paths(struct tbl_xd *x);
struct tbl_ring *tbl_route_frame(struct tbl_ring *tx);

#endif /* TBLOOP_H */
