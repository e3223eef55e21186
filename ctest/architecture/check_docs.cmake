# The documents that list code, checked against the code (docs/architecture.md, "Docs follow the
# code"): every public kernel header (kernels/include/paraxis/kernels/*.hpp) is named in
# docs/kernel-api.md's table, as `name.hpp`; every document in docs/ is indexed in docs/README.md,
# and every measurement log in docs/perf-log/ in docs/perf-log/README.md.
#
#   cmake -DSOURCE_DIR=<repository root> -P check_docs.cmake
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_docs: SOURCE_DIR is not set (expected the repository root)")
endif()
file(READ "${SOURCE_DIR}/docs/kernel-api.md" _api)
file(GLOB _headers RELATIVE "${SOURCE_DIR}/kernels/include/paraxis/kernels"
     "${SOURCE_DIR}/kernels/include/paraxis/kernels/*.hpp")
set(_missing "")
foreach(_h IN LISTS _headers)
  string(FIND "${_api}" "| `${_h}` |" _at)
  if(_at EQUAL -1)
    string(APPEND _missing "\n  kernels/include/paraxis/kernels/${_h}")
  endif()
endforeach()
if(_missing)
  message(FATAL_ERROR "docs/kernel-api.md lists no row for these public kernel headers:${_missing}")
endif()
list(LENGTH _headers _n)
message(STATUS "check_docs: ${_n} kernel headers, each in docs/kernel-api.md")

# The indexes: docs/README.md names every document, perf-log/README.md every log.
foreach(_dir IN ITEMS "docs" "docs/perf-log")
  file(READ "${SOURCE_DIR}/${_dir}/README.md" _index)
  file(GLOB _docs RELATIVE "${SOURCE_DIR}/${_dir}" "${SOURCE_DIR}/${_dir}/*.md")
  set(_unindexed "")
  foreach(_d IN LISTS _docs)
    string(FIND "${_index}" "${_d}" _at)
    if(NOT _d STREQUAL "README.md" AND _at EQUAL -1)
      string(APPEND _unindexed "\n  ${_dir}/${_d}")
    endif()
  endforeach()
  if(_unindexed)
    message(FATAL_ERROR "${_dir}/README.md does not index:${_unindexed}")
  endif()
endforeach()
