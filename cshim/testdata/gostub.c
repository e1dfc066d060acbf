// Stand-in for the Go exports (main.go) so the C parts build as a plain C
// shared object, e.g. under AddressSanitizer. With USB4_STUB_OPEN_OK=1 the
// open succeeds with a heap handle, so a missing close shows up as a leak.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "../shim.h"

int usb4goOpenContext(char *ibdev_name, int cmd_fd, int kind, uintptr_t *handle)
{
	(void)cmd_fd;
	if (!getenv("USB4_STUB_OPEN_OK")) {
		*handle = 0;
		return EOPNOTSUPP;
	}
	char *h = malloc(64);
	if (!h)
		return ENOMEM;
	snprintf(h, 64, "%s/%d", ibdev_name, kind);
	*handle = (uintptr_t)h;
	return 0;
}

void usb4goCloseContext(uintptr_t handle)
{
	fprintf(stderr, "stub: close %s\n", (char *)handle);
	free((void *)handle);
}
