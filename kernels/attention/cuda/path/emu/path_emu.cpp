// path::emu: the PaTH kernels on the SIMT emulator in their Hopper form (wgmma).
#define LCR_CUDA_EMU 1
#define LCR_PATH_EMU emu
#define LCR_PATH_EMU_PROBE wgmma_probe_emu
#include "kernels/attention/cuda/path/emu/path_emu.inl"
