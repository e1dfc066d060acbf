package provider

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// SRQEnv is the knob that makes every SRQ of a context the provider's
// (docs/srq.md, "Provider SRQ on rxe"):
//
//	USB4VERBS_SRQ=provider  SRQs on any device are the provider's, over the
//	                        kernel receive queues of their QPs, also where
//	                        the kernel has SRQs of its own (rxe); query_device
//	                        answers the provider SRQ's limits
//	USB4VERBS_SRQ=kernel    (or unset, empty, "auto") the default: the
//	                        provider's only on a usb4 kernel that answers
//	                        max_srq 0, the kernel's elsewhere
//
// It is read once per context, when the context is opened, so a process
// that sets it later changes only the contexts it opens afterwards. It is
// for testing the provider SRQ on a kernel that has SRQs (the rxe VM suite
// runs pyverbs and the reliability suite's SRQ cases through it). As the
// front library's settings (cshim/settings.c reads them with secure_getenv),
// it is ignored in a setuid or setgid process.
const SRQEnv = "USB4VERBS_SRQ"

var srqEnvWarn sync.Once

// providerSRQForcedFromEnv reads SRQEnv (newContextOn).
func providerSRQForcedFromEnv() bool {
	if os.Getuid() != os.Geteuid() || os.Getgid() != os.Getegid() {
		return false
	}
	switch v := os.Getenv(SRQEnv); strings.ToLower(v) {
	case "provider":
		return true
	case "", "kernel", "auto":
		return false
	default:
		srqEnvWarn.Do(func() {
			fmt.Fprintf(os.Stderr, "libusb4_rdma: %s=%q is not provider or kernel; ignoring it\n", SRQEnv, v)
		})
		return false
	}
}

// ProviderSRQForced says whether SRQEnv made this context's SRQs the
// provider's (ibvinfo says so beside the limits).
func (c *Context) ProviderSRQForced() bool { return c.srqForced }
