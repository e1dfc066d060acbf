// SPDX-License-Identifier: GPL-2.0
/*
 * tbloop: the hosts, their domains and NHIs, the cables between them, the
 * fault knobs and debugfs. See README.md for the model.
 */

#define pr_fmt(fmt) "tbloop: " fmt

#include <linux/debugfs.h>
#include <linux/dma-mapping.h>
#include <linux/iommu.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/platform_device.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "tbloop.h"

static int cables = 1;
module_param(cables, int, 0444);
MODULE_PARM_DESC(cables, "without a topology: cables between the two hosts, 1 or 2 (default 1)");

static int hosts = 2;
module_param(hosts, int, 0444);
MODULE_PARM_DESC(hosts, "hosts, 2 to 4 (default 2); more than 2 need a topology");

static char *topology;
module_param(topology, charp, 0444);
MODULE_PARM_DESC(topology, "cables between hosts as a list of pairs, e.g. 0-1,1-2,2-3,3-0 (a ring of four); every cable end is a port with its own domain and UUID. Unset: cables= between hosts 0 and 1 on one domain each");

static unsigned int link_speed[TBL_MAX_CABLES] = { 20, 20, 20, 20, 20, 20 };
static int link_speed_n;
module_param_array(link_speed, uint, &link_speed_n, 0444);
MODULE_PARM_DESC(link_speed, "per cable: Gb/s per lane at load (default 20); debugfs cableN/link_speed changes it later");

static unsigned int link_lanes[TBL_MAX_CABLES] = { 2, 2, 2, 2, 2, 2 };
static int link_lanes_n;
module_param_array(link_lanes, uint, &link_lanes_n, 0444);
MODULE_PARM_DESC(link_lanes, "per cable: 1 or 2 lanes at load (default 2)");

/* Fault knobs: writable at any time, read by the fabric per frame. */
static int drop_every;
module_param(drop_every, int, 0644);
MODULE_PARM_DESC(drop_every, "drop every Nth frame that has a path (0: off)");
static int drop_count;
module_param(drop_count, int, 0644);
MODULE_PARM_DESC(drop_count, "drop the next N frames that have a path (counts down)");
static int corrupt_every;
module_param(corrupt_every, int, 0644);
MODULE_PARM_DESC(corrupt_every, "corrupt every Nth delivered frame: one byte flipped, RING_DESC_CRC_ERROR set (0: off)");
static int corrupt_count;
module_param(corrupt_count, int, 0644);
MODULE_PARM_DESC(corrupt_count, "corrupt the next N delivered frames (counts down)");
static int reject_ring_alloc;
module_param(reject_ring_alloc, int, 0644);
MODULE_PARM_DESC(reject_ring_alloc, "fail the next N tb_ring_alloc_tx/rx calls with NULL (counts down)");

struct tbl_host tbl_hosts[TBL_MAX_DOMAINS];
int tbl_ndomains;
struct tbl_cable tbl_cables[TBL_MAX_CABLES];
int tbl_ncables;
DEFINE_SPINLOCK(tbl_fabric_lock);
DEFINE_MUTEX(tbl_topology_lock);
struct dentry *tbl_debugfs;
struct tbl_stats tbl_stats;

static DEFINE_SPINLOCK(tbl_knob_lock);
static u64 tbl_drop_seq, tbl_corrupt_seq;

static bool tbl_count_down(int *knob)
{
	bool hit = false;
	unsigned long flags;

	spin_lock_irqsave(&tbl_knob_lock, flags);
	if (READ_ONCE(*knob) > 0) {
		WRITE_ONCE(*knob, *knob - 1);
		hit = true;
	}
	spin_unlock_irqrestore(&tbl_knob_lock, flags);
	return hit;
}

static bool tbl_every(int every, u64 *seq)
{
	bool hit;
	unsigned long flags;

	if (every <= 0)
		return false;
	spin_lock_irqsave(&tbl_knob_lock, flags);
	hit = ++*seq % every == 0;
	spin_unlock_irqrestore(&tbl_knob_lock, flags);
	return hit;
}

bool tbl_fault_drop(void)
{
	return tbl_count_down(&drop_count) ||
	       tbl_every(READ_ONCE(drop_every), &tbl_drop_seq);
}

bool tbl_fault_corrupt(void)
{
	return tbl_count_down(&corrupt_count) ||
	       tbl_every(READ_ONCE(corrupt_every), &tbl_corrupt_seq);
}

bool tbl_fault_reject_ring(void)
{
	if (!tbl_count_down(&reject_ring_alloc))
		return false;
	atomic64_inc(&tbl_stats.ring_alloc_rejected);
	return true;
}

/*
 * Routes: every cable end has its own. Without a topology host A reaches B
 * on lane adapter 1 (cable 0) or 3 (cable 1), host B reaches A on 5 or 7;
 * with one, end s of cable c is on 1 + 2c + 2 * max(2, cables) * s (a ring
 * of four: 1, 3, 5, 7 on the first ends, 9 ... 15 on the second). Real
 * peers often use the same route on both ends; distinct ones keep all ends
 * in the kernel apart for a control handler that keys on the route (see
 * xdomain.c on the rewrite).
 */
static u64 tbl_route(int cable, int side)
{
	return 1 + 2 * cable + 2 * max(2, tbl_ncables) * side;
}

/*
 * Stable UUIDs, so unique_id and the module's GUIDs repeat across boots:
 * host h's (its port p's with a topology: p is 0 on the first port, so
 * the two-host default keeps its UUIDs).
 */
static void tbl_host_uuid(int host, int port, uuid_t *uuid)
{
	*uuid = UUID_INIT(0x74626c6f, 0x6f70, 0x4000 + host, 0x80, port,
			  0x74, 0x62, 0x6c, 0x6f, 0x6f, 0x70 + host);
}

static enum tb_link_width tbl_width(unsigned int lanes)
{
	return lanes == 1 ? TB_LINK_WIDTH_SINGLE : TB_LINK_WIDTH_DUAL;
}

static struct tbl_xd *tbl_xd_alloc(struct tbl_cable *cable, int side)
{
	struct tbl_host *host = &tbl_hosts[cable->dom[side]];
	struct tbl_host *remote = &tbl_hosts[cable->dom[!side]];
	struct tbl_xd *x;
	struct tb_xdomain *xd;

	x = kzalloc(sizeof(*x), GFP_KERNEL);
	if (!x)
		return NULL;
	xd = &x->xd;
	x->host = host;
	x->cable = cable;
	x->side = side;
	INIT_LIST_HEAD(&x->paths);
	INIT_LIST_HEAD(&x->requests);
	xd->tb = host->tb;
	xd->local_uuid = &host->uuid;
	xd->remote_uuid = kmemdup(&remote->uuid, sizeof(uuid_t), GFP_KERNEL);
	xd->route = tbl_route(cable->index, side);
	xd->link = xd->route;	/* the lane adapter of the route's first hop */
	xd->depth = 1;
	/* What a Linux peer publishes (vendorid 0x1d6b "Linux", its nodename). */
	xd->vendor = 0x1d6b;
	xd->device = 0x0004;
	xd->vendor_name = kstrdup("Linux", GFP_KERNEL);
	xd->device_name = kasprintf(GFP_KERNEL, "tbloop-host%c",
				    'A' + remote->machine);
	xd->local_max_hopid = TBL_MAX_HOPID;
	xd->remote_max_hopid = TBL_MAX_HOPID;
	xd->link_speed = cable->link_speed;
	xd->link_width = cable->link_width;
	xd->link_usb4 = true;
	mutex_init(&xd->lock);
	ida_init(&xd->service_ids);
	ida_init(&xd->in_hopids);
	ida_init(&xd->out_hopids);
	atomic_set(&xd->ntunnels, 0);
	if (!xd->remote_uuid || !xd->vendor_name || !xd->device_name) {
		kfree(xd->remote_uuid);
		kfree(xd->vendor_name);
		kfree(xd->device_name);
		kfree(x);
		return NULL;
	}
	return x;
}

int tbl_cable_plug(struct tbl_cable *cable)
{
	struct tbl_xd *ends[2] = {};
	unsigned long flags;
	int h, ret = 0;

	mutex_lock(&tbl_topology_lock);
	if (cable->plugged)
		goto out;
	for (h = 0; h < 2; h++) {
		ends[h] = tbl_xd_alloc(cable, h);
		if (!ends[h]) {
			ret = -ENOMEM;
			goto err;
		}
	}
	spin_lock_irqsave(&tbl_fabric_lock, flags);
	for (h = 0; h < 2; h++)
		cable->end[h] = ends[h];
	cable->plugged = true;
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);

	for (h = 0; h < 2; h++) {
		ret = tbl_xd_register(ends[h]);
		if (ret) {
			/* Freed by its release already. */
			spin_lock_irqsave(&tbl_fabric_lock, flags);
			cable->end[h] = NULL;
			spin_unlock_irqrestore(&tbl_fabric_lock, flags);
			mutex_unlock(&tbl_topology_lock);
			tbl_cable_unplug(cable);
			return ret;
		}
	}
	pr_info("cable %d plugged: %s <-> %s, %u Gb/s x %u lanes\n",
		cable->index, dev_name(&ends[0]->xd.dev),
		dev_name(&ends[1]->xd.dev), cable->link_speed,
		cable->link_width == TB_LINK_WIDTH_SINGLE ? 1 : 2);
	/* Services appear when discovery would have read the peer's properties. */
	tbl_schedule_rescan();
out:
	mutex_unlock(&tbl_topology_lock);
	return ret;
err:
	for (h = 0; h < 2; h++)
		if (ends[h])
			put_device(&ends[h]->xd.dev);
	mutex_unlock(&tbl_topology_lock);
	return ret;
}

/*
 * A pulled cable, as the real core removes an XDomain: both ends are marked
 * unplugged, outstanding requests fail, their paths go, their services are
 * unregistered (the service driver's remove stops and frees its rings,
 * which cancels the frames on them), then the XDomain devices go.
 */
void tbl_cable_unplug(struct tbl_cable *cable)
{
	struct tbl_xd *ends[2];
	unsigned long flags;
	int h;

	mutex_lock(&tbl_topology_lock);
	spin_lock_irqsave(&tbl_fabric_lock, flags);
	for (h = 0; h < 2; h++) {
		ends[h] = cable->end[h];
		if (ends[h])
			ends[h]->xd.is_unplugged = true;
	}
	cable->plugged = false;
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);

	for (h = 0; h < 2; h++) {
		if (!ends[h])
			continue;
		tbl_xd_fail_requests(ends[h], -ENOTCONN);
		tbl_xd_drop_paths(ends[h]);
	}
	for (h = 0; h < 2; h++)
		if (ends[h])
			tbl_services_remove_all(ends[h]);

	spin_lock_irqsave(&tbl_fabric_lock, flags);
	for (h = 0; h < 2; h++)
		cable->end[h] = NULL;
	spin_unlock_irqrestore(&tbl_fabric_lock, flags);
	for (h = 0; h < 2; h++)
		if (ends[h])
			tbl_xd_unregister(ends[h]);
	if (ends[0] || ends[1])
		pr_info("cable %d unplugged\n", cable->index);
	mutex_unlock(&tbl_topology_lock);
}

/* ---- service rescan (the discovery delay) ---- */

static void tbl_rescan_fn(struct work_struct *work)
{
	int c, h;

	mutex_lock(&tbl_topology_lock);
	for (c = 0; c < tbl_ncables; c++) {
		if (!tbl_cables[c].plugged)
			continue;
		for (h = 0; h < 2; h++)
			if (tbl_cables[c].end[h])
				tbl_services_sync(tbl_cables[c].end[h]);
	}
	mutex_unlock(&tbl_topology_lock);
}

static DECLARE_DELAYED_WORK(tbl_rescan_work, tbl_rescan_fn);
/* Its own queue: service probes run in it and may sleep (7.x warns on system_wq). */
static struct workqueue_struct *tbl_rescan_wq;
static bool tbl_exiting;

void tbl_schedule_rescan(void)
{
	if (!READ_ONCE(tbl_exiting) && tbl_rescan_wq)
		mod_delayed_work(tbl_rescan_wq, &tbl_rescan_work,
				 msecs_to_jiffies(100));
}

/* ---- debugfs ---- */

static int tbl_plugged_get(void *data, u64 *val)
{
	*val = READ_ONCE(((struct tbl_cable *)data)->plugged);
	return 0;
}

static int tbl_plugged_set(void *data, u64 val)
{
	struct tbl_cable *cable = data;

	if (val > 1)
		return -EINVAL;
	if (!val) {
		tbl_cable_unplug(cable);
		return 0;
	}
	return tbl_cable_plug(cable);
}
DEFINE_DEBUGFS_ATTRIBUTE(tbl_plugged_fops, tbl_plugged_get, tbl_plugged_set,
			 "%llu\n");

static void tbl_cable_link_changed(struct tbl_cable *cable)
{
	int h;

	mutex_lock(&tbl_topology_lock);
	for (h = 0; h < 2; h++) {
		struct tbl_xd *x = cable->end[h];

		if (!x)
			continue;
		WRITE_ONCE(x->xd.link_speed, cable->link_speed);
		WRITE_ONCE(x->xd.link_width, cable->link_width);
		if (x->registered)
			kobject_uevent(&x->xd.dev.kobj, KOBJ_CHANGE);
	}
	mutex_unlock(&tbl_topology_lock);
}

static int tbl_speed_get(void *data, u64 *val)
{
	*val = ((struct tbl_cable *)data)->link_speed;
	return 0;
}

static int tbl_speed_set(void *data, u64 val)
{
	struct tbl_cable *cable = data;

	if (val == 0 || val > 80)
		return -EINVAL;
	cable->link_speed = val;
	tbl_cable_link_changed(cable);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(tbl_speed_fops, tbl_speed_get, tbl_speed_set, "%llu\n");

static int tbl_lanes_get(void *data, u64 *val)
{
	*val = ((struct tbl_cable *)data)->link_width == TB_LINK_WIDTH_SINGLE ?
	       1 : 2;
	return 0;
}

static int tbl_lanes_set(void *data, u64 val)
{
	struct tbl_cable *cable = data;

	if (val != 1 && val != 2)
		return -EINVAL;
	cable->link_width = tbl_width(val);
	tbl_cable_link_changed(cable);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(tbl_lanes_fops, tbl_lanes_get, tbl_lanes_set, "%llu\n");

static int tbl_stats_show(struct seq_file *s, void *unused)
{
	static const struct {
		const char *name;
		size_t off;
	} counters[] = {
#define C(f) { #f, offsetof(struct tbl_stats, f) }
		C(frames_delivered), C(bytes_delivered), C(frames_no_path),
		C(frames_no_buffer), C(frames_pdf_mismatch), C(frames_too_big),
		C(frames_bad_address), C(frames_dropped_fault),
		C(frames_corrupted), C(frames_canceled), C(requests),
		C(requests_timed_out), C(requests_failed_unplug),
		C(requests_unhandled), C(responses), C(responses_unmatched),
		C(ring_alloc_rejected),
#undef C
	};
	unsigned long flags;
	int i, h, hop;

	for (i = 0; i < ARRAY_SIZE(counters); i++)
		seq_printf(s, "%s: %lld\n", counters[i].name,
			   atomic64_read((atomic64_t *)((char *)&tbl_stats +
							counters[i].off)));
	for (h = 0; h < tbl_ndomains; h++) {
		struct tb_nhi *nhi = &tbl_hosts[h].nhi;

		if (!nhi->tx_rings)
			continue;
		spin_lock_irqsave(&nhi->lock, flags);
		for (hop = 1; hop < (int)nhi->hop_count; hop++) {
			struct tb_ring *rings[2] = { nhi->tx_rings[hop],
						     nhi->rx_rings[hop] };
			for (i = 0; i < 2; i++) {
				struct tbl_ring *tr;

				if (!rings[i])
					continue;
				tr = tbl_ring(rings[i]);
				seq_printf(s, "ring domain%d %s hop=%d size=%d flags=0x%x running=%d poll=%d frames=%llu bytes=%llu\n",
					   h, i ? "rx" : "tx", hop,
					   rings[i]->size, rings[i]->flags,
					   rings[i]->running,
					   rings[i]->start_poll != NULL,
					   tr->frames, tr->bytes);
			}
		}
		spin_unlock_irqrestore(&nhi->lock, flags);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tbl_stats);

/* Which host and port each domain is, and what each cable joins (guest scripts read it). */
static int tbl_topology_show(struct seq_file *s, void *unused)
{
	int d, c;

	for (d = 0; d < tbl_ndomains; d++)
		seq_printf(s, "domain%d host=%d port=%d uuid=%pUb\n", d,
			   tbl_hosts[d].machine, tbl_hosts[d].port,
			   &tbl_hosts[d].uuid);
	for (c = 0; c < tbl_ncables; c++)
		seq_printf(s, "cable%d domain%d route=%llx <-> domain%d route=%llx plugged=%d\n",
			   c, tbl_cables[c].dom[0], tbl_route(c, 0),
			   tbl_cables[c].dom[1], tbl_route(c, 1),
			   READ_ONCE(tbl_cables[c].plugged));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tbl_topology);

static void tbl_debugfs_init(void)
{
	char name[16];
	int c;

	tbl_debugfs = debugfs_create_dir("tbloop", NULL);
	debugfs_create_file("stats", 0444, tbl_debugfs, NULL, &tbl_stats_fops);
	debugfs_create_file("topology", 0444, tbl_debugfs, NULL,
			    &tbl_topology_fops);
	for (c = 0; c < tbl_ncables; c++) {
		struct dentry *d;

		snprintf(name, sizeof(name), "cable%d", c);
		d = debugfs_create_dir(name, tbl_debugfs);
		debugfs_create_file_unsafe("plugged", 0644, d, &tbl_cables[c],
					   &tbl_plugged_fops);
		debugfs_create_file_unsafe("link_speed", 0644, d,
					   &tbl_cables[c], &tbl_speed_fops);
		debugfs_create_file_unsafe("link_lanes", 0644, d,
					   &tbl_cables[c], &tbl_lanes_fops);
		tbl_cables[c].debugfs = d;
	}
}

/* ---- hosts ---- */

static void tbl_host_exit(struct tbl_host *host)
{
	if (host->tb) {
		device_unregister(&host->tb->dev);
		host->tb = NULL;
	}
	if (host->wq)
		destroy_workqueue(host->wq);
	host->wq = NULL;
	kfree(host->nhi.tx_rings);
	kfree(host->nhi.rx_rings);
	host->nhi.tx_rings = NULL;
	host->nhi.rx_rings = NULL;
	if (host->pdev)
		platform_device_unregister(host->pdev);
	host->pdev = NULL;
	pci_dev_put(host->pci);
	host->pci = NULL;
}

#ifdef TBL_NHI_PCI
/*
 * This kernel's struct tb_nhi names a pci_dev (tb_ring_dma_device() is its
 * dev). QEMU has no NHI, so host h borrows the h-th PCI function no driver
 * is bound to (i440fx: the host bridge, the ISA bridge): a real PCI device
 * with its DMA mask, never touched otherwise.
 */
static struct pci_dev *tbl_borrow_pci(int h)
{
	struct pci_dev *pdev = NULL;
	int seen = 0;

	while ((pdev = pci_get_device(PCI_ANY_ID, PCI_ANY_ID, pdev))) {
		if (pdev->dev.driver || !pdev->dev.dma_mask)
			continue;
		if (seen++ == h)
			return pdev;	/* the reference pci_get_device took */
	}
	return NULL;
}
#endif

static struct device *tbl_host_device(struct tbl_host *host)
{
	return host->pci ? &host->pci->dev : &host->pdev->dev;
}

static int tbl_host_init(struct tbl_host *host, int h)
{
	struct tb *tb;
	int ret;

	host->index = h;
	tbl_host_uuid(host->machine, host->port, &host->uuid);
#ifdef TBL_NHI_PCI
	host->pci = tbl_borrow_pci(h);
	if (!host->pci) {
		pr_err("domain %d: this kernel's NHI must be a PCI device and no driverless PCI function is left to stand in\n",
		       h);
		return -ENODEV;
	}
	host->nhi.pdev = host->pci;
	pr_info("domain %d: NHI stands in on PCI %s\n", h, pci_name(host->pci));
#else
	struct platform_device_info info = {
		.name = "tbloop-nhi",
		.id = h,
		.dma_mask = DMA_BIT_MASK(64),
	};

	host->pdev = platform_device_register_full(&info);
	if (IS_ERR(host->pdev)) {
		ret = PTR_ERR(host->pdev);
		host->pdev = NULL;
		return ret;
	}
	host->nhi.dev = &host->pdev->dev;
#endif
	/* Buffers are found by DMA address = physical address (ring.c). */
	if (device_iommu_mapped(tbl_host_device(host))) {
		pr_err("domain %d: %s is behind an IOMMU; DMA addresses would not be physical\n",
		       h, dev_name(tbl_host_device(host)));
		return -EOPNOTSUPP;
	}

	spin_lock_init(&host->nhi.lock);
	host->nhi.hop_count = TBL_NHI_HOPS;
#ifdef TBL_DOMAIN_RELEASED
	init_completion(&host->nhi.domain_released);
#endif
	host->nhi.tx_rings = kcalloc(TBL_NHI_HOPS, sizeof(void *), GFP_KERNEL);
	host->nhi.rx_rings = kcalloc(TBL_NHI_HOPS, sizeof(void *), GFP_KERNEL);
	host->wq = alloc_workqueue("tbloop_xdp%d", WQ_UNBOUND, 0, h);
	if (!host->nhi.tx_rings || !host->nhi.rx_rings || !host->wq)
		return -ENOMEM;

	tb = kzalloc(sizeof(*tb), GFP_KERNEL);
	if (!tb)
		return -ENOMEM;
	mutex_init(&tb->lock);
	tb->nhi = &host->nhi;
	tb->index = h;
	tb->security_level = TB_SECURITY_NONE;
	tb->dev.bus = &tb_bus_type;
	tb->dev.type = &tbl_domain_type;
	tb->dev.parent = tbl_host_device(host);
	dev_set_name(&tb->dev, "domain%d", h);
	ret = device_register(&tb->dev);
	if (ret) {
		put_device(&tb->dev);
		return ret;
	}
	host->tb = tb;
	return 0;
}

/*
 * topology=a-b,c-d,...: cable i joins hosts a and b. Host h's ports are the
 * cables it is on, in the list's order; each port is a domain of its own
 * (index in host order), so a ring 0-1,1-2,2-3,3-0 gives host A domains 0
 * (port 0, to B) and 1 (port 1, to D), B 2 (to A) and 3 (to C), and so on.
 */
static int tbl_parse_topology(void)
{
	int ends[TBL_MAX_CABLES][2], ports[TBL_MAX_HOSTS] = {};
	const char *p = topology;
	int n = 0, h, c, s, i;

	if (hosts < 2 || hosts > TBL_MAX_HOSTS) {
		pr_err("hosts=%d: 2 to %d are modelled\n", hosts, TBL_MAX_HOSTS);
		return -EINVAL;
	}
	while (*p) {
		int a, b, len;

		if (n == TBL_MAX_CABLES) {
			pr_err("topology=%s: more than %d cables\n", topology,
			       TBL_MAX_CABLES);
			return -EINVAL;
		}
		if (sscanf(p, "%d-%d%n", &a, &b, &len) != 2 || a < 0 ||
		    b < 0 || a >= hosts || b >= hosts || a == b ||
		    (p[len] && p[len] != ',')) {
			pr_err("topology=%s: cable %d is not HOST-HOST with two different hosts below hosts=%d\n",
			       topology, n, hosts);
			return -EINVAL;
		}
		ends[n][0] = a;
		ends[n][1] = b;
		n++;
		p += len + (p[len] == ',');
	}
	if (!n) {
		pr_err("topology is empty\n");
		return -EINVAL;
	}
	for (c = 0; c < n; c++)
		for (s = 0; s < 2; s++)
			ports[ends[c][s]]++;
	for (h = 0; h < hosts; h++) {
		if (!ports[h]) {
			pr_err("topology=%s: host %d has no cable\n", topology, h);
			return -EINVAL;
		}
	}
	tbl_ndomains = 0;
	for (h = 0; h < hosts; h++) {
		int port = 0;

		for (c = 0; c < n; c++) {
			for (s = 0; s < 2; s++) {
				if (ends[c][s] != h)
					continue;
				i = tbl_ndomains++;
				tbl_hosts[i].machine = h;
				tbl_hosts[i].port = port++;
				tbl_cables[c].dom[s] = i;
			}
		}
	}
	tbl_ncables = n;
	return 0;
}

static int __init tbl_init(void)
{
	int ret, h, c;

	if (topology && *topology) {
		ret = tbl_parse_topology();
		if (ret)
			return ret;
	} else {
		if (hosts != 2) {
			pr_err("hosts=%d needs a topology= (the default is two hosts)\n",
			       hosts);
			return -EINVAL;
		}
		if (cables < 1 || cables > 2) {
			pr_err("cables=%d: 1 or 2 are modelled\n", cables);
			return -EINVAL;
		}
		/* Two hosts, one domain each, every cable between them. */
		tbl_ncables = cables;
		tbl_ndomains = 2;
		for (h = 0; h < 2; h++)
			tbl_hosts[h].machine = h;
		for (c = 0; c < tbl_ncables; c++) {
			tbl_cables[c].dom[0] = 0;
			tbl_cables[c].dom[1] = 1;
		}
	}
	for (c = 0; c < tbl_ncables; c++) {
		tbl_cables[c].index = c;
		tbl_cables[c].link_speed = link_speed[c] ?: 20;
		tbl_cables[c].link_width = tbl_width(link_lanes[c]);
	}

	tbl_rescan_wq = alloc_ordered_workqueue("tbloop_rescan", 0);
	if (!tbl_rescan_wq)
		return -ENOMEM;
	ret = tbl_fabric_init();
	if (ret)
		goto err_rescan;
	ret = tbl_bus_init();
	if (ret)
		goto err_fabric;
	for (h = 0; h < tbl_ndomains; h++) {
		ret = tbl_host_init(&tbl_hosts[h], h);
		if (ret)
			goto err_hosts;
	}
	tbl_debugfs_init();
	for (c = 0; c < tbl_ncables; c++) {
		ret = tbl_cable_plug(&tbl_cables[c]);
		if (ret)
			goto err_cables;
	}
	pr_info("%d hosts, %d domains, %d cable%s\n", topology && *topology ? hosts : 2,
		tbl_ndomains, tbl_ncables, tbl_ncables > 1 ? "s" : "");
	return 0;

err_cables:
	WRITE_ONCE(tbl_exiting, true);
	cancel_delayed_work_sync(&tbl_rescan_work);
	for (c = 0; c < tbl_ncables; c++)
		tbl_cable_unplug(&tbl_cables[c]);
	debugfs_remove_recursive(tbl_debugfs);
err_hosts:
	for (h = 0; h < tbl_ndomains; h++)
		tbl_host_exit(&tbl_hosts[h]);
	tbl_bus_exit();
err_fabric:
	tbl_fabric_exit();
err_rescan:
	WRITE_ONCE(tbl_exiting, true);
	cancel_delayed_work_sync(&tbl_rescan_work);
	destroy_workqueue(tbl_rescan_wq);
	return ret;
}

static void __exit tbl_exit(void)
{
	int c, h;

	WRITE_ONCE(tbl_exiting, true);
	cancel_delayed_work_sync(&tbl_rescan_work);
	debugfs_remove_recursive(tbl_debugfs);
	for (c = 0; c < tbl_ncables; c++)
		tbl_cable_unplug(&tbl_cables[c]);
	for (h = 0; h < tbl_ndomains; h++)
		tbl_host_exit(&tbl_hosts[h]);
	tbl_bus_exit();
	tbl_fabric_exit();
	destroy_workqueue(tbl_rescan_wq);
}

module_init(tbl_init);
module_exit(tbl_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Loopback Thunderbolt bus: two to four hosts in one kernel, for testing thunderbolt_ibverbs");
