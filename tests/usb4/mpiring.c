// tests/usb4/mpiring.c: Open MPI between ranks on the usb4 bed (issue 35), every value
// checked. A ring (each rank sends to rank+1 and receives from rank-1, MPI_Sendrecv) and
// an MPI_Allreduce (MPI_SUM of int64 and MPI_MAX of uint32) over message sizes from one
// element to 1 MiB, so that UCX's eager and rendezvous protocols both carry data. Every
// received element is compared with what its sender computed; the error counts are summed
// over the ranks at the end. Rank 0 prints go-test-style lines
//   --- PASS|FAIL: ompi/<case>
// and `@@MPI ring_payload_bytes=N` (the bytes the ring's sends of all ranks carried), which
// guest-ucx.sh holds against tbloop's bytes_delivered. Exit status 0 only when every case
// passed. Built on the host against the guest userland's Open MPI (tests/usb4/run.sh).
//
//   mpiring [ITERS]     (default 10; the 1 MiB cases run ITERS/5 + 1 times)
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t pattern(int rank, int iter, size_t i) {
  uint32_t x = (uint32_t)(rank + 1) * 2654435761u ^ (uint32_t)iter * 40503u ^ (uint32_t)i * 2246822519u;
  x ^= x >> 15;
  x *= 2246822519u;
  return x ^ (x >> 13);
}

static const size_t counts[] = {1, 1000, 16384, 262144}; // uint32 elements: 4 B ... 1 MiB

static int iters_for(int iters, size_t n) { return n >= 262144 ? iters / 5 + 1 : iters; }

// ring: one case per size; returns the mismatches this rank saw.
static long ring(int rank, int size, int iters, size_t n, long long *payload) {
  uint32_t *s = malloc(n * 4), *r = malloc(n * 4);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  long bad = 0;
  if (!s || !r) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int it = 0; it < iters_for(iters, n); it++) {
    for (size_t i = 0; i < n; i++) s[i] = pattern(rank, it, i);
    memset(r, 0xa5, n * 4);
    MPI_Sendrecv(s, (int)n, MPI_UINT32_T, right, it, r, (int)n, MPI_UINT32_T, left, it, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    *payload += (long long)n * 4;
    for (size_t i = 0; i < n; i++) {
      if (r[i] != pattern(left, it, i)) {
        if (bad < 3)
          fprintf(stderr, "rank %d ring n=%zu iter %d: element %zu is %08x, rank %d sent %08x\n", rank, n, it, i,
                  r[i], left, pattern(left, it, i));
        bad++;
      }
    }
  }
  free(s);
  free(r);
  return bad;
}

// allreduce: MPI_SUM of int64 and MPI_MAX of uint32 over every rank's pattern.
static long allreduce(int rank, int size, int iters, size_t n) {
  int64_t *s = malloc(n * 8), *r = malloc(n * 8);
  uint32_t *ms = malloc(n * 4), *mr = malloc(n * 4);
  long bad = 0;
  if (!s || !r || !ms || !mr) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int it = 0; it < iters_for(iters, n); it++) {
    for (size_t i = 0; i < n; i++) {
      s[i] = (int64_t)pattern(rank, it, i) - 0x7fffffff;
      ms[i] = pattern(rank, it + 1000, i);
    }
    memset(r, 0x5a, n * 8);
    memset(mr, 0x5a, n * 4);
    MPI_Allreduce(s, r, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(ms, mr, (int)n, MPI_UINT32_T, MPI_MAX, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) {
      int64_t want = 0;
      uint32_t wmax = 0;
      for (int q = 0; q < size; q++) {
        want += (int64_t)pattern(q, it, i) - 0x7fffffff;
        if (pattern(q, it + 1000, i) > wmax) wmax = pattern(q, it + 1000, i);
      }
      if (r[i] != want || mr[i] != wmax) {
        if (bad < 3)
          fprintf(stderr, "rank %d allreduce n=%zu iter %d: element %zu sum %lld (want %lld) max %08x (want %08x)\n",
                  rank, n, it, i, (long long)r[i], (long long)want, mr[i], wmax);
        bad++;
      }
    }
  }
  free(s);
  free(r);
  free(ms);
  free(mr);
  return bad;
}

int main(int argc, char **argv) {
  int rank, size, iters = argc > 1 ? atoi(argv[1]) : 10, failed = 0;
  long long payload = 0, all_payload = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  int len;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(name, &len);
  if (iters < 1) iters = 1;
  fprintf(stderr, "# rank %d of %d on %s pid %ld\n", rank, size, name, (long)getpid());
  for (int k = 0; k < 2; k++) {
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
      size_t n = counts[c];
      long bad = k == 0 ? ring(rank, size, iters, n, &payload) : allreduce(rank, size, iters, n), all = 0;
      MPI_Allreduce(&bad, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (rank == 0) {
        const char *what = k == 0 ? "ring" : "allreduce";
        if (all == 0)
          printf("--- PASS: ompi/%s_%zuB (%d ranks, %d iterations, every element checked)\n", what, n * (k ? 8 : 4),
                 size, iters_for(iters, n));
        else
          printf("--- FAIL: ompi/%s_%zuB (%ld elements wrong over %d ranks)\n", what, n * (k ? 8 : 4), all, size);
        fflush(stdout);
      }
      failed |= all != 0;
    }
  }
  MPI_Reduce(&payload, &all_payload, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("@@MPI ranks=%d ring_payload_bytes=%lld\n", size, all_payload);
  MPI_Finalize();
  return failed;
}
