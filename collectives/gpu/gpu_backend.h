// The GPU backend's public header (CUDA builds only): what the runtime's GPU executor and
// hvd-bench use of collectives/gpu and collectives/nccl, which are one layer and one target
// (hvd_gpu). Outside that layer, include this header (or gpu_build.h, which every build has),
// not the ones below; cmake/layers.txt says so and the include-graph test checks it.
//
//   GpuCollectives          the backend interface (gpu_collectives.h)
//   NcclCollectives         NCCL, GPU to GPU (nccl/nccl_collectives.h)
//   StagedCollectives       through page-locked host memory and the host algorithms
//   HierarchicalCollectives local NCCL stage, cross-host staged stage
//   cuda_api.h              RAII streams, events, buffers; CUDA errors as hvd::Error
//   kernels.h               batched copies and scaling on a stream
#pragma once

#include "collectives/gpu/cuda_api.h"
#include "collectives/gpu/gpu_collectives.h"
#include "collectives/gpu/hierarchical_collectives.h"
#include "collectives/gpu/kernels.h"
#include "collectives/gpu/staged_collectives.h"
#include "collectives/nccl/nccl_collectives.h"
