package rdmanl

import "golang.org/x/sys/unix"

// SysfsDevices reads the devices under <root>/sys/class/infiniband; root ""
// means "/".
func SysfsDevices(root string) ([]Device, error) { return nil, unix.ENOSYS }

// SysfsUverbs finds the uverbs chardev of device dev under
// <root>/sys/class/infiniband_verbs; root "" means "/".
func SysfsUverbs(root, dev string) (Chardev, error) { return Chardev{}, unix.ENOSYS }
