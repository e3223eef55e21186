# One bounded fuzzing run for ctest (ctest/fuzz/CMakeLists.txt): FUZZER for SECONDS seconds,
# starting from the corpus directories SEEDS, new inputs into the scratch corpus CORPUS, a crash
# reproducer into ARTIFACTS. Fails (naming the reproducer) on any crash, leak, sanitizer report,
# input slower than 10 s or process above 2 GB.
#   cmake -DFUZZER=... -DSECONDS=45 -DCORPUS=... -DARTIFACTS=... -DDICT=... -DSEEDS="a;b" -P run_fuzzer.cmake
foreach(v FUZZER SECONDS CORPUS ARTIFACTS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT EXISTS ${FUZZER})
  message(FATAL_ERROR "run_fuzzer.cmake: ${FUZZER} was not built (cmake --build the tree first)")
endif()
file(MAKE_DIRECTORY ${CORPUS} ${ARTIFACTS})
set(dirs)
foreach(d ${SEEDS})
  if(IS_DIRECTORY ${d})
    list(APPEND dirs ${d})
  endif()
endforeach()
set(args -max_total_time=${SECONDS} -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10
         -print_final_stats=1 -artifact_prefix=${ARTIFACTS}/)
if(DICT AND EXISTS ${DICT})
  list(APPEND args -dict=${DICT})
endif()
# libFuzzer writes new inputs to the first directory only; the seed directories are read.
execute_process(COMMAND ${FUZZER} ${args} ${CORPUS} ${dirs} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB found ${ARTIFACTS}/*)
  message(FATAL_ERROR "${FUZZER} failed (exit ${rc}); reproducer(s): ${found}\n"
          "Replay: ${FUZZER} <reproducer>. Once fixed, copy it into "
          "ctest/fuzz/regressions/<target>/ (docs/fuzzing.md).")
endif()
