# The layering rules of docs/architecture.md, checked on the include lines of every source file:
# each layer names the project headers it may include (an allow-list, so a new dependency is a
# deliberate edit here and in the document) and the system headers it must not (Kokkos, MPI,
# NCCL where the layer promises to be free of them). The driver, which may include everything,
# and the tests are not checked.
#
#   cmake -DSOURCE_DIR=<repository root> [-DONLY_LAYER=<layer>] -P check_layering.cmake
#
# Fails naming every offending file:line and include. A layer whose folder holds no source file
# fails too, so that moving a folder cannot switch its check off silently.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layering: SOURCE_DIR is not set (expected the repository root)")
endif()
get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)

# Project headers are named by their folder ("model/x.hpp") or, inside a folder, by a bare name
# ("x.hpp"); the kernels' public headers and the generated build info live under "paraxis/".
set(_project_prefix "^(kernels|model|schedule|parallel|perfmodel|io|driver|paraxis)/")
set(_bare "^[A-Za-z0-9_]+\\.(hpp|h)$")
set(_no_kokkos "^(Kokkos|KokkosBlas|KokkosKernels|KokkosSparse)")
set(_no_mpi "^(mpi\\.h|mpi\\.hpp|nccl\\.h|cuda_runtime\\.h)$")

# Layer table: <layer> <folder> <file name regex> <allowed project headers> <forbidden system headers>
set(_layers kernels model_core model schedule perfmodel io parallel)
set(_kernels_dir "kernels")
set(_kernels_files ".*")
set(_kernels_allow "^paraxis/")
set(_kernels_deny "${_no_mpi}")
set(_model_core_dir "miniapp/model")
set(_model_core_files "^(model_config|model_pieces)\\.")
set(_model_core_allow "^(model/)?(model_config|model_pieces)\\.hpp$")
set(_model_core_deny "${_no_kokkos}|${_no_mpi}")
set(_model_dir "miniapp/model")
set(_model_files ".*")
set(_model_allow "^paraxis/kernels/|^model/|${_bare}")
set(_model_deny "${_no_mpi}")
set(_schedule_dir "miniapp/schedule")
set(_schedule_files ".*")
set(_schedule_allow "^schedule/")
set(_schedule_deny "${_no_kokkos}|${_no_mpi}")
set(_perfmodel_dir "miniapp/perfmodel")
set(_perfmodel_files ".*")
set(_perfmodel_allow "^perfmodel/|^schedule/|^model/(model_config|model_pieces)\\.hpp$")
set(_perfmodel_deny "${_no_kokkos}|${_no_mpi}")
set(_io_dir "miniapp/io")
set(_io_files ".*")
set(_io_allow "^io/")
set(_io_deny "${_no_kokkos}|${_no_mpi}")
set(_parallel_dir "miniapp/parallel")
set(_parallel_files ".*")
set(_parallel_allow "^parallel/|^model/|^schedule/|^paraxis/kernels/")
set(_parallel_deny "^$")

set(_violations "")
set(_checked 0)
foreach(_layer IN LISTS _layers)
  if(ONLY_LAYER AND NOT _layer STREQUAL ONLY_LAYER)
    continue()
  endif()
  set(_dir "${SOURCE_DIR}/${_${_layer}_dir}")
  file(GLOB_RECURSE _candidates "${_dir}/*.hpp" "${_dir}/*.h" "${_dir}/*.cpp" "${_dir}/*.inl")
  set(_files "")
  foreach(_f IN LISTS _candidates)
    get_filename_component(_name "${_f}" NAME)
    if(_name MATCHES "${_${_layer}_files}")
      list(APPEND _files "${_f}")
    endif()
  endforeach()
  list(LENGTH _files _n)
  if(_n EQUAL 0)
    string(APPEND _violations "\n  layer ${_layer}: no source file under ${_dir} "
                              "(folder moved? update check_layering.cmake and docs/architecture.md)")
  endif()
  foreach(_f IN LISTS _files)
    math(EXPR _checked "${_checked} + 1")
    file(RELATIVE_PATH _rel "${SOURCE_DIR}" "${_f}")
    file(STRINGS "${_f}" _lines)
    set(_lineno 0)
    foreach(_line IN LISTS _lines)
      math(EXPR _lineno "${_lineno} + 1")
      if(NOT _line MATCHES "^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"]+)[>\"]")
        continue()
      endif()
      set(_delim "${CMAKE_MATCH_1}")
      set(_header "${CMAKE_MATCH_2}")
      if(_delim STREQUAL "\"" OR _header MATCHES "${_project_prefix}")
        if(NOT _header MATCHES "${_${_layer}_allow}")
          string(APPEND _violations "\n  ${_rel}:${_lineno}: includes \"${_header}\", which layer "
                                    "${_layer} may not (allowed: ${_${_layer}_allow})")
        endif()
      elseif(_header MATCHES "${_${_layer}_deny}")
        string(APPEND _violations "\n  ${_rel}:${_lineno}: includes <${_header}>, which layer "
                                  "${_layer} must stay free of")
      endif()
    endforeach()
  endforeach()
endforeach()

if(_violations)
  message(FATAL_ERROR "layering violations (docs/architecture.md, \"Layers\"):${_violations}")
endif()
message(STATUS "layering: ${_checked} files checked, no violation")
