// Package packaging has no Go API. Its directory holds the release packaging of
// usb4verbs: nfpm.yaml (deb, rpm, Arch), build.sh (which also enforces the glibc
// floor with check-glibc.sh), the tarball's install.sh, and vmtest.sh, which installs
// the .deb into Debian userlands on a real kernel. The tests here build every package
// from a fresh libusb4_rdma.so and ibvinfo and check where each file lands, the
// per-PABI symlinks, the dependencies, install.sh, and the glibc check. README.md
// describes it all for users.
package packaging
