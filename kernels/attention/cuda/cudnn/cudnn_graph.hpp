#pragma once
// A small builder over cuDNN's backend descriptors (cudnn_api.hpp): tensors, the pointwise,
// matmul, reduction and reshape nodes the attention graphs use, and the step from an
// operation graph to an execution plan. Each node is one backend operation with the
// attributes cuDNN's fused-attention pattern matcher expects (the same ones cuDNN's own
// frontend sets); the builder owns every descriptor until the plan that uses them dies.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/cuda/cudnn/cudnn_api.hpp"

namespace lcr::cuda::cudnn {

// One backend descriptor, destroyed with its owner. Setters throw lcr::Error naming the
// attribute and cuDNN's message.
class Desc {
 public:
  Desc(const Api& api, cudnnBackendDescriptorType_t type);
  Desc(Desc&& o) noexcept;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc& operator=(Desc&&) = delete;
  ~Desc();
  cudnnBackendDescriptor_t get() const { return d_; }
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
            const void* values);
  Desc& set_i64(cudnnBackendAttributeName_t name, int64_t v) {
    return set(name, CUDNN_TYPE_INT64, 1, &v);
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& d) {
    cudnnBackendDescriptor_t x = d.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
  }
  Desc& set_type(cudnnBackendAttributeName_t name, cudnnDataType_t t) {
    return set(name, CUDNN_TYPE_DATA_TYPE, 1, &t);
  }
  void finalize(const char* what);
  cudnnStatus_t try_finalize();

 private:
  const Api* api_;
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A tensor of the graph: its uid (what the variant pack names it by) and descriptor.
struct Tensor {
  const Desc* desc = nullptr;
  int64_t uid = 0;
};

using Dims = std::vector<int64_t>;

class GraphBuilder {
 public:
  explicit GraphBuilder(const Api& api) : api_(api) {}

  // A tensor with a caller-chosen uid (inputs, outputs, workspace tensors) or, for
  // virtual ones, the next free uid (>= kFirstVirtualUid).
  Tensor tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                bool by_value = false);
  Tensor virt(cudnnDataType_t type, const Dims& dims, const Dims& strides);
  // A host scalar passed by value at execution ([1,1,1,1] fp32).
  Tensor scalar(int64_t uid) {
    return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, true);
  }

  // y = op(x[, b][, t]); prec is the node's math precision; axis for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, Tensor x, Tensor y,
                 const Tensor* b = nullptr, const Tensor* t = nullptr, int64_t axis = -1);
  void matmul(Tensor a, Tensor b, Tensor c);
  void reduction(cudnnReduceTensorOp_t op, Tensor x, Tensor y);
  void reshape(Tensor x, Tensor y);

  // Finalises the operation graph and returns the first execution plan that cuDNN's
  // heuristics (mode A) offer and that finalises, or null with *why set.
  struct Plan;
  std::shared_ptr<Plan> build(cudnnHandle_t handle, std::string* why);

  static constexpr int64_t kFirstVirtualUid = 1000;

 private:
  const Api& api_;
  std::vector<std::unique_ptr<Desc>> keep_;  // tensors, node descriptors
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kFirstVirtualUid;
  friend struct Plan;
};

// An execution plan with every descriptor it was built from.
struct GraphBuilder::Plan {
  std::vector<std::unique_ptr<Desc>> keep;
  std::unique_ptr<Desc> graph, plan;
  int64_t workspace_bytes = 0;
  int64_t engine = -1;  // cuDNN's global engine index, for logs and benchmarks
};
using Plan = GraphBuilder::Plan;

// Runs a plan: uids[i] is bound to ptrs[i] (device pointers; host pointers for by-value
// scalars), with `workspace` of at least plan.workspace_bytes.
void execute(const Api& api, cudnnHandle_t handle, const Plan& plan,
             const std::vector<int64_t>& uids, const std::vector<void*>& ptrs, void* workspace);

}  // namespace lcr::cuda::cudnn
