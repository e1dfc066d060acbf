package selftest

// The image's libibverbs is loaded with dlopen rather than linked, so the test binary
// builds on a host without libibverbs and runs against whichever rdma-core the VM's
// userland carries.

/*
#cgo CFLAGS: -std=c11 -Wall -Wextra -Werror
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

struct ibv_device;
struct ibv_context;

// verbs_probe lists the devices libibverbs knows and opens each one. On success it
// writes "name:open_errno" pairs separated by spaces into out and returns 0; on
// failure it writes the reason and returns -1.
static int verbs_probe(char *out, size_t cap) {
	out[0] = '\0';
	void *lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		snprintf(out, cap, "dlopen libibverbs.so.1: %s", dlerror());
		return -1;
	}
	struct ibv_device **(*get_list)(int *) = 0;
	void (*free_list)(struct ibv_device **) = 0;
	const char *(*get_name)(struct ibv_device *) = 0;
	struct ibv_context *(*open_dev)(struct ibv_device *) = 0;
	int (*close_dev)(struct ibv_context *) = 0;
	// POSIX allows converting dlsym's void * to a function pointer; memcpy keeps
	// -Wpedantic-style warnings out of the way.
	void *sym;
#define LOAD(var, name) \
	do { sym = dlsym(lib, name); if (!sym) { snprintf(out, cap, "dlsym %s: %s", name, dlerror()); return -1; } memcpy(&var, &sym, sizeof(var)); } while (0)
	LOAD(get_list, "ibv_get_device_list");
	LOAD(free_list, "ibv_free_device_list");
	LOAD(get_name, "ibv_get_device_name");
	LOAD(open_dev, "ibv_open_device");
	LOAD(close_dev, "ibv_close_device");
#undef LOAD
	int n = 0;
	errno = 0;
	struct ibv_device **list = get_list(&n);
	if (!list) {
		snprintf(out, cap, "ibv_get_device_list: errno %d", errno);
		return -1;
	}
	size_t used = 0;
	for (int i = 0; i < n && used < cap; i++) {
		errno = 0;
		struct ibv_context *ctx = open_dev(list[i]);
		int open_errno = ctx ? 0 : (errno ? errno : EIO);
		if (ctx)
			close_dev(ctx);
		int w = snprintf(out + used, cap - used, "%s%s:%d", i ? " " : "", get_name(list[i]), open_errno);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	free_list(list);
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// verbsDevices returns, for each device the image's libibverbs lists, the errno of
// ibv_open_device on it (0 when it opened).
func verbsDevices() (map[string]syscall.Errno, error) {
	buf := make([]byte, 4096)
	if C.verbs_probe((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))) != 0 {
		return nil, errors.New(C.GoString((*C.char)(unsafe.Pointer(&buf[0]))))
	}
	devs := map[string]syscall.Errno{}
	for _, f := range strings.Fields(C.GoString((*C.char)(unsafe.Pointer(&buf[0])))) {
		name, e, ok := strings.Cut(f, ":")
		n, err := strconv.Atoi(e)
		if !ok || err != nil {
			return nil, fmt.Errorf("verbs probe: malformed entry %q", f)
		}
		devs[name] = syscall.Errno(n)
	}
	return devs, nil
}
