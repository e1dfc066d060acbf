// SPDX-License-Identifier: GPL-2.0
/*
 * XDomain API: HopIDs, DMA paths, control requests and responses, protocol
 * handlers (linux:include/linux/thunderbolt.h, behaviour after
 * linux:drivers/thunderbolt/xdomain.c).
 *
 * The route in a delivered packet is rewritten to the receiver's route to
 * the sender: the receiving side answers on the route it read
 * (tb_xdp_handle_request() in xdomain.c) and the requester matches the
 * answer by its own route (tb_xdomain_match()). Every cable end has a
 * route of its own here (main.c tbl_route), which is what lets the module's
 * route-keyed control handler tell them apart in one kernel.
 */

#define pr_fmt(fmt) "tbloop: " fmt

#include <linux/module.h>
#include <linux/rwsem.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "tbloop.h"

static LIST_HEAD(tbl_protocol_handlers);
static DECLARE_RWSEM(tbl_handlers_sem);

/* Offsets in struct tb_xdp_header (linux:drivers/thunderbolt/tb_msgs.h). */
#define TBL_XDP_UUID_OFF	12
#define TBL_XDP_MIN_SIZE	(TBL_XDP_UUID_OFF + 16)

struct tbl_request {
	struct list_head node;
	uuid_t uuid;
	u32 route_hi, route_lo;
	void *response;
	size_t response_size;
	enum tb_cfg_pkg_type response_type;
	struct completion done;
	int err;
};

struct tbl_delivery {
	struct work_struct work;
	struct tbl_xd *to;	/* a reference on to->xd.dev */
	size_t size;
	u8 buf[];
};

static struct tbl_xd *tbl_peer_locked(struct tbl_xd *x)
{
	struct tbl_cable *c = x->cable;

	if (!c || !c->plugged || c->end[x->side] != x)
		return NULL;
	return c->end[!x->side];
}

static void tbl_put_route(u8 *buf, u64 route)
{
	u32 *w = (u32 *)buf;

	/* The header's dwords are in CPU order in memory, as ctl.c builds them. */
	w[0] = upper_32_bits(route);
	w[1] = lower_32_bits(route);
}

static int tbl_check_packet(struct tb_xdomain *xd, const void *buf,
			    size_t size, const char *what)
{
	if (!xd || !buf || size < TBL_XDP_MIN_SIZE || size % 4) {
		pr_warn_ratelimited("%s: %s of %zu bytes: not a whole XDomain header\n",
				    xd ? dev_name(&xd->dev) : "?", what, size);
		return -EINVAL;
	}
	if (size > TBL_CTL_MAX_PAYLOAD) {
		pr_warn_ratelimited("%s: %s of %zu bytes exceeds a control frame (%d)\n",
				    dev_name(&xd->dev), what, size,
				    TBL_CTL_MAX_PAYLOAD);
		return -E2BIG;
	}
	return 0;
}

/* ---- HopIDs ---- */

int tb_xdomain_alloc_in_hopid(struct tb_xdomain *xd, int hopid)
{
	if (hopid < 0)
		hopid = TBL_MIN_HOPID;
	if (hopid < TBL_MIN_HOPID || hopid > (int)xd->local_max_hopid)
		return -EINVAL;
	return ida_alloc_range(&xd->in_hopids, hopid, xd->local_max_hopid,
			       GFP_KERNEL);
}
EXPORT_SYMBOL_GPL(tb_xdomain_alloc_in_hopid);

int tb_xdomain_alloc_out_hopid(struct tb_xdomain *xd, int hopid)
{
	if (hopid < 0)
		hopid = TBL_MIN_HOPID;
	if (hopid < TBL_MIN_HOPID || hopid > (int)xd->remote_max_hopid)
		return -EINVAL;
	return ida_alloc_range(&xd->out_hopids, hopid, xd->remote_max_hopid,
			       GFP_KERNEL);
}
EXPORT_SYMBOL_GPL(tb_xdomain_alloc_out_hopid);

void tb_xdomain_release_in_hopid(struct tb_xdomain *xd, int hopid)
{
	if (hopid < TBL_MIN_HOPID || hopid > (int)xd->local_max_hopid) {
		pr_warn("%s: releasing input HopID %d that cannot have been allocated\n",
			dev_name(&xd->dev), hopid);
		return;
	}
	ida_free(&xd->in_hopids, hopid);
}
EXPORT_SYMBOL_GPL(tb_xdomain_release_in_hopid);

void tb_xdomain_release_out_hopid(struct tb_xdomain *xd, int hopid)
{
	if (hopid < TBL_MIN_HOPID || hopid > (int)xd->remote_max_hopid) {
		pr_warn("%s: releasing output HopID %d that cannot have been allocated\n",
			dev_name(&xd->dev), hopid);
		return;
	}
	ida_free(&xd->out_hopids, hopid);
}
EXPORT_SYMBOL_GPL(tb_xdomain_release_out_hopid);

/* ---- DMA paths ---- */

int tb_xdomain_enable_paths(struct tb_xdomain *xd, int transmit_path,
			    int transmit_ring, int receive_path,
			    int receive_ring)
{
	struct tbl_xd *x = tbl_xd(xd);
	int hops = x->host->nhi.hop_count;
	struct tbl_path *p, *np;
	unsigned long flags;
	int ret = 0;

	if (transmit_path < TBL_MIN_HOPID ||
	    transmit_path > (int)xd->remote_max_hopid ||
	    receive_path < TBL_MIN_HOPID ||
	    receive_path > (int)xd->local_max_hopid ||
	    transmit_ring < 1 || transmit_ring >= hops ||
	    receive_ring < 1 || receive_ring >= hops) {
		pr_warn("%s: enable_paths(%d, %d, %d, %d) out of range\n",
			dev_name(&xd->dev), transmit_path, transmit_ring,
			receive_path, receive_ring);
		return -EINVAL;
	}

	np = kzalloc(sizeof(*np), GFP_KERNEL);
	if (!np)
		return -ENOMEM;
	np->transmit_path = transmit_path;
	np->transmit_ring = transmit_ring;
	np->receive_path = receive_path;
	np->receive_ring = receive_ring;

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	if (!tbl_peer_locked(x)) {
		ret = -ENOTCONN;
		goto out;
	}
	list_for_each_entry(p, &x->paths, node) {
		if (p->transmit_ring == transmit_ring ||
		    p->transmit_path == transmit_path ||
		    p->receive_ring == receive_ring ||
		    p->receive_path == receive_path) {
			ret = -EBUSY;
			goto out;
		}
	}
	list_add_tail(&np->node, &x->paths);
	np = NULL;
out:
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);
	kfree(np);
	if (ret)
		pr_info("%s: enable_paths(%d, %d, %d, %d): %d\n",
			dev_name(&xd->dev), transmit_path, transmit_ring,
			receive_path, receive_ring, ret);
	return ret;
}
EXPORT_SYMBOL_GPL(tb_xdomain_enable_paths);

static bool tbl_wild(int want, int have)
{
	return want < 0 || want == have;
}

int tb_xdomain_disable_paths(struct tb_xdomain *xd, int transmit_path,
			     int transmit_ring, int receive_path,
			     int receive_ring)
{
	struct tbl_xd *x = tbl_xd(xd);
	struct tbl_path *p, *n;
	unsigned long flags;
	LIST_HEAD(gone);

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	list_for_each_entry_safe(p, n, &x->paths, node) {
		if (tbl_wild(transmit_path, p->transmit_path) &&
		    tbl_wild(transmit_ring, p->transmit_ring) &&
		    tbl_wild(receive_path, p->receive_path) &&
		    tbl_wild(receive_ring, p->receive_ring))
			list_move(&p->node, &gone);
	}
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);
	list_for_each_entry_safe(p, n, &gone, node)
		kfree(p);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_xdomain_disable_paths);

void tbl_xd_drop_paths(struct tbl_xd *x)
{
	tb_xdomain_disable_paths(&x->xd, -1, -1, -1, -1);
}

/*
 * The RX ring a frame from TX ring @tx arrives on, or NULL: the sender's
 * path names the HopID it leaves on, the peer's path names the ring that
 * HopID lands in. Called by the fabric with @tx's lock held.
 */
struct tbl_ring *tbl_route_frame(struct tbl_ring *tx)
{
	struct tbl_host *host = tx->host;
	struct tb_ring *rx = NULL;
	int c;

	spin_lock(&tbl_fabric_lock);
	for (c = 0; c < tbl_ncables && !rx; c++) {
		struct tbl_cable *cable = &tbl_cables[c];
		struct tbl_xd *x, *peer;
		struct tbl_path *p, *q;
		int s;

		if (cable->dom[0] == host->index)
			s = 0;
		else if (cable->dom[1] == host->index)
			s = 1;
		else
			continue;
		x = cable->end[s];
		peer = cable->end[!s];
		if (!cable->plugged || !x || !peer)
			continue;
		list_for_each_entry(p, &x->paths, node) {
			if (p->transmit_ring != tx->ring.hop)
				continue;
			list_for_each_entry(q, &peer->paths, node) {
				struct tb_nhi *nhi = &peer->host->nhi;

				if (q->receive_path != p->transmit_path)
					continue;
				spin_lock(&nhi->lock);
				rx = nhi->rx_rings[q->receive_ring];
				spin_unlock(&nhi->lock);
				break;
			}
			break;
		}
	}
	spin_unlock(&tbl_fabric_lock);
	return rx ? tbl_ring(rx) : NULL;
}

/* ---- control packets ---- */

static void tbl_deliver_fn(struct work_struct *work)
{
	struct tbl_delivery *d = container_of(work, struct tbl_delivery, work);
	struct tb_protocol_handler *h;
	bool handled = false;

	if (!READ_ONCE(d->to->registered) || d->to->xd.is_unplugged)
		goto out;

	down_read(&tbl_handlers_sem);
	list_for_each_entry(h, &tbl_protocol_handlers, list) {
		if (memcmp(h->uuid, d->buf + TBL_XDP_UUID_OFF, sizeof(uuid_t)))
			continue;
		if (h->callback(d->buf, d->size, h->data) > 0) {
			handled = true;
			break;
		}
	}
	up_read(&tbl_handlers_sem);
	/* No answer for an unhandled request: the requester times out. */
	if (!handled)
		atomic64_inc(&tbl_stats.requests_unhandled);
out:
	put_device(&d->to->xd.dev);
	kfree(d);
}

int tb_xdomain_request(struct tb_xdomain *xd, const void *request,
		       size_t request_size, enum tb_cfg_pkg_type request_type,
		       void *response, size_t response_size,
		       enum tb_cfg_pkg_type response_type,
		       unsigned int timeout_msec)
{
	struct tbl_xd *x = tbl_xd(xd);
	struct tbl_delivery *d;
	struct tbl_request req;
	struct tbl_xd *peer;
	unsigned long flags;
	int ret;

	ret = tbl_check_packet(xd, request, request_size, "request");
	if (ret)
		return ret;
	if (!response || response_size < TBL_XDP_MIN_SIZE ||
	    response_size > TBL_CTL_MAX_PAYLOAD) {
		pr_warn_ratelimited("%s: response buffer of %zu bytes cannot hold an XDomain response\n",
				    dev_name(&xd->dev), response_size);
		return -EINVAL;
	}

	d = kmalloc(struct_size(d, buf, request_size), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	memcpy(d->buf, request, request_size);
	d->size = request_size;
	INIT_WORK(&d->work, tbl_deliver_fn);

	memset(&req, 0, sizeof(req));
	memcpy(&req.uuid, (const u8 *)request + TBL_XDP_UUID_OFF, sizeof(uuid_t));
	req.route_hi = ((const u32 *)request)[0];
	req.route_lo = ((const u32 *)request)[1];
	req.response = response;
	req.response_size = response_size;
	req.response_type = response_type;
	init_completion(&req.done);

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	peer = tbl_peer_locked(x);
	if (!peer || xd->is_unplugged) {
		spin_unlock_irqrestore(&tbl_fabric_lock, flags);
		kfree(d);
		return -ENOTCONN;
	}
	list_add_tail(&req.node, &x->requests);
	get_device(&peer->xd.dev);
	d->to = peer;
	tbl_put_route(d->buf, peer->xd.route);
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);

	atomic64_inc(&tbl_stats.requests);
	queue_work(peer->host->wq, &d->work);

	if (!wait_for_completion_timeout(&req.done,
					 msecs_to_jiffies(timeout_msec))) {
		spin_lock_irqsave(&tbl_fabric_lock, flags);
		if (!list_empty(&req.node)) {
			list_del_init(&req.node);
			req.err = -ETIMEDOUT;
			atomic64_inc(&tbl_stats.requests_timed_out);
		}
		spin_unlock_irqrestore(&tbl_fabric_lock, flags);
		/* Completed after all, between the timeout and the lock. */
		if (req.err != -ETIMEDOUT)
			wait_for_completion(&req.done);
	}
	return req.err;
}
EXPORT_SYMBOL_GPL(tb_xdomain_request);

int tb_xdomain_response(struct tb_xdomain *xd, const void *response,
			size_t size, enum tb_cfg_pkg_type type)
{
	struct tbl_xd *x = tbl_xd(xd);
	struct tbl_request *req, *found = NULL;
	struct tbl_xd *peer;
	unsigned long flags;
	u32 route_hi, route_lo;
	int ret;

	ret = tbl_check_packet(xd, response, size, "response");
	if (ret)
		return ret;

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	peer = tbl_peer_locked(x);
	if (!peer || xd->is_unplugged) {
		spin_unlock_irqrestore(&tbl_fabric_lock, flags);
		return -ENOTCONN;
	}
	/* As received by the requester: its own route to us. */
	route_hi = upper_32_bits(peer->xd.route);
	route_lo = lower_32_bits(peer->xd.route);
	list_for_each_entry(req, &peer->requests, node) {
		if (req->response_type != type ||
		    (req->route_hi & ~BIT(31)) != route_hi ||
		    req->route_lo != route_lo ||
		    size < req->response_size ||
		    memcmp(&req->uuid, (const u8 *)response + TBL_XDP_UUID_OFF,
			   sizeof(uuid_t)))
			continue;
		found = req;
		break;
	}
	if (found) {
		list_del_init(&found->node);
		memcpy(found->response, response, found->response_size);
		tbl_put_route(found->response, peer->xd.route);
		found->err = 0;
		complete(&found->done);
	}
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);

	atomic64_inc(found ? &tbl_stats.responses : &tbl_stats.responses_unmatched);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_xdomain_response);

void tbl_xd_fail_requests(struct tbl_xd *x, int err)
{
	struct tbl_request *req, *n;
	unsigned long flags;

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	list_for_each_entry_safe(req, n, &x->requests, node) {
		list_del_init(&req->node);
		req->err = err;
		atomic64_inc(&tbl_stats.requests_failed_unplug);
		complete(&req->done);
	}
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);
}

/* The discovery protocol's UUID is the core's own (linux:drivers/thunderbolt/xdomain.c). */
static const uuid_t tbl_xdp_uuid =
	UUID_INIT(0xb638d70e, 0x42ff, 0x40bb,
		  0x97, 0xc2, 0x90, 0xe2, 0xc0, 0xb2, 0xff, 0x07);

int tb_register_protocol_handler(struct tb_protocol_handler *handler)
{
	if (!handler || !handler->uuid || !handler->callback)
		return -EINVAL;
	if (uuid_equal(handler->uuid, &tbl_xdp_uuid))
		return -EINVAL;
	down_write(&tbl_handlers_sem);
	list_add_tail(&handler->list, &tbl_protocol_handlers);
	up_write(&tbl_handlers_sem);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_register_protocol_handler);

void tb_unregister_protocol_handler(struct tb_protocol_handler *handler)
{
	down_write(&tbl_handlers_sem);
	list_del_init(&handler->list);
	up_write(&tbl_handlers_sem);
}
EXPORT_SYMBOL_GPL(tb_unregister_protocol_handler);

/* ---- lookups ---- */

static struct tb_xdomain *tbl_find(struct tb *tb, const uuid_t *uuid,
				   u64 route)
{
	struct tb_xdomain *found = NULL;
	unsigned long flags;
	int c;

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	for (c = 0; c < tbl_ncables; c++) {
		struct tbl_cable *cable = &tbl_cables[c];
		struct tbl_xd *x;

		if (cable->dom[0] == tb->index)
			x = cable->end[0];
		else if (cable->dom[1] == tb->index)
			x = cable->end[1];
		else
			continue;
		if (!x || !cable->plugged)
			continue;
		if (uuid ? uuid_equal(x->xd.remote_uuid, uuid) :
			   x->xd.route == route) {
			found = tb_xdomain_get(&x->xd);
			break;
		}
	}
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);
	return found;
}

struct tb_xdomain *tb_xdomain_find_by_uuid(struct tb *tb, const uuid_t *uuid)
{
	return uuid ? tbl_find(tb, uuid, 0) : NULL;
}
EXPORT_SYMBOL_GPL(tb_xdomain_find_by_uuid);

struct tb_xdomain *tb_xdomain_find_by_route(struct tb *tb, u64 route)
{
	return tbl_find(tb, NULL, route);
}
EXPORT_SYMBOL_GPL(tb_xdomain_find_by_route);

int tb_xdomain_lane_bonding_enable(struct tb_xdomain *xd)
{
	/* The link width is a knob here (debugfs), not a negotiation. */
	return -EOPNOTSUPP;
}
EXPORT_SYMBOL_GPL(tb_xdomain_lane_bonding_enable);

void tb_xdomain_lane_bonding_disable(struct tb_xdomain *xd)
{
}
EXPORT_SYMBOL_GPL(tb_xdomain_lane_bonding_disable);
