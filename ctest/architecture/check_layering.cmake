# The layering rules of docs/architecture.md, checked on the include lines of every source file:
# each layer names the project headers it may include (an allow-list, so a new dependency is a
# deliberate edit here and in the document) and the system headers it must not (Kokkos, MPI,
# NCCL where the layer promises to be free of them). The tests are not checked. A layer may skip
# files of its folder (<layer>_skip) that another layer of the table checks.
#
#   cmake -DSOURCE_DIR=<repository root> [-DONLY_LAYER=<layer>] -P check_layering.cmake
#
# Fails naming every offending file:line and include. A layer whose folder holds no source file
# fails too, so that moving a folder cannot switch its check off silently.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layering: SOURCE_DIR is not set (expected the repository root)")
endif()
get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)

# Project headers are named by their folder ("model/x.hpp") or, inside a folder, by a bare name
# ("x.hpp"); the kernels' public headers and the generated build info live under "paraxis/".
set(_project_prefix "^(kernels|model|schedule|config|parallel|perfmodel|io|checkpoint|deck|analysis|driver|paraxis)/")
set(_bare "^[A-Za-z0-9_]+\\.(hpp|h)$")
set(_no_kokkos "^(Kokkos|KokkosBlas|KokkosKernels|KokkosSparse)")
set(_no_mpi "^(mpi\\.h|mpi\\.hpp|nccl\\.h|cuda_runtime\\.h)$")

# Layer table: <layer> <folder> <file name regex> <allowed project headers> <forbidden system headers>
set(_layers kernels model_core model schedule config perfmodel io checkpoint parallel deck analysis driver
    report_command)
set(_kernels_dir "kernels")
set(_kernels_files ".*")
set(_kernels_allow "^paraxis/")
set(_kernels_deny "${_no_mpi}")
set(_model_core_dir "miniapp/model")
set(_model_core_files "^(model_config|model_pieces|shard_layout|param_layout|state_pieces)\\.")
set(_model_core_allow "^(model/)?(model_config|model_pieces|shard_layout|param_layout|state_pieces)\\.hpp$")
set(_model_core_deny "${_no_kokkos}|${_no_mpi}")
set(_model_dir "miniapp/model")
set(_model_files ".*")
set(_model_allow "^paraxis/kernels/|^model/|${_bare}")
set(_model_deny "${_no_mpi}")
set(_schedule_dir "miniapp/schedule")
set(_schedule_files ".*")
set(_schedule_allow "^schedule/")
set(_schedule_deny "${_no_kokkos}|${_no_mpi}")
set(_config_dir "miniapp/config")
set(_config_files ".*")
set(_config_allow "^config/|^schedule/|^model/(model_config|model_pieces)\\.hpp$")
set(_config_deny "${_no_kokkos}|${_no_mpi}")
set(_perfmodel_dir "miniapp/perfmodel")
set(_perfmodel_files ".*")
set(_perfmodel_allow "^perfmodel/|^config/|^schedule/|^model/(model_config|model_pieces|shard_layout|param_layout)\\.hpp$")
set(_perfmodel_deny "${_no_kokkos}|${_no_mpi}")
set(_io_dir "miniapp/io")
set(_io_files ".*")
set(_io_allow "^io/")
set(_io_deny "${_no_kokkos}|${_no_mpi}")
set(_checkpoint_dir "miniapp/checkpoint")
set(_checkpoint_files ".*")
set(_checkpoint_allow "^checkpoint/|^io/|^config/exit_codes\\.hpp$")
set(_checkpoint_deny "${_no_kokkos}")
set(_parallel_dir "miniapp/parallel")
set(_parallel_files ".*")
set(_parallel_allow "^parallel/|^config/|^model/|^schedule/|^paraxis/kernels/")
set(_parallel_deny "^$")
set(_model_core_headers "model/(model_config|model_pieces|shard_layout|param_layout|state_pieces)\\.hpp$")
# The deck: input files, read alike by every rank and command.
set(_deck_dir "miniapp/deck")
set(_deck_files ".*")
set(_deck_allow "^deck/|^config/|^schedule/|^io/|^perfmodel/|^${_model_core_headers}")
set(_deck_deny "${_no_kokkos}|${_no_mpi}")
# The analysis of results (`paraxis report`): pure functions of parsed summaries.
set(_analysis_dir "miniapp/analysis")
set(_analysis_files ".*")
set(_analysis_allow "^analysis/|^deck/|^config/|^schedule/|^io/|^perfmodel/|^${_model_core_headers}")
set(_analysis_deny "${_no_kokkos}|${_no_mpi}")
# The run orchestration (every driver file but the report command): any layer below it, but of
# the analysis only the pieces a run shares with the report (the one median, the calibration's
# JSON form, the prediction's formula, the diagnosis of a failed rank, the summary reader's names,
# a point's status); the
# report's own parts (analysis/report_*) belong to the report command.
set(_driver_dir "miniapp/driver")
set(_driver_files ".*")
set(_driver_skip "^report\\.cpp$")
set(_driver_allow "^(driver|deck|config|schedule|perfmodel|io|checkpoint|parallel|model)/|^paraxis/(kernels/|build_info)|^analysis/(statistics|calibration_data|prediction|diagnosis|summary_reader|point_status|plan|results_schema)\\.hpp$")
set(_driver_deny "^$")
# The report command: MPI only to find rank 0, then the analysis.
set(_report_command_dir "miniapp/driver")
set(_report_command_files "^report\\.cpp$")
set(_report_command_allow "^driver/|^analysis/|^config/exit_codes\\.hpp$")
set(_report_command_deny "${_no_kokkos}")

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
    if(_name MATCHES "${_${_layer}_files}" AND NOT (DEFINED _${_layer}_skip AND _name MATCHES "${_${_layer}_skip}"))
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

# The model core named here is the library CMake builds: every source of paraxis_model_core
# (miniapp/model/CMakeLists.txt) is checked as the core, and every core file is in the library.
if(NOT ONLY_LAYER OR ONLY_LAYER STREQUAL "model_core")
  set(_model_cmake "${SOURCE_DIR}/miniapp/model/CMakeLists.txt")
  if(EXISTS "${_model_cmake}")
    file(READ "${_model_cmake}" _model_text)
    string(REGEX MATCH "add_library\\(paraxis_model_core([^)]*)\\)" _core_decl "${_model_text}")
    string(REGEX MATCHALL "[A-Za-z0-9_]+\\.cpp" _core_sources "${CMAKE_MATCH_1}")
    file(GLOB _core_files RELATIVE "${SOURCE_DIR}/miniapp/model" "${SOURCE_DIR}/miniapp/model/*.cpp")
    foreach(_f IN LISTS _core_files)
      if(_f MATCHES "${_model_core_files}" AND NOT _f IN_LIST _core_sources)
        string(APPEND _violations "\n  miniapp/model/${_f}: a model-core file that "
                                  "paraxis_model_core does not compile")
      endif()
    endforeach()
    foreach(_f IN LISTS _core_sources)
      if(NOT _f MATCHES "${_model_core_files}")
        string(APPEND _violations "\n  paraxis_model_core compiles miniapp/model/${_f}, which "
                                  "the model core's list here (and docs/architecture.md) does not name")
      endif()
    endforeach()
  endif()
endif()

if(_violations)
  message(FATAL_ERROR "layering violations (docs/architecture.md, \"Layers\"):${_violations}")
endif()
message(STATUS "layering: ${_checked} files checked, no violation")
