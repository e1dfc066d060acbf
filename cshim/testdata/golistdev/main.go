// Command golistdev is a Go program that uses libibverbs through cgo, as a
// Go RDMA application would, with listdev.c's output: the devices, the
// provider that claimed each and what opening each gave, then whether the
// provider's Go part got mapped. TestGoHostRefused runs it (issue 13: the
// provider refuses to start a second Go runtime in a Go process).
// It declares the few libibverbs functions it uses, so it needs libibverbs1
// but not its -dev package.
package main

/*
#cgo LDFLAGS: -l:libibverbs.so.1
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ibv_device;
struct ibv_context;
struct ibv_device **ibv_get_device_list(int *num_devices);
void ibv_free_device_list(struct ibv_device **list);
const char *ibv_get_device_name(struct ibv_device *device);
struct ibv_context *ibv_open_device(struct ibv_device *device);
int ibv_close_device(struct ibv_context *context);

static struct ibv_device *device_at(struct ibv_device **list, int i) { return list[i]; }

// struct verbs_device: ibv_device (664 bytes), then the provider's
// verbs_device_ops pointer, whose first member is the provider name.
static const char *provider_name(struct ibv_device *dev)
{
	const char *const *ops = *(const char *const *const *)((const char *)dev + 664);
	return ops ? ops[0] : "?";
}

// open_errno opens and closes dev; it returns 0 or the errno of the failure,
// read on the same thread as the call.
static int open_errno(struct ibv_device *dev)
{
	errno = 0;
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		return errno ? errno : -1;
	ibv_close_device(ctx);
	return 0;
}

static const char *errno_name(int e) { return e < 0 ? "none" : strerrorname_np(e); }
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	var n C.int
	list := C.ibv_get_device_list(&n)
	if list == nil {
		fmt.Println("ibv_get_device_list failed")
		os.Exit(1)
	}
	fmt.Printf("devices %d\n", n)
	for i := 0; i < int(n); i++ {
		dev := C.device_at(list, C.int(i))
		name := C.GoString(C.ibv_get_device_name(dev))
		fmt.Printf("device %s provider %s\n", name, C.GoString(C.provider_name(dev)))
		if e := C.open_errno(dev); e == 0 {
			fmt.Printf("open %s ok\n", name)
		} else {
			fmt.Printf("open %s errno %s\n", name, C.GoString(C.errno_name(e)))
		}
	}
	C.ibv_free_device_list(list)
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		fmt.Println("reading /proc/self/maps:", err)
		os.Exit(1)
	}
	mapped := 0
	if strings.Contains(string(maps), "/libusb4_rdma-go.so") {
		mapped = 1
	}
	fmt.Printf("go_part_mapped %d\n", mapped)
}
