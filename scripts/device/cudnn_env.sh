# Sourced by the device scripts: points lcr's run-time cuDNN loader (LCR_CUDNN_LIBRARY,
# kernels/attention/cuda/cudnn/cudnn_api.hpp) at the cuDNN 9 of the GPU machine's torch, and
# puts torch's NVIDIA library folders (nvrtc for cuDNN's run-time compiled engines) on
# LD_LIBRARY_PATH. Leaves both alone where they are set already.
if [[ -z ${LCR_CUDNN_LIBRARY:-} ]]; then
  _nv=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0] + "/x"))' 2>/dev/null)
  if [[ -n $_nv && -e $_nv/cudnn/lib/libcudnn.so.9 ]]; then
    export LCR_CUDNN_LIBRARY=$_nv/cudnn/lib/libcudnn.so.9
    for _d in "$_nv"/*/lib; do LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$_d; done
    export LD_LIBRARY_PATH
  fi
  unset _nv _d
fi
