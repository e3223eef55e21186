# ctest driver (cmake -P): runs a paraxis benchmark binary on a filter, in JSON, and checks
# what every row says about its result check (bench_check.hpp).
#   EXPECT=right (default): the binary exits 0, its context has "checked", at least MIN_ROWS
#     rows ran, every row carries the counter `wrong` at 0 without an error, and every family
#     the binary registers ran. A benchmark registered without a check has no `wrong` and
#     fails this test by name.
#   EXPECT=wrong (with EXTRA=--corrupt-for-test): the binary exits non-zero, names the failed
#     rows on stderr, and every row failed with a "wrong result" message.
#   cmake -DBENCH=<binary> -DFILTER=<regex> -DMIN_ROWS=<n> [-DEXPECT=wrong -DEXTRA=<flag>]
#         -P check_rows_checked.cmake
cmake_minimum_required(VERSION 3.19)  # string(JSON); if() takes quoted strings as strings
execute_process(
  COMMAND ${BENCH} ${EXTRA} --benchmark_filter=${FILTER} --benchmark_min_time=0.001
          --benchmark_format=json
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(EXPECT STREQUAL "wrong")
  if(rc EQUAL 0 OR NOT err MATCHES "FAILED: ")
    message(FATAL_ERROR "expected a non-zero exit naming the failed rows, got ${rc}:\n${err}")
  endif()
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BENCH} exited ${rc}:\n${err}")
endif()
string(JSON checked ERROR_VARIABLE no_context GET "${out}" context checked)
if(no_context)
  message(FATAL_ERROR "the benchmark context has no 'checked' entry")
endif()
string(JSON rows LENGTH "${out}" benchmarks)
if(rows LESS MIN_ROWS)
  message(FATAL_ERROR "${rows} rows ran, expected at least ${MIN_ROWS} (filter ${FILTER})")
endif()
set(bad "")
math(EXPR last "${rows} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${out}" benchmarks ${i} name)
  string(JSON error ERROR_VARIABLE no_error GET "${out}" benchmarks ${i} error_message)
  string(JSON wrong ERROR_VARIABLE no_wrong GET "${out}" benchmarks ${i} wrong)
  string(REPLACE ";" "," error "${error}")  # the message's "; element i" is no list separator
  if(EXPECT STREQUAL "wrong")
    if(no_error OR NOT error MATCHES "^wrong result: ")
      list(APPEND bad "${name}: did not fail with a wrong result")
    endif()
  elseif(NOT no_error)
    list(APPEND bad "${name}: error ${error}")
  elseif(no_wrong)
    list(APPEND bad "${name}: no 'wrong' counter (unchecked)")
  elseif(NOT wrong MATCHES "^-?[0.]+(e[-+]?[0-9]+)?$")  # JSON writes 0 as 0.0000e+00
    list(APPEND bad "${name}: wrong = ${wrong}")
  endif()
endforeach()
# Every family the binary registers (the name up to its first '/') ran at least one row: a
# filter that leaves a whole family out would let it go unchecked.
if(NOT EXPECT STREQUAL "wrong")
  execute_process(COMMAND ${BENCH} --benchmark_list_tests OUTPUT_VARIABLE listed
                  RESULT_VARIABLE list_rc)
  string(REPLACE "\n" ";" listed "${listed}")
  set(families "")
  foreach(row IN LISTS listed)
    string(REGEX MATCH "^[^/]+/" family "${row}")
    list(APPEND families "${family}")
  endforeach()
  list(REMOVE_DUPLICATES families)
  list(REMOVE_ITEM families "")
  foreach(family IN LISTS families)
    if(NOT out MATCHES "\"name\": \"${family}")
      list(APPEND bad "family ${family}: no row ran (the filter leaves it out)")
    endif()
  endforeach()
endif()
if(bad)
  list(JOIN bad "\n  " lines)
  message(FATAL_ERROR "rows not as expected (${EXPECT}):\n  ${lines}")
endif()
if(NOT EXPECT)
  set(EXPECT right)
endif()
message(STATUS "${rows} rows, every one checked and ${EXPECT}")
