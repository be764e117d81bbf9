// path::emu_mma: the PaTH kernels on the SIMT emulator in their form without wgmma (each
// wgmma product by mma.sync: device/wgmma.cuh), the form sm_80 .. sm_89 run.
#define LCR_CUDA_EMU 1
#define LCR_CUDA_EMU_MMA_SYNC 1
#define LCR_PATH_EMU emu_mma
#define LCR_PATH_EMU_PROBE wgmma_probe_emu_mma
#include "kernels/attention/cuda/path/emu/path_emu.inl"
