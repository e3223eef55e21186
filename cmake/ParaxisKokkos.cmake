# Finds Kokkos (and, optionally, Kokkos Kernels) and papers over the differences between
# the two installations paraxis meets:
#   * Debian's Trilinos-packaged Kokkos 3.4.01: `Kokkos::kokkos` is an INTERFACE target whose
#     INTERFACE_INCLUDE_DIRECTORIES points at <prefix>/include instead of
#     <prefix>/include/trilinos, and Kokkos Kernels is exported as `trilinos_kokkoskernels`
#     rather than `Kokkos::kokkoskernels`.
#   * A standalone Kokkos 4.x (Spack, or built by hand): everything is where it should be.
# After this file: target `Kokkos::kokkos` works, and, if PARAXIS_ENABLE_KOKKOSKERNELS found a
# matching Kokkos Kernels, target `paraxis::kokkoskernels` exists and PARAXIS_HAVE_KOKKOSKERNELS
# is TRUE.

find_package(Kokkos 3.4 REQUIRED)

# Which flavour of Kokkos this is, decided now: Debian's Trilinos Kokkos defines the imported
# target trilinos_kokkoscore. It must be recorded before find_package(KokkosKernels), because
# Trilinos' KokkosKernelsConfig.cmake itself loads KokkosCoreConfig.cmake and so creates
# trilinos_kokkoscore even when the Kokkos found above is a standalone one.
if(TARGET trilinos_kokkoscore)
  set(PARAXIS_KOKKOS_IS_TRILINOS TRUE)
else()
  set(PARAXIS_KOKKOS_IS_TRILINOS FALSE)
endif()

# Trilinos' export computes <prefix>/include from the wrong directory depth (it yields
# /usr/lib/include, which does not exist), while Kokkos_INCLUDE_DIRS is right
# (/usr/include/trilinos). Drop include directories that do not exist and add
# Kokkos_INCLUDE_DIRS. A standalone Kokkos' target is left as it is.
get_target_property(_px_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
if(_px_kokkos_inc AND Kokkos_INCLUDE_DIRS)
  set(_px_fixed_inc "")
  foreach(_dir IN LISTS _px_kokkos_inc Kokkos_INCLUDE_DIRS)
    if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}")
      list(APPEND _px_fixed_inc "${_dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _px_fixed_inc)
  set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_px_fixed_inc}")
endif()

set(PARAXIS_KOKKOS_VERSION "${Kokkos_VERSION}")
if(NOT PARAXIS_KOKKOS_VERSION)
  set(PARAXIS_KOKKOS_VERSION "${Kokkos_VERSION_STRING}")
endif()
set(PARAXIS_KOKKOS_DEVICES "${Kokkos_DEVICES}")

set(PARAXIS_HAVE_KOKKOSKERNELS FALSE)
# Why the vendor path is off (shown in the feature summary); empty when it is on.
set(PARAXIS_KOKKOSKERNELS_NOTE "disabled by PARAXIS_ENABLE_KOKKOSKERNELS=OFF")
if(PARAXIS_ENABLE_KOKKOSKERNELS)
  find_package(KokkosKernels QUIET)
  if(KokkosKernels_FOUND)
    if(TARGET Kokkos::kokkoskernels)
      set(_px_kk_target Kokkos::kokkoskernels)
    elseif(TARGET trilinos_kokkoskernels)
      set(_px_kk_target trilinos_kokkoskernels)
    endif()
    # Kokkos Kernels must have been built against the Kokkos we found: a Trilinos Kokkos
    # Kernels next to a standalone Kokkos (or the reverse) would mix two Kokkos cores.
    set(_px_kk_matches FALSE)
    if(_px_kk_target STREQUAL "trilinos_kokkoskernels" AND PARAXIS_KOKKOS_IS_TRILINOS)
      set(_px_kk_matches TRUE)
    elseif(_px_kk_target STREQUAL "Kokkos::kokkoskernels" AND NOT PARAXIS_KOKKOS_IS_TRILINOS)
      set(_px_kk_matches TRUE)
    endif()
    if(_px_kk_target AND _px_kk_matches)
      add_library(paraxis_kokkoskernels INTERFACE)
      target_link_libraries(paraxis_kokkoskernels INTERFACE ${_px_kk_target} Kokkos::kokkos)
      if(KokkosKernels_INCLUDE_DIRS)
        target_include_directories(paraxis_kokkoskernels INTERFACE ${KokkosKernels_INCLUDE_DIRS})
      endif()
      add_library(paraxis::kokkoskernels ALIAS paraxis_kokkoskernels)
      set(PARAXIS_HAVE_KOKKOSKERNELS TRUE)
      set(PARAXIS_KOKKOSKERNELS_NOTE "${_px_kk_target} from ${KokkosKernels_DIR}")
    else()
      message(WARNING "Kokkos Kernels found at ${KokkosKernels_DIR} but not built against the "
                      "Kokkos at ${Kokkos_DIR}; the vendor GEMM path is disabled.")
      set(PARAXIS_KOKKOSKERNELS_NOTE
          "found at ${KokkosKernels_DIR} but built against another Kokkos: vendor GEMM off")
    endif()
  else()
    message(STATUS "Kokkos Kernels not found: the vendor GEMM path is disabled.")
    set(PARAXIS_KOKKOSKERNELS_NOTE "not found: vendor GEMM off")
  endif()
endif()
