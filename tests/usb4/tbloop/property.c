// SPDX-License-Identifier: GPL-2.0
/*
 * XDomain property directories: the in-memory API of
 * linux:include/linux/thunderbolt.h (tb_property_*), and the registry of
 * directories this "machine" publishes with tb_register_property_dir().
 *
 * Both hosts run in this one kernel, so what one host publishes is what the
 * other host's XDomain discovery would read from it: every registered
 * directory becomes a tb_service on every plugged XDomain (bus.c). The
 * block format on the wire (tb_property_parse_dir/format_dir) is not
 * modelled: nothing crosses a wire here.
 */

#define pr_fmt(fmt) "tbloop: " fmt

#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "tbloop.h"

LIST_HEAD(tbl_local_dirs);
DEFINE_MUTEX(tbl_dirs_lock);

static bool tbl_key_valid(const char *key)
{
	return key && strlen(key) <= TB_PROPERTY_KEY_SIZE;
}

static struct tb_property *tbl_property_alloc(const char *key,
					      enum tb_property_type type)
{
	struct tb_property *p;

	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		return NULL;
	strscpy(p->key, key, sizeof(p->key));
	p->type = type;
	INIT_LIST_HEAD(&p->list);
	return p;
}

static void tbl_property_free(struct tb_property *p)
{
	switch (p->type) {
	case TB_PROPERTY_TYPE_DIRECTORY:
		if (p->value.dir)
			tb_property_free_dir(p->value.dir);
		break;
	case TB_PROPERTY_TYPE_DATA:
		kfree(p->value.data);
		break;
	case TB_PROPERTY_TYPE_TEXT:
		kfree(p->value.text);
		break;
	default:
		break;
	}
	kfree(p);
}

struct tb_property_dir *tb_property_create_dir(const uuid_t *uuid)
{
	struct tb_property_dir *dir;

	dir = kzalloc(sizeof(*dir), GFP_KERNEL);
	if (!dir)
		return NULL;
	INIT_LIST_HEAD(&dir->properties);
	if (uuid) {
		dir->uuid = kmemdup(uuid, sizeof(*uuid), GFP_KERNEL);
		if (!dir->uuid) {
			kfree(dir);
			return NULL;
		}
	}
	return dir;
}
EXPORT_SYMBOL_GPL(tb_property_create_dir);

void tb_property_free_dir(struct tb_property_dir *dir)
{
	struct tb_property *p, *n;

	if (!dir)
		return;
	list_for_each_entry_safe(p, n, &dir->properties, list) {
		list_del(&p->list);
		tbl_property_free(p);
	}
	kfree(dir->uuid);
	kfree(dir);
}
EXPORT_SYMBOL_GPL(tb_property_free_dir);

int tb_property_add_immediate(struct tb_property_dir *parent, const char *key,
			      u32 value)
{
	struct tb_property *p;

	if (!parent || !tbl_key_valid(key))
		return -EINVAL;
	p = tbl_property_alloc(key, TB_PROPERTY_TYPE_VALUE);
	if (!p)
		return -ENOMEM;
	p->length = 1;
	p->value.immediate = value;
	list_add_tail(&p->list, &parent->properties);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_property_add_immediate);

int tb_property_add_data(struct tb_property_dir *parent, const char *key,
			 const void *buf, size_t buflen)
{
	size_t size = round_up(buflen, 4);
	struct tb_property *p;

	if (!parent || !tbl_key_valid(key) || !buf)
		return -EINVAL;
	p = tbl_property_alloc(key, TB_PROPERTY_TYPE_DATA);
	if (!p)
		return -ENOMEM;
	p->length = size / 4;
	p->value.data = kzalloc(size, GFP_KERNEL);
	if (!p->value.data) {
		kfree(p);
		return -ENOMEM;
	}
	memcpy(p->value.data, buf, buflen);
	list_add_tail(&p->list, &parent->properties);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_property_add_data);

int tb_property_add_text(struct tb_property_dir *parent, const char *key,
			 const char *text)
{
	size_t size;
	struct tb_property *p;

	if (!parent || !tbl_key_valid(key) || !text)
		return -EINVAL;
	size = round_up(strlen(text) + 1, 4);
	p = tbl_property_alloc(key, TB_PROPERTY_TYPE_TEXT);
	if (!p)
		return -ENOMEM;
	p->length = size / 4;
	p->value.text = kzalloc(size, GFP_KERNEL);
	if (!p->value.text) {
		kfree(p);
		return -ENOMEM;
	}
	strcpy(p->value.text, text);
	list_add_tail(&p->list, &parent->properties);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_property_add_text);

int tb_property_add_dir(struct tb_property_dir *parent, const char *key,
			struct tb_property_dir *dir)
{
	struct tb_property *p;

	if (!parent || !tbl_key_valid(key) || !dir)
		return -EINVAL;
	p = tbl_property_alloc(key, TB_PROPERTY_TYPE_DIRECTORY);
	if (!p)
		return -ENOMEM;
	p->value.dir = dir;
	list_add_tail(&p->list, &parent->properties);
	return 0;
}
EXPORT_SYMBOL_GPL(tb_property_add_dir);

void tb_property_remove(struct tb_property *property)
{
	list_del(&property->list);
	kfree(property);
}
EXPORT_SYMBOL_GPL(tb_property_remove);

struct tb_property *tb_property_find(struct tb_property_dir *dir,
				     const char *key,
				     enum tb_property_type type)
{
	struct tb_property *p;

	if (!dir || !key)
		return NULL;
	list_for_each_entry(p, &dir->properties, list) {
		if (p->type == type && !strcmp(p->key, key))
			return p;
	}
	return NULL;
}
EXPORT_SYMBOL_GPL(tb_property_find);

struct tb_property *tb_property_get_next(struct tb_property_dir *dir,
					 struct tb_property *prev)
{
	if (!dir)
		return NULL;
	if (prev) {
		if (list_is_last(&prev->list, &dir->properties))
			return NULL;
		return list_next_entry(prev, list);
	}
	return list_first_entry_or_null(&dir->properties, struct tb_property,
					list);
}
EXPORT_SYMBOL_GPL(tb_property_get_next);

struct tb_property_dir *tb_property_copy_dir(const struct tb_property_dir *dir)
{
	struct tb_property_dir *copy;
	struct tb_property *p;
	int ret = 0;

	if (!dir)
		return NULL;
	copy = tb_property_create_dir(dir->uuid);
	if (!copy)
		return NULL;
	list_for_each_entry(p, &dir->properties, list) {
		struct tb_property_dir *sub;

		switch (p->type) {
		case TB_PROPERTY_TYPE_VALUE:
			ret = tb_property_add_immediate(copy, p->key,
							p->value.immediate);
			break;
		case TB_PROPERTY_TYPE_DATA:
			ret = tb_property_add_data(copy, p->key, p->value.data,
						   p->length * 4);
			break;
		case TB_PROPERTY_TYPE_TEXT:
			ret = tb_property_add_text(copy, p->key, p->value.text);
			break;
		case TB_PROPERTY_TYPE_DIRECTORY:
			sub = tb_property_copy_dir(p->value.dir);
			ret = sub ? tb_property_add_dir(copy, p->key, sub) :
				    -ENOMEM;
			if (ret && sub)
				tb_property_free_dir(sub);
			break;
		default:
			break;
		}
		if (ret) {
			tb_property_free_dir(copy);
			return NULL;
		}
	}
	return copy;
}
EXPORT_SYMBOL_GPL(tb_property_copy_dir);

/*
 * The caller keeps ownership of @dir (it frees it after unregistering, as
 * with the real registry, linux:drivers/thunderbolt/xdomain.c).
 */
int tb_register_property_dir(const char *key, struct tb_property_dir *dir)
{
	struct tbl_local_dir *ld;

	if (!tbl_key_valid(key) || !dir)
		return -EINVAL;

	mutex_lock(&tbl_dirs_lock);
	list_for_each_entry(ld, &tbl_local_dirs, node) {
		if (!strcmp(ld->key, key)) {
			mutex_unlock(&tbl_dirs_lock);
			return -EEXIST;
		}
	}
	ld = kzalloc(sizeof(*ld), GFP_KERNEL);
	if (!ld) {
		mutex_unlock(&tbl_dirs_lock);
		return -ENOMEM;
	}
	strscpy(ld->key, key, sizeof(ld->key));
	ld->dir = dir;
	list_add_tail(&ld->node, &tbl_local_dirs);
	mutex_unlock(&tbl_dirs_lock);

	/* The peers learn of it the way XDomain discovery would: later. */
	tbl_schedule_rescan();
	return 0;
}
EXPORT_SYMBOL_GPL(tb_register_property_dir);

void tb_unregister_property_dir(const char *key, struct tb_property_dir *dir)
{
	struct tbl_local_dir *ld, *n;
	bool found = false;

	mutex_lock(&tbl_dirs_lock);
	list_for_each_entry_safe(ld, n, &tbl_local_dirs, node) {
		if (!strcmp(ld->key, key) && ld->dir == dir) {
			list_del(&ld->node);
			kfree(ld);
			found = true;
			break;
		}
	}
	mutex_unlock(&tbl_dirs_lock);
	if (found)
		tbl_schedule_rescan();
}
EXPORT_SYMBOL_GPL(tb_unregister_property_dir);
