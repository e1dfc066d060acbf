// Command ibvinfo shows and checks USB4/Thunderbolt RDMA (and any other
// RDMA device) on a Linux machine: devices, ports, GID tables, the usb4
// peer/rail identity decoded from node GUIDs, Thunderbolt link training,
// the kernel modules, whether the system's libibverbs would load our
// provider, the data path our provider negotiates per device, and the
// thunderbolt_ibverbs debugfs counters; and it measures a link.
//
//	ibvinfo [--json] [--root DIR] [--no-color]            show everything
//	ibvinfo doctor [--watch[=5s]] [DEV...]                verdict + one-line fix per check
//	ibvinfo perf DEV [DEV2] | --serve DEV | --peer HOST[:PORT] DEV
//
// Exit codes: 0 ok, 1 doctor found an error-severity problem, 2 usage,
// 3 cannot read the tree or write the output, 4 not available in this
// build (perf without cgo), 5 perf failed. README.md documents the checks
// and perf's protocol.
//
// ibvinfo never loads the provider through libibverbs (a second Go runtime
// in one process is unsupported, DESIGN.md decision 7): facts come from
// the tree (internal/sysinfo), netlink (rdmanl) and direct uverbs queries
// (provider). The system's libibverbs is inspected by reading its ELF
// version nodes, which has no side effects and works on captured trees.
//
// perf and the negotiated data path use internal/verbspair: endpoints
// built from provider's control path and provider/dataplane's C engine,
// wired in by datapath.go in cgo builds. Verified on a real kernel (Debian
// 6.1 in qemu, Soft-RoCE rxe0/rxe1): show, --json, doctor, perf locally
// and over --serve/--peer, a dead peer timing out. The usb4 outcomes of
// perf and of the probe are covered only by string tests here (and by
// provider/dataplane's kernel doubles underneath); no usb4 hardware ran it.
package main
