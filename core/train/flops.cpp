#include "core/train/flops.hpp"

#include "core/model/params.hpp"

namespace lcr::train {

double model_flops_per_token(const ModelConfig& m, int64_t seq_len) {
  const ModelLayout layout(m);
  const double D = layout.D(), F = layout.F(), H = layout.H(), Hkv = layout.Hkv(), dq = layout.dq(),
               dv = layout.dv(), V = layout.V();
  double per_layer = D * (H * dq + Hkv * dq + Hkv * dv) + H * dv * D + 3 * D * F;
  const LayerSlices& s = layout.layer(0);
  if (s.fox_w >= 0) per_layer += D * H;
  if (s.path_u >= 0) per_layer += D * Hkv * m.attention.head_dim + D * Hkv;
  const double matrix = per_layer * m.n_layers + V * D;  // + LM head (tied or not)
  const double attn = m.n_layers * double(seq_len + 1) * H * (dq + dv);
  return 3.0 * (2.0 * matrix + attn);
}

}  // namespace lcr::train
