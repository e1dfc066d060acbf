// Registration with the libibverbs that loaded us. This runs in a C
// constructor, before the Go runtime is up, inside libibverbs' own
// ibv_get_device_list (rdma-core-private-abi.md §6.1, §7.2), so it must not
// call Go or libibverbs' device-list functions.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static struct usb4_abi the_abi;

// Marks this file as usb4verbs' front library: `ibvinfo doctor`
// (internal/sysinfo) finds the section and checks for the Go part beside it.
__attribute__((section(".usb4verbs"), used)) static const char front_marker[] = "usb4verbs front library";

const struct usb4_abi *usb4_abi_get(void)
{
	return &the_abi;
}

// Matching is our match_device alone; the driver-id entry only makes
// libibverbs try us in its driver-id pass for rxe, so that an opted-in user
// who lists us first in RDMAV_DRIVERS wins over librxe (rdma-core:
// libibverbs/init.c try_drivers).
static const struct usb4_match_ent match_table[] = {
	{.u.driver_id = USB4_RDMA_DRIVER_RXE, .kind = USB4_MATCH_DRIVER_ID},
	{0},
};

static const struct usb4_device_ops device_ops = {
	.name = USB4_PROVIDER_NAME,
	.match_min_abi_version = USB4_KERNEL_ABI < RXE_KERNEL_ABI ? USB4_KERNEL_ABI : RXE_KERNEL_ABI,
	.match_max_abi_version = USB4_KERNEL_ABI > RXE_KERNEL_ABI ? USB4_KERNEL_ABI : RXE_KERNEL_ABI,
	.match_table = match_table,
	.match_device = usb4_match_device,
	.alloc_context = usb4_alloc_context,
	.alloc_device = usb4_alloc_device,
	.uninit_device = usb4_uninit_device,
};

_Static_assert(sizeof(struct usb4_match_ent) == 24, "verbs_match_ent is 24 bytes");
_Static_assert(sizeof(struct usb4_device_ops) == 72, "verbs_device_ops is 72 bytes");
_Static_assert(offsetof(struct usb4_device_ops, match_device) == 32, "verbs_device_ops.match_device@32");
_Static_assert(offsetof(struct usb4_device_ops, uninit_device) == 64, "verbs_device_ops.uninit_device@64");

__attribute__((constructor)) static void usb4_register(void)
{
	char why[160];
	struct usb4_abi abi;

	// Not loaded by libibverbs (or by a process using it): stay silent.
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		return;
	if (!usb4_probe(lib, &abi, why, sizeof(why))) {
		fprintf(stderr, USB4_LOG_PREFIX "unsupported libibverbs (%s): not registering\n", why);
		return;
	}
	struct usb4_settings settings = usb4_settings_read();
	abi.claim_rxe = settings.claim_rxe;
	abi.force_kernel_commands = settings.force_kernel_commands;
	abi.dv_send = settings.dv_send;
	const char *debug = secure_getenv("USB4VERBS_DEBUG");
	if (debug && debug[0] == '1')
		fprintf(stderr,
			USB4_LOG_PREFIX "libibverbs PABI %u layout %s (%u ops) verbs_context %zu "
					"ibv_port_attr %zu verbs_qp.comp_mask@%zu claim_rxe %d force_kernel_commands %d dv_send %d\n",
			abi.pabi, abi.layout, abi.ops_slots, abi.vctx_size, abi.port_attr_size,
			abi.qp_comp_mask_off, abi.claim_rxe, abi.force_kernel_commands, abi.dv_send);
	abi.registered = true;
	the_abi = abi;
	usb4_fork_guard_install();
	the_abi.register_driver(&device_ops);
	// lib stays open: libibverbs never unloads providers, and we use it
	// for as long as the process lives.
}
