# The configure summary: what was found and what it turns on, so a cluster user sees at once
# whether the build is the one they meant (OpenMP threads? parallel HDF5? tests?).
function(lcr_summary)
  set(backends "${Kokkos_DEVICES}")
  if(backends STREQUAL "")
    set(backends "Serial")  # Debian's Kokkos 3.4 leaves Kokkos_DEVICES empty
  endif()
  set(threads "one thread per rank")
  if("OPENMP" IN_LIST Kokkos_DEVICES OR "THREADS" IN_LIST Kokkos_DEVICES)
    set(threads "host threads per rank (OMP_NUM_THREADS)")
  endif()
  if("CUDA" IN_LIST Kokkos_DEVICES OR "HIP" IN_LIST Kokkos_DEVICES)
    set(threads "portable kernels on the GPU")
  endif()
  set(hdf5 "serial")
  if(HDF5_IS_PARALLEL)
    set(hdf5 "parallel (lcr writes from one rank; both work)")
  endif()
  set(cuda "off (-DLCR_ENABLE_CUDA=ON: tensor-core kernels, GPU training)")
  if(LCR_ENABLE_CUDA)
    set(cuda "on, CUDA ${CUDAToolkit_VERSION}, targets ${CMAKE_CUDA_ARCHITECTURES}")
  endif()
  set(nccl "off (-DLCR_ENABLE_NCCL=ON with CUDA: NCCL communicator, GPU ring)")
  if(LCR_ENABLE_NCCL)
    set(nccl "on, ${LCR_NCCL_LIBRARY}")
  endif()
  set(tests "on (ctest)")
  if(NOT LCR_BUILD_TESTS)
    set(tests "${_lcr_tests_why}")
    if(NOT tests)
      set(tests "off (-DLCR_BUILD_TESTS=OFF)")
    endif()
  endif()
  set(bench "on (lcr_bench)")
  if(NOT LCR_BUILD_BENCHMARKS)
    set(bench "${_lcr_bench_why}")
    if(NOT bench)
      set(bench "off (-DLCR_BUILD_BENCHMARKS=OFF)")
    endif()
  endif()
  message(STATUS "lcr ${PROJECT_VERSION} configuration:\n"
    "   Kokkos      ${Kokkos_VERSION} (${Kokkos_DIR}), backends ${backends}: ${threads}\n"
    "   MPI         MPI ${MPI_CXX_VERSION}, ${MPIEXEC_EXECUTABLE}\n"
    "   HDF5        ${HDF5_VERSION}, ${hdf5}\n"
    "   CUDA        ${cuda}\n"
    "   NCCL        ${nccl}\n"
    "   tests       ${tests}\n"
    "   benchmarks  ${bench}\n"
    "   install to  ${CMAKE_INSTALL_PREFIX}")
endfunction()
