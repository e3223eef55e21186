# The documents that list code, checked against the code (docs/architecture.md, "Docs follow the
# code"): every public kernel header (kernels/include/paraxis/kernels/*.hpp) is named in
# docs/kernel-api.md's table, as `name.hpp`.
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
