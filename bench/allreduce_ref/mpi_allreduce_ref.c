/* MPI_Allreduce reference for bench/transport_bench.py: the same schedule as ncclsmoke's sweep
 * (transports/sweep.cpp), so the figures compare. For each size (min, 2*min, ... <= max),
 * out-of-place float32 sum:
 *   fill rank-dependent values, one checked collective (count wrong elements), `warmup`
 *   collectives, a one-element collective to line the ranks up, then `iters` back-to-back
 *   timed collectives; each rank's mean iteration time.
 * Rank 0 prints one JSON line per size: bytes, the max and mean over ranks of the per-rank mean
 * time (µs), and the wrong elements summed over ranks. Built by the bench script with
 * `mpicc -O2`.
 *
 *   mpirun ... mpi_allreduce_ref MIN_BYTES MAX_BYTES WARMUP ITERS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float value(int rank, size_t i) { return (float)(1 + (rank + i) % 4); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (argc != 5) {
    if (rank == 0) fprintf(stderr, "usage: %s MIN_BYTES MAX_BYTES WARMUP ITERS\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  size_t min_bytes = strtoull(argv[1], NULL, 10), max_bytes = strtoull(argv[2], NULL, 10);
  int warmup = atoi(argv[3]), iters = atoi(argv[4]);
  if (min_bytes < 4 || max_bytes < min_bytes || iters < 1 || warmup < 0) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce_ref: bad arguments\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  float* send = malloc(max_bytes);
  float* recv = malloc(max_bytes);
  if (!send || !recv) {
    fprintf(stderr, "mpi_allreduce_ref: rank %d cannot allocate %zu bytes\n", rank, 2 * max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  float expect[4];
  for (int k = 0; k < 4; ++k) {
    double s = 0;
    for (int r = 0; r < world; ++r) s += 1 + (r + k) % 4;
    expect[k] = (float)s;
  }
  float tiny_in = 1, tiny_out = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    int count = (int)(bytes / sizeof(float));
    for (int i = 0; i < count; ++i) send[i] = value(rank, (size_t)i);
    memset(recv, 0xFF, bytes);
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long long wrong = 0;
    for (int i = 0; i < count; ++i) wrong += recv[i] != expect[i % 4];
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&tiny_in, &tiny_out, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters;
    double max_us = 0, sum_us = 0;
    long long all_wrong = 0;
    MPI_Reduce(&us, &max_us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      printf("{\"bytes\": %zu, \"time_us_max\": %.3f, \"time_us_mean\": %.3f, \"wrong\": %lld}\n",
             bytes, max_us, sum_us / world, all_wrong);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
