package rdmanl_test

import (
	"errors"
	"fmt"

	"usb4verbs/rdmanl"
)

// List devices, falling back to sysfs where NETLINK_RDMA is unavailable.
func ExampleDevices() {
	devs, err := rdmanl.Devices()
	if err != nil && !errors.Is(err, rdmanl.ErrDumpInterrupted) {
		devs, err = rdmanl.SysfsDevices("")
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range devs {
		fmt.Printf("%s guid %016x %s\n", d.Name, d.NodeGUID, d.Protocol)
	}
}

// Resolve the uverbs node a provider opens for a device.
func ExampleUverbsChardev() {
	d, err := rdmanl.DeviceByName("rxe0")
	if errors.Is(err, rdmanl.ErrNotFound) {
		fmt.Println("no rxe0")
		return
	} else if err != nil {
		fmt.Println(err)
		return
	}
	cd, err := rdmanl.UverbsChardev(d.Index)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cd.Path, "ABI", cd.ABIVersion, "driver", cd.DriverID)
}
