#pragma once
// Helpers shared by the GPU ring tests: the comparison helpers (cuda_compare.hpp) and the
// NCCL test environment.
#include "cuda_compare.hpp"
#include "nccl_test_env.hpp"
