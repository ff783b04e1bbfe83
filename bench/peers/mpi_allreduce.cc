// MPI_Allreduce peer for bench/compare_peers.sh: mpirun -np 2 ./mpi_allreduce -b 4 -e 256M ...
#include <mpi.h>

#include "sweep.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  peers::sweep(
      "openmpi-tcp", rank, size, peers::parseArgs(argc, argv),
      [](const float* in, float* out, std::size_t n) {
        MPI_Allreduce(in, out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      },
      [] { MPI_Barrier(MPI_COMM_WORLD); },
      [size](double x) {
        double sum = 0;
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        return sum / size;
      });
  MPI_Finalize();
  return 0;
}
