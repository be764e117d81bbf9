# Every dependency comes from a Debian package through find_package.

find_package(Kokkos REQUIRED)
# Debian's Kokkos 3.4 (libtrilinos-kokkos-dev) ships an imported target whose include
# directory is /usr/lib/include (does not exist) and whose libraries are bare names.
# The package variables are right, so repair the target from them.
if(Kokkos_VERSION VERSION_LESS 3.5)
  get_filename_component(_lcr_kokkos_inc "${Kokkos_INCLUDE_DIRS}" REALPATH)
  set_target_properties(Kokkos::kokkos PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_lcr_kokkos_inc}"
    INTERFACE_LINK_DIRECTORIES "${Kokkos_LIBRARY_DIRS}")
endif()
# Kokkos 4.6+ builds View on mdspan by default, and GCC 12 miscompiles it (Kokkos issue
# #7464): a default-constructed View crashes when destroyed, so most of the suite segfaults.
# Kokkos's legacy View avoids it. Refuse here rather than crash at run time.
option(LCR_ALLOW_GCC12_MDSPAN_VIEW "Build against a Kokkos whose mdspan View GCC 12 miscompiles" OFF)
if(Kokkos_VERSION VERSION_GREATER_EQUAL 4.6 AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13 AND NOT "IMPL_VIEW_LEGACY" IN_LIST Kokkos_OPTIONS
   AND NOT LCR_ALLOW_GCC12_MDSPAN_VIEW)
  message(FATAL_ERROR "lcr: Kokkos ${Kokkos_VERSION} at ${Kokkos_DIR} uses its mdspan-based View, "
    "which GCC ${CMAKE_CXX_COMPILER_VERSION} miscompiles (Kokkos issue #7464: Views crash when "
    "destroyed). Rebuild Kokkos with -DKokkos_ENABLE_IMPL_VIEW_LEGACY=ON, or use GCC 13+ or "
    "clang; -DLCR_ALLOW_GCC12_MDSPAN_VIEW=ON builds anyway.")
endif()
message(STATUS "lcr: Kokkos ${Kokkos_VERSION}, backends ${Kokkos_DEVICES}")

find_package(MPI REQUIRED COMPONENTS CXX)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(tomlplusplus REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)

if(LCR_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(LCR_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
if(LCR_ENABLE_CUDA)
  # The kernels need bf16 mma.sync (sm_80 on); sm_90a adds the wgmma / TMA kernels, chosen at
  # run time where the loaded code has them (kernels/attention/cuda/device_code.hpp). The
  # default: sm_80 SASS (A100, and sm_86 / sm_89 GPUs), compute_80 PTX (any later GPU, by
  # the driver's JIT) and sm_90a SASS (H100, H200).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90a-real" CACHE STRING "CUDA targets (lcr: 80 or newer)")
  endif()
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    string(REGEX MATCH "^[0-9]+" num "${arch}")
    if(num AND num LESS 80)
      message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES has ${arch}: lcr's CUDA kernels use bf16 "
                          "mma.sync, which needs sm_80 or newer. Use e.g. \"80;90a-real\".")
    endif()
  endforeach()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "lcr: CUDA targets ${CMAKE_CUDA_ARCHITECTURES}")
endif()
if(LCR_ENABLE_NCCL AND NOT LCR_ENABLE_CUDA)
  message(FATAL_ERROR "LCR_ENABLE_NCCL=ON needs LCR_ENABLE_CUDA=ON: NCCL moves device buffers.")
endif()
# NCCL: the CUDA toolkit's copy on the development machine (/usr/local/cuda/lib), the
# Debian/Ubuntu package elsewhere. Linked by SONAME (libnccl.so.2), so the GPU machine's own
# libnccl.so.2 is the one loaded at run time.
if(LCR_ENABLE_NCCL)
  find_path(LCR_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
  find_library(LCR_NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  if(NOT LCR_NCCL_INCLUDE_DIR OR NOT LCR_NCCL_LIBRARY)
    message(FATAL_ERROR "LCR_ENABLE_NCCL=ON but nccl.h / libnccl were not found; set LCR_NCCL_INCLUDE_DIR and LCR_NCCL_LIBRARY")
  endif()
  add_library(LCR::nccl UNKNOWN IMPORTED)
  set_target_properties(LCR::nccl PROPERTIES IMPORTED_LOCATION "${LCR_NCCL_LIBRARY}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${LCR_NCCL_INCLUDE_DIR}")
  message(STATUS "lcr: NCCL ${LCR_NCCL_LIBRARY}")
endif()
