// Command ibvinfo shows and checks USB4/Thunderbolt RDMA (and any other
// RDMA device) on a Linux machine: devices, ports, GID tables, the usb4
// peer/rail identity decoded from node GUIDs, Thunderbolt link training,
// the kernel modules, whether the system's libibverbs would load our
// provider, and the thunderbolt_ibverbs debugfs counters.
//
//	ibvinfo [--json] [--root DIR] [--no-color]            show everything
//	ibvinfo doctor [--watch[=5s]] [DEV...]                verdict + one-line fix per check
//	ibvinfo perf DEV [DEV2] | --serve DEV | --connect HOST DEV
//
// Exit codes: 0 ok, 1 doctor found an error-severity problem, 2 usage,
// 3 cannot read the tree or write the output, 4 not available in this
// build, 5 perf failed. README.md documents the checks.
//
// ibvinfo never loads the provider through libibverbs (a second Go runtime
// in one process is unsupported, DESIGN.md decision 7): facts come from
// the tree (internal/sysinfo), netlink (rdmanl) and direct uverbs queries
// (provider). The system's libibverbs is inspected by reading its ELF
// version nodes, which has no side effects and works on captured trees.
package main
