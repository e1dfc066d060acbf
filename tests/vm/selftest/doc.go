// Package selftest is the smoke test of the VM harness (tests/vm/run.sh): run inside
// the VM it checks that what the harness promises to every test binary is there —
// rxe0 and rxe1 ACTIVE on their veth ends, RoCE v2 IPv4 GID indexes in the
// environment that match sysfs, /dev/infiniband/uverbs0 and uverbs1, unlimited
// memlock, traffic between the two addresses really crossing the veth pair, and the
// image's libibverbs finding the devices through its providers.
//
// On the host (USB4VERBS_VM unset) these skip; what runs there instead are the host
// tests of the harness's own shell code (mirror_test.go: the Debian mirror read from
// apt's sources).
//
//	go test -c -o /tmp/selftest.test ./tests/vm/selftest && tests/vm/run.sh /tmp/selftest.test
package selftest
