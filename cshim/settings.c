// The one user setting the shim reads: whether to claim Soft-RoCE (rxe)
// devices. Off by default so a system's stock librxe keeps them
// (DESIGN.md decision 6).
//
//   USB4VERBS_CLAIM_RXE=1|0      wins when set (yes/true/on also mean 1)
//   USB4VERBS_CONF=<path>        config file to read instead of the default
//   /etc/usb4verbs/usb4_rdma.conf  line "claim_rxe yes" (or no, 1, 0, ...)
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

int usb4_settings_read_claim_rxe(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[256];
	int claim = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL;
		char *key = strtok_r(line, " \t\r\n=", &save);
		if (!key || key[0] == '#')
			continue;
		char *val = strtok_r(NULL, " \t\r\n=", &save);
		if (strcmp(key, "claim_rxe") != 0 || !val) {
			fprintf(stderr, USB4_LOG_PREFIX "%s: ignoring unknown line starting '%s'\n", path, key);
			continue;
		}
		int b = parse_bool(val);
		if (b < 0)
			fprintf(stderr, USB4_LOG_PREFIX "%s: claim_rxe: '%s' is not yes or no\n", path, val);
		else
			claim = b;
	}
	fclose(f);
	return claim;
}

bool usb4_settings_claim_rxe(void)
{
	const char *env = secure_getenv("USB4VERBS_CLAIM_RXE");
	if (env && env[0]) {
		int b = parse_bool(env);
		if (b >= 0)
			return b;
		fprintf(stderr, USB4_LOG_PREFIX "USB4VERBS_CLAIM_RXE='%s' is not 1 or 0; ignoring it\n", env);
	}
	const char *path = secure_getenv("USB4VERBS_CONF");
	if (!path || !path[0])
		path = USB4_DEFAULT_CONF;
	return usb4_settings_read_claim_rxe(path) == 1;
}
