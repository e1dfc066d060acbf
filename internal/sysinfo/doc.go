// Package sysinfo collects, from a filesystem tree, everything ibvinfo
// reports about RDMA on a machine: the RDMA devices with their ports and GID
// tables (/sys/class/infiniband, /sys/class/infiniband_verbs), the
// Thunderbolt links (/sys/bus/thunderbolt), the thunderbolt_ibverbs and
// thunderbolt_net modules, the thunderbolt_ibverbs debugfs files, the IOMMU
// mode, the memlock limit, the udev rename rule and the system's libibverbs
// with the providers it would load.
//
// The tree is rooted anywhere: "/" reads the running system, any other root
// reads a captured copy, which is how the golden tests run. Collect never
// fails and never panics on a missing or malformed file; each file it could
// not read or understand becomes a Problem naming the path, and the facts
// that depended on it stay unknown.
//
// Only facts are gathered here. Judging them is cmd/ibvinfo's job.
package sysinfo
