# `cmake --install`: the lcr command, lcr-submit and lcr-analyze, the SLURM templates and
# presets, the experiment configs and the docs, plus the kernel and ring libraries with their
# headers and an exported package (find_package(lcr) -> lcr::kernels, lcr::parallel).
# Relocatable: nothing installed names the source tree, the build tree or the prefix itself;
# the scripts find their files relative to their own location (docs/install.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LCR_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/lcr)
set(LCR_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/lcr)
set(LCR_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/lcr)

# The libraries' include root is the source tree while building; installed, it is
# include/lcr (headers keep their paths: #include "kernels/attention/attention.hpp").
set_property(TARGET lcr_base PROPERTY INTERFACE_INCLUDE_DIRECTORIES
             "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>" "$<INSTALL_INTERFACE:${LCR_INSTALL_INCLUDEDIR}>")
set_property(TARGET lcr_base APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_17)
set_property(TARGET lcr_base PROPERTY EXPORT_NAME base)
set_property(TARGET lcr_kernels PROPERTY EXPORT_NAME kernels)
set(lcr_exported lcr_base lcr_kernels)
# With NCCL, lcr_parallel links the CUDA communicator, which is not exported; the package
# then holds the kernels only.
if(NOT LCR_ENABLE_NCCL)
  set_property(TARGET lcr_parallel PROPERTY EXPORT_NAME parallel)
  list(APPEND lcr_exported lcr_parallel)
endif()

# lcr's own libraries are static, so the installed lcr needs none of them and only the
# libraries of the prefix are for other projects; only the static form is installed whole.
if(BUILD_SHARED_LIBS)
  message(FATAL_ERROR "lcr: BUILD_SHARED_LIBS=ON is not supported (lcr installs static "
    "libraries, and the lcr command links them in); configure without it.")
endif()
# The installed lcr keeps the paths of the shared libraries it was linked with (the user's
# Kokkos, HDF5, MPI), so it runs without LD_LIBRARY_PATH.
set_target_properties(lcr PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS lcr RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${lcr_exported} EXPORT lcrTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir kernels parallel)
  install(DIRECTORY ${dir}/ DESTINATION ${LCR_INSTALL_INCLUDEDIR}/${dir}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "cuda" EXCLUDE PATTERN "nccl" EXCLUDE)
endforeach()
install(EXPORT lcrTargets NAMESPACE lcr:: DESTINATION ${LCR_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/lcrConfig.cmake.in ${PROJECT_BINARY_DIR}/lcrConfig.cmake
                              INSTALL_DESTINATION ${LCR_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lcrConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lcrConfig.cmake ${PROJECT_BINARY_DIR}/lcrConfigVersion.cmake
              cmake/LcrKokkosTarget.cmake DESTINATION ${LCR_INSTALL_CMAKEDIR})

# share/lcr mirrors the checkout's slurm/, analysis/ and experiments/configs, so the scripts
# work the same from either (lcr-submit: templates beside it, lcr in ../../../bin).
install(DIRECTORY slurm DESTINATION ${LCR_INSTALL_DATADIR} USE_SOURCE_PERMISSIONS)
install(DIRECTORY analysis DESTINATION ${LCR_INSTALL_DATADIR} USE_SOURCE_PERMISSIONS
        PATTERN "__pycache__" EXCLUDE)
install(DIRECTORY experiments/configs DESTINATION ${LCR_INSTALL_DATADIR}/experiments)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# bin/lcr-submit and bin/lcr-analyze: relative links into share/lcr (they resolve their
# links to find their files), created at install time under whatever prefix is chosen.
foreach(tool slurm/lcr-submit analysis/lcr-analyze)
  get_filename_component(name ${tool} NAME)
  file(RELATIVE_PATH target /${CMAKE_INSTALL_BINDIR} /${LCR_INSTALL_DATADIR}/${tool})
  install(CODE "file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    file(CREATE_LINK \"${target}\" \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${name}\" SYMBOLIC)
    message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/${name} -> ${target}\")")
endforeach()
