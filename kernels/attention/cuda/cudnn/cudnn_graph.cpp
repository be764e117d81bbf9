// cuDNN backend descriptors and plans (cudnn_graph.hpp).
#include "kernels/attention/cuda/cudnn/cudnn_graph.hpp"

#include <utility>

#include "kernels/base/error.hpp"

namespace lcr::cuda::cudnn {

Desc::Desc(const Api& api, cudnnBackendDescriptorType_t type) : api_(&api) {
  const cudnnStatus_t s = api.CreateDescriptor(type, &d_);
  require(s == CUDNN_STATUS_SUCCESS, "cuDNN: creating backend descriptor type ", int(type),
          " failed: ", status_text(api, s));
}
Desc::Desc(Desc&& o) noexcept : api_(o.api_), d_(std::exchange(o.d_, nullptr)) {}
Desc::~Desc() {
  if (d_) api_->DestroyDescriptor(d_);
}

Desc& Desc::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
                const void* values) {
  const cudnnStatus_t s = api_->SetAttribute(d_, name, type, n, values);
  require(s == CUDNN_STATUS_SUCCESS, "cuDNN: setting attribute ", int(name),
          " failed: ", status_text(*api_, s));
  return *this;
}

void Desc::finalize(const char* what) {
  const cudnnStatus_t s = try_finalize();
  require(s == CUDNN_STATUS_SUCCESS, "cuDNN: finalising ", what,
          " failed: ", status_text(*api_, s));
}
cudnnStatus_t Desc::try_finalize() { return api_->Finalize(d_); }

Tensor GraphBuilder::tensor(int64_t uid, cudnnDataType_t type, const Dims& dims,
                            const Dims& strides, bool by_value) {
  auto d = std::make_unique<Desc>(api_, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const bool is_virtual = uid >= kFirstVirtualUid;
  const int64_t align = 16;
  d->set_type(CUDNN_ATTR_TENSOR_DATA_TYPE, type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, int64_t(dims.size()), dims.data())
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, int64_t(strides.size()), strides.data())
      .set_i64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid)
      .set_i64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, align)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  if (by_value) d->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
  d->finalize("a tensor descriptor");
  keep_.push_back(std::move(d));
  return {keep_.back().get(), uid};
}

Tensor GraphBuilder::virt(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
  return tensor(next_virtual_++, type, dims, strides);
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, Tensor x, Tensor y,
                             const Tensor* b, const Tensor* t, int64_t axis) {
  auto pw = std::make_unique<Desc>(api_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
      .set_type(CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
  if (axis >= 0) pw->set_i64(CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw->finalize("a pointwise descriptor");
  auto op = std::make_unique<Desc>(api_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  const float one = 1.f;
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x.desc);
  if (b) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b->desc);
  if (t) op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t->desc);
  op->set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y.desc)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
  op->finalize("a pointwise operation");
  ops_.push_back(op->get());
  keep_.push_back(std::move(pw));
  keep_.push_back(std::move(op));
}

void GraphBuilder::matmul(Tensor a, Tensor b, Tensor c) {
  auto mm = std::make_unique<Desc>(api_, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  mm->set_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize("a matmul descriptor");
  auto op = std::make_unique<Desc>(api_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op->set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a.desc)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b.desc)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c.desc)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, *mm)
      .finalize("a matmul operation");
  ops_.push_back(op->get());
  keep_.push_back(std::move(mm));
  keep_.push_back(std::move(op));
}

void GraphBuilder::reduction(cudnnReduceTensorOp_t rop, Tensor x, Tensor y) {
  auto rd = std::make_unique<Desc>(api_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  const bool deterministic = false;
  rd->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &rop)
      .set_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT)
      .set(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &deterministic)
      .finalize("a reduction descriptor");
  auto op = std::make_unique<Desc>(api_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op->set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x.desc)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y.desc)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *rd)
      .finalize("a reduction operation");
  ops_.push_back(op->get());
  keep_.push_back(std::move(rd));
  keep_.push_back(std::move(op));
}

void GraphBuilder::reshape(Tensor x, Tensor y) {
  auto op = std::make_unique<Desc>(api_, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op->set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x.desc)
      .set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y.desc)
      .finalize("a reshape operation");
  ops_.push_back(op->get());
  keep_.push_back(std::move(op));
}

std::shared_ptr<Plan> GraphBuilder::build(cudnnHandle_t handle, std::string* why) {
  auto out = std::make_shared<Plan>();
  out->graph = std::make_unique<Desc>(api_, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  out->graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()),
           ops_.data());
  if (cudnnStatus_t s = out->graph->try_finalize(); s != CUDNN_STATUS_SUCCESS) {
    *why = "the operation graph was refused: " + status_text(api_, s);
    return nullptr;
  }
  Desc heur(api_, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *out->graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
      .finalize("the engine heuristics");
  int64_t count = 0;
  api_.GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                    &count, nullptr);
  std::vector<std::unique_ptr<Desc>> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_unique<Desc>(api_, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->get());
  }
  int64_t got = 0;
  if (count > 0)
    api_.GetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                      count, &got, raw.data());
  std::string last = "no engine configuration was offered";
  for (int64_t i = 0; i < got; ++i) {
    auto plan = std::make_unique<Desc>(api_, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfgs[i]);
    if (cudnnStatus_t s = plan->try_finalize(); s != CUDNN_STATUS_SUCCESS) {
      last = status_text(api_, s);
      continue;
    }
    int64_t ws = 0;
    api_.GetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                      nullptr, &ws);
    out->workspace_bytes = ws;
    Desc engine(api_, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t e = engine.get();
    int64_t n = 0;
    if (api_.GetAttribute(cfgs[i]->get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) == CUDNN_STATUS_SUCCESS)
      api_.GetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &out->engine);
    out->plan = std::move(plan);
    out->keep = std::move(keep_);
    for (auto& c : cfgs) out->keep.push_back(std::move(c));
    return out;
  }
  *why = "no engine configuration of " + std::to_string(got) + " finalised (last: " + last + ")";
  return nullptr;
}

void execute(const Api& api, cudnnHandle_t handle, const Plan& plan,
             const std::vector<int64_t>& uids, const std::vector<void*>& ptrs, void* workspace) {
  Desc pack(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(ptrs.size()),
           ptrs.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize("the variant pack");
  const cudnnStatus_t s = api.Execute(handle, plan.plan->get(), pack.get());
  require(s == CUDNN_STATUS_SUCCESS,
          "cuDNN: executing the attention plan failed: ", status_text(api, s));
}

}  // namespace lcr::cuda::cudnn
