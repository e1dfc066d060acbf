// Command report turns the raw benchmark lines of `make bench` into
// docs/benchmarks.md and its two SVG plots.
//
// Input is tests/bench/results/: aa.log (librxe against itself, the method's
// validation), ab.log (libusb4_rdma against librxe), each the stdout of one VM
// boot running tests/bench/guest.sh, and host.txt (`go test -bench` output of
// the data-path engine). Lines that matter start with @@BENCH (one sample),
// @@BENCHINFO (context), @@BENCHFAIL and @@BENCHSKIP; everything else is kept
// out of the document.
//
// For every case (tool, message size, QPs, post list, metric) it takes the
// median and the min–max of the repetitions per side, and the ratio of the
// medians, ours / librxe. Under software emulation absolute numbers mean
// little; the ratios from one interleaved run are the result. The targets of
// issue 7 are checked against those ratios, and each miss is stated with its
// size and, when an A/A run exists, compared with the A/A noise band.
//
//	go run ./tests/bench/report [-results DIR] [-doc FILE] [-svgdir DIR]
package main
