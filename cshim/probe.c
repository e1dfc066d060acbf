// Run-time detection of the running libibverbs: its private ABI (PABI), the
// layout of its private struct verbs_context_ops, and the few public sizes
// that moved. Every probe is side-effect free (rdma-core-private-abi.md §4.4).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#define USB4_ZOPSLAYOUT_TABLES
#include "zopslayout.h"

// Candidate PABIs we can register under (rdma-core-private-abi.md §1).
static const unsigned known_pabis[] = {34, 57, 59, 64, 65};

static void *private_sym(void *lib, const char *name, unsigned pabi)
{
	char node[32];
	snprintf(node, sizeof(node), "IBVERBS_PRIVATE_%u", pabi);
	return dlvsym(lib, name, node);
}

// find_pabi returns the N of the one verbs_register_driver_N@IBVERBS_PRIVATE_N
// the library exports, or 0. It scans well beyond the known values so an
// unknown library is named in the refusal line.
static unsigned find_pabi(void *lib, bool *ambiguous)
{
	unsigned found = 0;
	*ambiguous = false;
	for (unsigned n = 1; n < 200; n++) {
		char sym[48];
		snprintf(sym, sizeof(sym), "verbs_register_driver_%u", n);
		if (private_sym(lib, sym, n)) {
			if (found)
				*ambiguous = true;
			found = n;
		}
	}
	return found;
}

// Sentinel for slot i; never a valid user-space address.
#define SLOT_SENTINEL(i) ((uintptr_t)0x5a5a000000000000ull + (uintptr_t)(i))
enum {
	PROBE_SENTINELS = 256,      // more than any layout will ever have
	PROBE_FAKE_VCTX = 4096,     // larger than any struct verbs_context
	PROBE_FAKE_PRIV = 64 * 1024 // larger than any struct verbs_ex_private
};

unsigned usb4_probe_ops_slots(void (*set_ops)(void *vctx, const void *ops))
{
	uintptr_t *sentinels = calloc(PROBE_SENTINELS, sizeof(uintptr_t));
	uintptr_t *fake_vctx = calloc(PROBE_FAKE_VCTX / sizeof(uintptr_t), sizeof(uintptr_t));
	uintptr_t *fake_priv = calloc(PROBE_FAKE_PRIV / sizeof(uintptr_t), sizeof(uintptr_t));
	unsigned slots = 0;

	if (!set_ops || !sentinels || !fake_vctx || !fake_priv)
		goto out;
	for (unsigned i = 0; i < PROBE_SENTINELS; i++)
		sentinels[i] = SLOT_SENTINEL(i);
	// Whatever offset vctx->priv has in this layout, it reads fake_priv.
	for (size_t i = 0; i < PROBE_FAKE_VCTX / sizeof(uintptr_t); i++)
		fake_vctx[i] = (uintptr_t)fake_priv;

	// verbs_set_ops copies each of its own members, by index, into
	// priv->ops (and mirrors some into the fake vctx). Count the run of
	// consecutive sentinels that landed in priv: that is the member count.
	set_ops(fake_vctx, sentinels);

	size_t words = PROBE_FAKE_PRIV / sizeof(uintptr_t);
	for (size_t i = 0; i < words; i++) {
		if (fake_priv[i] != SLOT_SENTINEL(0))
			continue;
		while (i + slots < words && fake_priv[i + slots] == SLOT_SENTINEL(slots))
			slots++;
		break;
	}
	// Anything else than exactly one run means we misread the library.
	for (size_t i = 0; i < words && slots; i++) {
		uintptr_t v = fake_priv[i];
		if (v >= SLOT_SENTINEL(slots) && v < SLOT_SENTINEL(PROBE_SENTINELS))
			slots = 0;
	}
out:
	free(sentinels);
	free(fake_vctx);
	free(fake_priv);
	return slots;
}

// probe_qp_comp_mask finds offsetof(struct verbs_qp, comp_mask): it moves
// with the size of the public struct ibv_qp_ex (344/352/360). The running
// ibv_qp_to_qp_ex() tests comp_mask & VERBS_QP_EX, so plant that bit at one
// candidate offset at a time in a zeroed buffer.
static size_t probe_qp_comp_mask(void *lib)
{
	void *(*to_qp_ex)(void *qp) = (void *(*)(void *))dlvsym(lib, "ibv_qp_to_qp_ex", "IBVERBS_1.6");
	enum { VERBS_QP_EX = 2 };
	if (!to_qp_ex)
		return 0;
	for (size_t off = 344; off <= 512; off += 8) {
		_Alignas(8) unsigned char qp[1024] = {0};
		uint32_t mask = VERBS_QP_EX;
		memcpy(qp + off, &mask, sizeof(mask));
		if (to_qp_ex(qp))
			return off;
	}
	return 0;
}

struct layout_row {
	const char *name;
	unsigned slots;
	const int16_t *index;
};

#define LAYOUT_ROW(name, n) {#name, n, usb4_slots_##name},
static const struct layout_row layouts[] = {USB4_OPS_LAYOUTS(LAYOUT_ROW)};

static const struct layout_row *layout_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (strcmp(layouts[i].name, name) == 0)
			return &layouts[i];
	return NULL;
}

// decide applies the decision table of rdma-core-private-abi.md §4.4,
// extended with PABI 65 (rdma-core master: 93 ops, verbs_context as v64).
// Returns the layout, or NULL when (PABI, slots) is not a known pair.
static const struct layout_row *decide(void *lib, struct usb4_abi *abi)
{
	bool has_1_13 = dlvsym(lib, "ibv_import_dm", "IBVERBS_1.13") != NULL;
	bool has_1_14 = dlvsym(lib, "ibv_query_qp_data_in_order", "IBVERBS_1.14") != NULL;
	bool has_1_16 = dlvsym(lib, "ibv_query_port_speed", "IBVERBS_1.16") != NULL;
	// ibv_port_attr grew to 56 bytes in v49, the release that added the
	// private export ibv_wr_opcode_str (rdma-core:libibverbs/libibverbs.map.in).
	bool has_v49 = private_sym(lib, "ibv_wr_opcode_str", abi->pabi) != NULL;
	const char *name = NULL;

	abi->vctx_size = 648;
	abi->port_attr_size = 56;
	abi->sysfs_abi_ver_off = SYSFS_DEV_ABI_VER_V35;
	switch (abi->pabi) {
	case 34:
		abi->port_attr_size = has_v49 ? 56 : 52;
		if (abi->ops_slots == 76 && has_1_14)
			name = "L36";
		else if (abi->ops_slots == 75 && has_1_13 && !has_1_14)
			name = "L35";
		else if (abi->ops_slots == 73 && !has_1_13) {
			name = "L34";
			abi->sysfs_abi_ver_off = SYSFS_DEV_ABI_VER_V34;
		}
		break;
	case 57:
		if (abi->ops_slots == 76)
			name = "L36";
		break;
	case 59:
		if (abi->ops_slots == 79 && !has_1_16) {
			name = "L59";
			abi->vctx_size = 672;
		} else if (abi->ops_slots == 81 && has_1_16) {
			name = "L62";
			abi->vctx_size = 680;
		}
		break;
	case 64:
		if (abi->ops_slots == 83) {
			name = "L64";
			abi->vctx_size = 696;
		}
		break;
	case 65:
		if (abi->ops_slots == 93) {
			name = "L65";
			abi->vctx_size = 696;
		}
		break;
	}
	if (!name)
		return NULL;
	const struct layout_row *row = layout_by_name(name);
	// The generated table must agree with what the library told us.
	if (!row || row->slots != abi->ops_slots)
		return NULL;
	return row;
}

bool usb4_probe(void *lib, struct usb4_abi *abi, char *why, size_t why_len)
{
	bool ambiguous;

	memset(abi, 0, sizeof(*abi));
	abi->pabi = find_pabi(lib, &ambiguous);
	if (abi->pabi == 0) {
		snprintf(why, why_len, "no verbs_register_driver_NN@IBVERBS_PRIVATE_NN");
		return false;
	}
	if (ambiguous) {
		snprintf(why, why_len, "several private ABIs exported (last PABI %u)", abi->pabi);
		return false;
	}
	bool pabi_known = false;
	for (size_t i = 0; i < sizeof(known_pabis) / sizeof(known_pabis[0]); i++)
		pabi_known |= known_pabis[i] == abi->pabi;

	abi->set_ops = (void (*)(void *, const void *))private_sym(lib, "verbs_set_ops", abi->pabi);
	abi->init_and_alloc_context = (void *(*)(void *, int, size_t, void *, uint32_t))private_sym(
		lib, "_verbs_init_and_alloc_context", abi->pabi);
	abi->uninit_context = (void (*)(void *))private_sym(lib, "verbs_uninit_context", abi->pabi);
	// Optional: set from RDMAV_ALLOW_DISASSOC_DESTROY by libibverbs' init.
	abi->allow_disassoc_destroy = (const bool *)private_sym(lib, "verbs_allow_disassociate_destroy", abi->pabi);
	{
		char sym[48];
		snprintf(sym, sizeof(sym), "verbs_register_driver_%u", abi->pabi);
		abi->register_driver = (void (*)(const struct usb4_device_ops *))private_sym(lib, sym, abi->pabi);
	}
	if (!pabi_known || !abi->set_ops || !abi->init_and_alloc_context || !abi->uninit_context) {
		// Only call into a library whose verbs_set_ops we know the
		// signature of; report what we saw.
		snprintf(why, why_len, "PABI %u%s", abi->pabi,
			 pabi_known ? ", private helpers missing" : "");
		return false;
	}
	abi->ops_slots = usb4_probe_ops_slots(abi->set_ops);
	const struct layout_row *row = decide(lib, abi);
	if (!row) {
		snprintf(why, why_len, "PABI %u with %u verbs_context_ops slots", abi->pabi, abi->ops_slots);
		return false;
	}
	abi->layout = row->name;
	abi->slots = row->index;
	abi->qp_comp_mask_off = probe_qp_comp_mask(lib);
	if (abi->qp_comp_mask_off == 0) {
		snprintf(why, why_len, "PABI %u layout %s: verbs_qp.comp_mask not found", abi->pabi, row->name);
		return false;
	}
	return true;
}
