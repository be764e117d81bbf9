#pragma once
// Every PaTH kernel (for the two files that launch them: path.cu and emu/path_emu.cpp).
#include "kernels/attention/cuda/path/device/forward.cuh"
#include "kernels/attention/cuda/path/device/prep.cuh"
