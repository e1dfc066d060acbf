// Command gencabi writes the cgo tables that the uapi layout test compares
// against: for every uapi constant and struct that has a counterpart in the
// system's <rdma/*.h>, a C expression giving its value, sizeof, and each
// field's offsetof and size. It also writes the list of uapi names that the
// headers lack (newer kernels, vendor ABIs, kernel-internal enums), and a
// test file mapping every uapi struct name to its reflect.Type.
//
// Run from the uapi directory: go run ./internal/cmd/gencabi
package main
