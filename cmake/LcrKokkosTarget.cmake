# Repairs the Kokkos::kokkos target of Debian's Kokkos 3.4 (libtrilinos-kokkos-dev), which
# ships an include directory of /usr/lib/include (does not exist) and bare library names.
# The package's variables are right, so the target is rebuilt from them. Used by lcr's own
# build and by the installed lcrConfig.cmake, whose users find the same Kokkos.
macro(lcr_repair_kokkos_target)
  if(Kokkos_VERSION VERSION_LESS 3.5 AND TARGET Kokkos::kokkos)
    get_filename_component(_lcr_kokkos_inc "${Kokkos_INCLUDE_DIRS}" REALPATH)
    set_target_properties(Kokkos::kokkos PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${_lcr_kokkos_inc}"
      INTERFACE_LINK_DIRECTORIES "${Kokkos_LIBRARY_DIRS}")
  endif()
endmacro()
