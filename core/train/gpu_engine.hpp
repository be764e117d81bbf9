#pragma once
// The GPU side of `lcr train` with train.device = "cuda" (built with -DLCR_ENABLE_CUDA=ON):
// the model (core/model/cuda/gpu_model.hpp) and AdamW (gpu_adamw.hpp) on this rank's GPU,
// gradient sums over every rank through NCCL (or through host buffers and MPI when the build
// has no NCCL), and with parallel.cp > 1 the GPU ring (parallel/ring/cuda) over each
// replica's context-parallel ranks (an NCCL communicator split from the world's). The trainer keeps
// its host Model<float> and AdamW<float> as the checkpoint and evaluation copies: load() puts them
// on the GPU (start, resume), store() brings the GPU state back (before a checkpoint, an evaluation
// or a probe).
//
// In a build without CUDA (gpu_engine_none.cpp) the constructor is an Error saying how to
// build with CUDA.
//
// GPU choice: rank r uses device (local rank on its node) mod (visible devices), the local
// rank from OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID (0 when neither is set).
#include <memory>

#include "core/config/train_config.hpp"
#include "core/model/model.hpp"
#include "core/model/optimizer.hpp"
#include "parallel/comm/process_grid.hpp"

namespace lcr::train {

class GpuEngine {
 public:
  GpuEngine(const TrainConfig& cfg, const AdamWConfig& opt_cfg, const ProcessGrid& grid);
  ~GpuEngine();

  void load(const Model<float>& host, const AdamW<float>& opt);
  void store(Model<float>& host, AdamW<float>* opt);  // opt may be null (parameters only)
  void upload_params(const Model<float>& host);       // parameters only (moments stay)

  // zero_grad + forward + backward of this rank's rows (host [B, L] int32: whole
  // sequences, or this rank's shard in the parallel.layout when cp > 1); returns the loss
  // over norm (the labelled rows of the global batch).
  double forward_backward(const int32_t* tokens, const int32_t* labels, int64_t B, int64_t L,
                          double norm);
  // Sums the gradients over every rank, then one AdamW update (Error when the norm is not
  // finite; every rank sees the same summed gradient, so all refuse together).
  AdamW<float>::StepInfo allreduce_and_step();
  std::string locate_nonfinite();
  std::string describe() const;  // "cuda:0 (NVIDIA H200), NCCL all-reduce"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lcr::train
