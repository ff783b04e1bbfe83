// MPI peer for bench/startup_time.py: time to MPI_Init + MPI_Barrier on every rank, printed in
// the same line format as `hvd-bench --startup`.
#include <mpi.h>
#include <stdio.h>
#include <time.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  printf("HVD_INITIALISED %lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
