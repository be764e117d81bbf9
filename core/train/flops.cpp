#include "core/train/flops.hpp"

#include "core/model/params.hpp"

namespace lcr::train {

TokenFlops model_flops_per_token(const ModelConfig& m, int64_t seq_len) {
  const ModelLayout layout(m);
  const double D = layout.D(), F = layout.F(), H = layout.H(), Hkv = layout.Hkv(), dq = layout.dq(),
               dv = layout.dv(), V = layout.V(), dh = m.attention.head_dim;
  double per_layer = D * (H * dq + Hkv * dq + Hkv * dv) + H * dv * D + 3 * D * F;
  const LayerSlices& s = layout.layer(0);
  if (s.fox_w >= 0) per_layer += D * H;
  if (s.path_u >= 0) per_layer += D * Hkv * dh + D * Hkv;
  const double matrix = 2.0 * (per_layer * m.n_layers + V * D);  // + the LM head
  const double L = double(seq_len), width = H * (dh + dv) * m.n_layers;
  return {3.0 * (matrix + (L + 1) * width), 3.0 * (matrix + 2 * L * width)};
}

}  // namespace lcr::train
