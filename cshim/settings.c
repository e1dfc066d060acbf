// The user settings the shim reads, each from the environment first, else
// from the config file:
//
//   claim_rxe: claim Soft-RoCE (rxe) devices. Off by default so a system's
//   stock librxe keeps them (DESIGN.md decision 6).
//     USB4VERBS_CLAIM_RXE=1|0        wins when set (yes/true/on also mean 1)
//     file line "claim_rxe yes"      (or no, 1, 0, ...)
//   force_kernel_commands: usb4 devices poll and post through kernel
//   commands only: no mapped CQ ring, no DV send queue (what donnerkeule's
//   provider does for TBV_CQ_FORCE_IOCTL:
//   donnerkeule-partial:370cd95/userspace/usb4_rdma/usb4_rdma.c). Off by
//   default.
//     USB4VERBS_FORCE_KERNEL_COMMANDS=1|0  wins when set
//     TBV_CQ_FORCE_IOCTL set (any value)   also forces, as it does there
//     file line "force_kernel_commands yes"
//
//   dv_send: the provider attaches DV send queues of its own (usb4 devices
//   whose QUERY_CAPS covers the QP), each at the QP's first post_send. Off
//   by default: the DV ABI is for applications that produce WQEs themselves
//   (pleite-gda:userspace/usb4_rdma/usb4_rdma_dv.h, GPU producers), the
//   kernel allows one DV queue per QP, and a queue of ours would make their
//   CREATE_QUEUE fail with EBUSY (DESIGN.md decision 4). force_kernel_commands
//   wins over it.
//     USB4VERBS_DV_SEND=1|0               wins when set
//     file line "dv_send yes"
//
//   USB4VERBS_CONF=<path>        config file to read instead of the default
//   /etc/usb4verbs/usb4_rdma.conf
//
// The environment is read with secure_getenv, so setuid programs ignore it,
// as libibverbs ignores RDMAV_DRIVERS there. The file lives outside
// /etc/libibverbs.d because libibverbs warns about every line there that is
// not a "driver" directive.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shim.h"

#define USB4_DEFAULT_CONF "/etc/usb4verbs/usb4_rdma.conf"

// parse_bool returns 1, 0, or -1 for an unrecognised word.
static int parse_bool(const char *v)
{
	static const char *const yes[] = {"1", "yes", "true", "on"};
	static const char *const no[] = {"0", "no", "false", "off"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	}
	return -1;
}

int usb4_settings_read_file(const char *path, struct usb4_settings *out)
{
	FILE *f = fopen(path, "re");
	char line[256];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL;
		char *key = strtok_r(line, " \t\r\n=", &save);
		if (!key || key[0] == '#')
			continue;
		char *val = strtok_r(NULL, " \t\r\n=", &save);
		bool *dst = NULL;
		if (strcmp(key, "claim_rxe") == 0)
			dst = &out->claim_rxe;
		else if (strcmp(key, "force_kernel_commands") == 0)
			dst = &out->force_kernel_commands;
		else if (strcmp(key, "dv_send") == 0)
			dst = &out->dv_send;
		if (!dst || !val) {
			fprintf(stderr, USB4_LOG_PREFIX "%s: ignoring unknown line starting '%s'\n", path, key);
			continue;
		}
		int b = parse_bool(val);
		if (b < 0)
			fprintf(stderr, USB4_LOG_PREFIX "%s: %s: '%s' is not yes or no\n", path, key, val);
		else
			*dst = b;
	}
	fclose(f);
	return 0;
}

// env_bool returns the variable's 0/1, or -1 when unset or unparsable (one
// line then).
static int env_bool(const char *name)
{
	const char *env = secure_getenv(name);
	if (!env || !env[0])
		return -1;
	int b = parse_bool(env);
	if (b < 0)
		fprintf(stderr, USB4_LOG_PREFIX "%s='%s' is not 1 or 0; ignoring it\n", name, env);
	return b;
}

struct usb4_settings usb4_settings_read(void)
{
	struct usb4_settings s = {0};
	const char *path = secure_getenv("USB4VERBS_CONF");
	if (!path || !path[0])
		path = USB4_DEFAULT_CONF;
	(void)usb4_settings_read_file(path, &s); // a missing file leaves the defaults
	int b = env_bool("USB4VERBS_CLAIM_RXE");
	if (b >= 0)
		s.claim_rxe = b;
	const char *tbv = secure_getenv("TBV_CQ_FORCE_IOCTL");
	if (tbv)
		s.force_kernel_commands = true;
	b = env_bool("USB4VERBS_FORCE_KERNEL_COMMANDS");
	if (b >= 0)
		s.force_kernel_commands = b;
	b = env_bool("USB4VERBS_DV_SEND");
	if (b >= 0)
		s.dv_send = b;
	if (s.force_kernel_commands)
		s.dv_send = false;
	return s;
}
