// SPDX-License-Identifier: GPL-2.0
/*
 * The thunderbolt bus (/sys/bus/thunderbolt): domains, XDomain devices
 * (one per cable end) and the tb_service devices that XDomain discovery
 * creates from the peer's property directories, with the attributes that
 * linux:drivers/thunderbolt/xdomain.c gives them.
 */

#define pr_fmt(fmt) "tbloop: " fmt

#include <linux/device.h>
#include <linux/idr.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "tbloop.h"

static const struct tb_service_id *
tbl_service_match_id(const struct tb_service *svc,
		     const struct tb_service_driver *drv)
{
	const struct tb_service_id *id;

	for (id = drv->id_table; id && id->match_flags; id++) {
		if ((id->match_flags & TBSVC_MATCH_PROTOCOL_KEY) &&
		    strcmp(id->protocol_key, svc->key))
			continue;
		if ((id->match_flags & TBSVC_MATCH_PROTOCOL_ID) &&
		    id->protocol_id != svc->prtcid)
			continue;
		if ((id->match_flags & TBSVC_MATCH_PROTOCOL_VERSION) &&
		    id->protocol_version != svc->prtcvers)
			continue;
		if ((id->match_flags & TBSVC_MATCH_PROTOCOL_REVISION) &&
		    id->protocol_revision != svc->prtcrevs)
			continue;
		return id;
	}
	return NULL;
}

static int tbl_bus_match(struct device *dev, const struct device_driver *drv)
{
	const struct tb_service_driver *sd =
		container_of_const(drv, struct tb_service_driver, driver);
	struct tb_service *svc = tb_to_service(dev);

	return svc && tbl_service_match_id(svc, sd);
}

static int tbl_bus_probe(struct device *dev)
{
	struct tb_service *svc = tb_to_service(dev);
	struct tb_service_driver *sd;
	const struct tb_service_id *id;

	if (!svc || !dev->driver)
		return -ENODEV;
	sd = container_of(dev->driver, struct tb_service_driver, driver);
	id = tbl_service_match_id(svc, sd);
	if (!id || !sd->probe)
		return -ENODEV;
	/* 7.3 dropped the id argument (linux:include/linux/thunderbolt.h). */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 3, 0)
	return sd->probe(svc);
#else
	return sd->probe(svc, id);
#endif
}

static void tbl_bus_remove(struct device *dev)
{
	struct tb_service *svc = tb_to_service(dev);
	struct tb_service_driver *sd;

	if (!svc || !dev->driver)
		return;
	sd = container_of(dev->driver, struct tb_service_driver, driver);
	if (sd->remove)
		sd->remove(svc);
}

static void tbl_bus_shutdown(struct device *dev)
{
	struct tb_service *svc = tb_to_service(dev);
	struct tb_service_driver *sd;

	if (!svc || !dev->driver)
		return;
	sd = container_of(dev->driver, struct tb_service_driver, driver);
	if (sd->shutdown)
		sd->shutdown(svc);
}

const struct bus_type tb_bus_type = {
	.name = "thunderbolt",
	.match = tbl_bus_match,
	.probe = tbl_bus_probe,
	.remove = tbl_bus_remove,
	.shutdown = tbl_bus_shutdown,
};
EXPORT_SYMBOL_GPL(tb_bus_type);

int tb_register_service_driver(struct tb_service_driver *drv)
{
	drv->driver.bus = &tb_bus_type;
	return driver_register(&drv->driver);
}
EXPORT_SYMBOL_GPL(tb_register_service_driver);

void tb_unregister_service_driver(struct tb_service_driver *drv)
{
	driver_unregister(&drv->driver);
}
EXPORT_SYMBOL_GPL(tb_unregister_service_driver);

/* ---- domain ---- */

static void tbl_domain_release(struct device *dev)
{
	kfree(container_of(dev, struct tb, dev));
}

const struct device_type tbl_domain_type = {
	.name = "thunderbolt_domain",
	.release = tbl_domain_release,
};

/* ---- services ---- */

static ssize_t key_show(struct device *dev, struct device_attribute *attr,
			char *buf)
{
	struct tb_service *svc = tb_to_service(dev);

	return sysfs_emit(buf, "%*pE\n", (int)strlen(svc->key), svc->key);
}
static DEVICE_ATTR_RO(key);

static int tbl_service_modalias(const struct tb_service *svc, char *buf,
				size_t size)
{
	return snprintf(buf, size, "tbsvc:k%sp%08Xv%08Xr%08X", svc->key,
			svc->prtcid, svc->prtcvers, svc->prtcrevs);
}

static ssize_t modalias_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	char alias[64];

	tbl_service_modalias(tb_to_service(dev), alias, sizeof(alias));
	return sysfs_emit(buf, "%s\n", alias);
}
static DEVICE_ATTR_RO(modalias);

#define TBL_SVC_U32_ATTR(field, fmt)					\
static ssize_t field##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, fmt "\n", tb_to_service(dev)->field);	\
}									\
static DEVICE_ATTR_RO(field)

TBL_SVC_U32_ATTR(prtcid, "%u");
TBL_SVC_U32_ATTR(prtcvers, "%u");
TBL_SVC_U32_ATTR(prtcrevs, "%u");
TBL_SVC_U32_ATTR(prtcstns, "0x%08x");

static struct attribute *tbl_service_attrs[] = {
	&dev_attr_key.attr,
	&dev_attr_modalias.attr,
	&dev_attr_prtcid.attr,
	&dev_attr_prtcvers.attr,
	&dev_attr_prtcrevs.attr,
	&dev_attr_prtcstns.attr,
	NULL,
};
ATTRIBUTE_GROUPS(tbl_service);

static int tbl_service_uevent(const struct device *dev,
			      struct kobj_uevent_env *env)
{
	const struct tb_service *svc =
		container_of_const(dev, struct tb_service, dev);
	char alias[64];

	tbl_service_modalias(svc, alias, sizeof(alias));
	return add_uevent_var(env, "MODALIAS=%s", alias);
}

static void tbl_service_release(struct device *dev)
{
	struct tb_service *svc = container_of(dev, struct tb_service, dev);
	struct tb_xdomain *xd = tb_service_parent(svc);

	if (xd)
		ida_free(&xd->service_ids, svc->id);
#ifdef TBL_SVC_PROPS
	tb_property_free_dir(svc->remote_properties);
	tb_property_free_dir(svc->local_properties);
#endif
	kfree(svc->key);
	kfree(svc);
}

const struct device_type tb_service_type = {
	.name = "thunderbolt_service",
	.groups = tbl_service_groups,
	.uevent = tbl_service_uevent,
	.release = tbl_service_release,
};
EXPORT_SYMBOL_GPL(tb_service_type);

#ifdef TBL_SVC_PROPS
void tb_service_properties_changed(struct tb_service *svc)
{
	/* Local service properties are not published to the peer here. */
}
EXPORT_SYMBOL_GPL(tb_service_properties_changed);
#endif

struct tbl_svc_lookup {
	const char *key;
	bool found;
};

/* device_for_each_child, whose callback type is the same on 6.12 and 7.x. */
static int tbl_find_service(struct device *dev, void *data)
{
	struct tbl_svc_lookup *l = data;
	struct tb_service *svc = tb_to_service(dev);

	if (svc && !strcmp(svc->key, l->key))
		l->found = true;
	return 0;
}

static int tbl_service_add(struct tbl_xd *x, const char *key,
			   struct tb_property_dir *dir)
{
	struct tb_xdomain *xd = &x->xd;
	struct tb_service *svc;
	struct tb_property *p;
	int id, ret;

	svc = kzalloc(sizeof(*svc), GFP_KERNEL);
	if (!svc) {
		tb_property_free_dir(dir);
		return -ENOMEM;
	}
	/* Standard properties, as populate_service() reads them. */
	p = tb_property_find(dir, "prtcid", TB_PROPERTY_TYPE_VALUE);
	svc->prtcid = p ? p->value.immediate : 0;
	p = tb_property_find(dir, "prtcvers", TB_PROPERTY_TYPE_VALUE);
	svc->prtcvers = p ? p->value.immediate : 0;
	p = tb_property_find(dir, "prtcrevs", TB_PROPERTY_TYPE_VALUE);
	svc->prtcrevs = p ? p->value.immediate : 0;
	p = tb_property_find(dir, "prtcstns", TB_PROPERTY_TYPE_VALUE);
	svc->prtcstns = p ? p->value.immediate : 0;
#ifdef TBL_SVC_PROPS
	svc->remote_properties = dir;
	mutex_init(&svc->lock);
#else
	tb_property_free_dir(dir);
	dir = NULL;
#endif
	svc->key = kstrdup(key, GFP_KERNEL);
	id = ida_alloc(&xd->service_ids, GFP_KERNEL);
	if (!svc->key || id < 0) {
		tb_property_free_dir(dir);
		kfree(svc->key);
		kfree(svc);
		return id < 0 ? id : -ENOMEM;
	}
	svc->id = id;
	svc->dev.bus = &tb_bus_type;
	svc->dev.type = &tb_service_type;
	svc->dev.parent = &xd->dev;
	dev_set_name(&svc->dev, "%s.%d", dev_name(&xd->dev), id);
	ret = device_register(&svc->dev);
	if (ret) {
		pr_warn("%s: registering service %s failed: %d\n",
			dev_name(&xd->dev), key, ret);
		put_device(&svc->dev);
		return ret;
	}
	return 0;
}

struct tbl_key_list {
	int n;
	char key[8][TB_PROPERTY_KEY_SIZE + 1];
};

static int tbl_remove_missing(struct device *dev, void *data)
{
	const struct tbl_key_list *keys = data;
	struct tb_service *svc = tb_to_service(dev);
	int i;

	if (!svc)
		return 0;
	for (i = 0; i < keys->n; i++)
		if (!strcmp(keys->key[i], svc->key))
			return 0;
	device_unregister(dev);
	return 0;
}

/*
 * Make @x's services match the directories the peer publishes: in one
 * kernel that is the registry of tb_register_property_dir(). Called with
 * tbl_topology_lock held, never with tbl_dirs_lock (probe runs in here).
 */
void tbl_services_sync(struct tbl_xd *x)
{
	struct tb_property_dir *copies[8] = {};
	struct tbl_key_list keys = {};
	struct tbl_local_dir *ld;
	int i;

	if (!x->registered)
		return;

	mutex_lock(&tbl_dirs_lock);
	list_for_each_entry(ld, &tbl_local_dirs, node) {
		if (keys.n == ARRAY_SIZE(keys.key)) {
			pr_warn_once("more than %zu property directories; the rest are not published\n",
				     ARRAY_SIZE(keys.key));
			break;
		}
		strscpy(keys.key[keys.n], ld->key, sizeof(keys.key[0]));
		copies[keys.n] = tb_property_copy_dir(ld->dir);
		keys.n++;
	}
	mutex_unlock(&tbl_dirs_lock);

	device_for_each_child_reverse(&x->xd.dev, &keys, tbl_remove_missing);

	for (i = 0; i < keys.n; i++) {
		struct tbl_svc_lookup l = { .key = keys.key[i] };

		device_for_each_child(&x->xd.dev, &l, tbl_find_service);
		if (l.found || !copies[i]) {
			tb_property_free_dir(copies[i]);
			continue;
		}
		tbl_service_add(x, keys.key[i], copies[i]);
	}
}

static int tbl_remove_service(struct device *dev, void *data)
{
	if (tb_to_service(dev))
		device_unregister(dev);
	return 0;
}

void tbl_services_remove_all(struct tbl_xd *x)
{
	if (x->registered)
		device_for_each_child_reverse(&x->xd.dev, NULL,
					      tbl_remove_service);
}

/* ---- XDomain devices ---- */

static ssize_t device_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%#x\n", tb_to_xdomain(dev)->device);
}
static DEVICE_ATTR_RO(device);

static ssize_t vendor_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%#x\n", tb_to_xdomain(dev)->vendor);
}
static DEVICE_ATTR_RO(vendor);

static ssize_t device_name_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct tb_xdomain *xd = tb_to_xdomain(dev);

	return sysfs_emit(buf, "%s\n", xd->device_name ?: "");
}
static DEVICE_ATTR_RO(device_name);

static ssize_t vendor_name_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct tb_xdomain *xd = tb_to_xdomain(dev);

	return sysfs_emit(buf, "%s\n", xd->vendor_name ?: "");
}
static DEVICE_ATTR_RO(vendor_name);

static ssize_t unique_id_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%pUb\n", tb_to_xdomain(dev)->remote_uuid);
}
static DEVICE_ATTR_RO(unique_id);

static ssize_t speed_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct tb_xdomain *xd = tb_to_xdomain(dev);

	return sysfs_emit(buf, "%u.0 Gb/s\n", READ_ONCE(xd->link_speed));
}
static DEVICE_ATTR(rx_speed, 0444, speed_show, NULL);
static DEVICE_ATTR(tx_speed, 0444, speed_show, NULL);

/* Lanes per direction for a link width (linux:drivers/thunderbolt/xdomain.c). */
static unsigned int tbl_lanes(enum tb_link_width width, bool rx)
{
	switch (width) {
	case TB_LINK_WIDTH_SINGLE:
		return 1;
	case TB_LINK_WIDTH_DUAL:
		return 2;
	case TB_LINK_WIDTH_ASYM_TX:
		return rx ? 1 : 3;
	case TB_LINK_WIDTH_ASYM_RX:
		return rx ? 3 : 1;
	}
	return 0;
}

static ssize_t rx_lanes_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  tbl_lanes(READ_ONCE(tb_to_xdomain(dev)->link_width),
				    true));
}
static DEVICE_ATTR_RO(rx_lanes);

static ssize_t tx_lanes_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  tbl_lanes(READ_ONCE(tb_to_xdomain(dev)->link_width),
				    false));
}
static DEVICE_ATTR_RO(tx_lanes);

static struct attribute *tbl_xdomain_attrs[] = {
	&dev_attr_device.attr,
	&dev_attr_device_name.attr,
	&dev_attr_rx_lanes.attr,
	&dev_attr_rx_speed.attr,
	&dev_attr_tx_lanes.attr,
	&dev_attr_tx_speed.attr,
	&dev_attr_unique_id.attr,
	&dev_attr_vendor.attr,
	&dev_attr_vendor_name.attr,
	NULL,
};
ATTRIBUTE_GROUPS(tbl_xdomain);

static void tbl_xdomain_release(struct device *dev)
{
	struct tb_xdomain *xd = container_of(dev, struct tb_xdomain, dev);
	struct tbl_xd *x = tbl_xd(xd);

	ida_destroy(&xd->service_ids);
	ida_destroy(&xd->in_hopids);
	ida_destroy(&xd->out_hopids);
	kfree(xd->remote_uuid);
	kfree(xd->device_name);
	kfree(xd->vendor_name);
	kfree(x);
}

const struct device_type tb_xdomain_type = {
	.name = "thunderbolt_xdomain",
	.groups = tbl_xdomain_groups,
	.release = tbl_xdomain_release,
};
EXPORT_SYMBOL_GPL(tb_xdomain_type);

int tbl_xd_register(struct tbl_xd *x)
{
	struct tb_xdomain *xd = &x->xd;
	int ret;

	xd->dev.bus = &tb_bus_type;
	xd->dev.type = &tb_xdomain_type;
	xd->dev.parent = &x->host->tb->dev;
	dev_set_name(&xd->dev, "%d-%llx", x->host->tb->index, xd->route);
	ret = device_register(&xd->dev);
	if (ret) {
		pr_err("registering XDomain %s failed: %d\n",
		       dev_name(&xd->dev), ret);
		put_device(&xd->dev);
		return ret;
	}
	x->registered = true;
	return 0;
}

void tbl_xd_unregister(struct tbl_xd *x)
{
	if (!x->registered)
		return;
	x->registered = false;
	device_unregister(&x->xd.dev);
}

int tbl_bus_init(void)
{
	return bus_register(&tb_bus_type);
}

void tbl_bus_exit(void)
{
	bus_unregister(&tb_bus_type);
}
