// Package usb4double is a test double of the usb4 (thunderbolt_ibverbs)
// kernel side for the dataplane engine. It plugs into the engine's syscall
// seam (struct usb4v_sys) and decodes write commands, the mapped CQ ring and
// the DV ioctls the way the kernel does per the project reference, rejecting
// what the kernel rejects. Its DV side plays pleite-gda (caps V2, or fewer
// with SetDVCaps) or hellas-gda-v2 (caps 0, NOP-only KICK) per SetDVModel;
// both refuse an ordinary post_send on a QP with a DV queue with EBUSY. Connected QP pairs move data by memcpy inside the
// test process. Test-only: nothing outside provider/dataplane tests uses it.
package usb4double
