# Each dependency is found with find_package: a Debian package, a cluster module or a Spack
# install (CMAKE_PREFIX_PATH, <Pkg>_ROOT). A missing or too-old one stops here with the fix.
include(LcrKokkosTarget)
find_package(Kokkos QUIET)
if(NOT Kokkos_FOUND)
  message(FATAL_ERROR "lcr: Kokkos (3.4 or newer) not found. Point CMake at it with "
    "-DKokkos_ROOT=<prefix> (or add the prefix to CMAKE_PREFIX_PATH, as `module load kokkos` "
    "and `spack load kokkos` do); on Debian: apt-get install libtrilinos-kokkos-dev.")
endif()
if(Kokkos_VERSION VERSION_LESS 3.4)
  message(FATAL_ERROR "lcr: Kokkos ${Kokkos_VERSION} at ${Kokkos_DIR} is too old; lcr needs "
    "3.4 or newer (Debian 12's libtrilinos-kokkos-dev, or any 4.x release).")
endif()
lcr_repair_kokkos_target()
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

find_package(MPI COMPONENTS CXX)
if(NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "lcr: MPI (C++) not found. Load your MPI (module load openmpi, spack "
    "load mpi) so that mpicxx is on PATH, or set MPI_HOME; on Debian: apt-get install "
    "libopenmpi-dev openmpi-bin.")
endif()
find_package(HDF5 COMPONENTS C)
if(NOT HDF5_FOUND OR HDF5_VERSION VERSION_LESS 1.10)
  message(FATAL_ERROR "lcr: HDF5 1.10 or newer (C library) not found (found: "
    "'${HDF5_VERSION}'). Set HDF5_ROOT=<prefix> or put h5cc / h5pcc on PATH (module load "
    "hdf5); on Debian: apt-get install libhdf5-dev. Serial and parallel builds both work.")
endif()
foreach(pkg tomlplusplus CLI11 spdlog fmt)
  find_package(${pkg} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "lcr: ${pkg} not found. Add its prefix to CMAKE_PREFIX_PATH (Spack: "
      "spack load tomlplusplus cli11 spdlog fmt); on Debian: apt-get install "
      "libtomlplusplus-dev libcli11-dev libspdlog-dev libfmt-dev.")
  endif()
endforeach()
find_package(Threads REQUIRED)

# Tests and benchmarks are optional: without GoogleTest or Google Benchmark they are left
# out (the summary says so) rather than failing a cluster build that only wants `lcr`.
if(LCR_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    set(LCR_BUILD_TESTS OFF)
    set(_lcr_tests_why "off: GoogleTest not found (libgtest-dev, or GTest_ROOT)")
  endif()
endif()
if(LCR_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    set(LCR_BUILD_BENCHMARKS OFF)
    set(_lcr_bench_why "off: Google Benchmark not found (libbenchmark-dev, or benchmark_ROOT)")
  endif()
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
