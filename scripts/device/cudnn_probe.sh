set -x
nvidia-smi --query-gpu=name,driver_version --format=csv
python3 - <<'PY'
import torch, os, glob
print(torch.__version__, torch.backends.cudnn.version())
import nvidia.cudnn, os
d=os.path.dirname(nvidia.cudnn.__file__) if nvidia.cudnn.__file__ else list(nvidia.cudnn.__path__)[0]
print(d); print(sorted(glob.glob(d+'/lib/*')))
PY
export CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=$OUT/cudnn_api.log
python3 - <<'PY'
import torch
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F
for (H,Hk,L,D) in [(4,4,1000,64),(4,2,384,128)]:
  q=torch.randn(1,H,L,D,device='cuda',dtype=torch.bfloat16,requires_grad=True)
  k=torch.randn(1,Hk,L,D,device='cuda',dtype=torch.bfloat16,requires_grad=True)
  v=torch.randn(1,Hk,L,D,device='cuda',dtype=torch.bfloat16,requires_grad=True)
  with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    o=F.scaled_dot_product_attention(q,k,v,is_causal=True,enable_gqa=(H!=Hk))
    o.sum().backward()
  torch.cuda.synchronize(); print('ok',H,Hk,L,D)
PY
ls -la $OUT; gzip -9 $OUT/cudnn_api.log; ls -la $OUT
