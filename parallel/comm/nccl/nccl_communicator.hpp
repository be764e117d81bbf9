#pragma once
// The NCCL backend of Communicator: device buffers, one process per GPU, its own CUDA
// stream (built with -DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON; docs/cuda.md).
//
// Bootstrap: MPI must be up (lcr::MpiSession). Each rank picks GPU = its local rank on the
// node (OMPI_COMM_WORLD_LOCAL_RANK, else SLURM_LOCALID, else its rank among the MPI ranks
// sharing the node), or device 0 when its launcher bound it to one GPU and says so with
// LCR_GPU_PER_TASK=1 (slurm/lib/lcr-task); rank 0 makes the ncclUniqueId and MPI_Bcast
// hands it to the others.
//
// Semantics, same contract as the MPI backend (communicator.hpp):
//  - isend/irecv only queue the operation; the queue is issued as ONE NCCL group (so a
//    rank's sends and receives of one ring step cannot deadlock each other) at the next
//    flush(), wait(), wait_on(), collective, or a test() that finds every peer ready.
//    Messages between two ranks match in posting order (NCCL has no tags).
//  - Size and tag checks: NCCL cannot tell a receive that the message has another size
//    (it hangs or corrupts instead). So every send/receive also posts a 24-byte header
//    (its index on the channel, bytes, tag) to its peer through MPI at posting time; the
//    flush compares the two sides' headers and leaves a mismatched pair out of the group
//    on BOTH ranks, whose wait() then throws an Error naming peer, tag and both sizes.
//  - Host ordering, like MPI: the data a send reads must be written before isend is
//    called (device work finished: a stream/device sync, a Kokkos::fence); wait() blocks
//    the host until the transfer is done. Collectives block the host likewise.
//  - Stream ordering, for GPU code that keeps the host ahead of the GPU (the CUDA ring):
//    after(s) makes later transfers wait for the work queued on s so far; wait_on(r, s)
//    makes stream s wait for request r on the GPU and completes r's handle at once;
//    join(s) makes s wait for everything issued on the communicator's stream so far.
//  - Buffers must be device memory (cudaMalloc or managed): a host pointer is an Error
//    that names the MPI backend as the fix.
//  - Requests must be completed (or destroyed) before their communicator. A request
//    destroyed before it was issued (unwinding after an error) is dropped from the queue;
//    one already issued completes on the GPU on its own. Either way the error path ends in
//    abort() (run_or_abort), which ends the job so no peer waits forever.
#include <cuda_runtime.h>

#include <memory>

#include "parallel/comm/communicator.hpp"

namespace lcr {

class NcclCommunicator : public Communicator {
 public:
  virtual int device() const = 0;           // the CUDA device this rank uses
  virtual cudaStream_t stream() const = 0;  // where every NCCL operation runs

  // Issues the queued sends/receives now, as one group (blocks only until every peer has
  // posted the matching operations, for the header check; not on the data).
  virtual void flush() = 0;
  // Transfers issued from now on start only after the work queued on s so far.
  virtual void after(cudaStream_t s) = 0;
  // Stream s waits (on the GPU) for request r; r is completed on the host at once. Throws
  // the header-check Error of r like wait().
  virtual void wait_on(Request& r, cudaStream_t s) = 0;
  // Stream s waits for everything issued on stream() so far.
  virtual void join(cudaStream_t s) = 0;
  // In-place sum, stream-ordered: issued after after() dependencies, returns at once;
  // use join() to consume the result on another stream (data-parallel gradients).
  virtual void allreduce_sum_async(void* buf, size_t count, DType t) = 0;
};

// The NCCL communicator over MPI_COMM_WORLD's ranks (collective: every rank calls it).
// Sets NCCL_NVLS_ENABLE=0 in the environment when unset (see the .cpp for why) and makes
// the chosen GPU current. Errors: MPI not initialised, fewer visible GPUs than ranks on
// a node, any NCCL/CUDA failure, each as an lcr::Error with the fix.
std::unique_ptr<NcclCommunicator> nccl_world();

// The GPU nccl_world() would pick for this process (its local rank on the node) and the
// number of GPUs visible; tests use them to skip cleanly where there are too few GPUs.
int nccl_local_rank();
int cuda_device_count();

}  // namespace lcr
