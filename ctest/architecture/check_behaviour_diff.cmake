# Test architecture_behaviour_diff: the refactor check (tools/behaviour_fingerprint.py and
# tools/behaviour_diff.py, docs/architecture.md) can both pass and fail. Three 1-rank runs of a
# tiny fp64 deck, 2 steps: seed 1, seed 1 again, seed 2. Same seed must compare identical (their
# step times differ, so this also proves timings are dropped); a different seed must exit 1 and
# name a step's loss by its JSON path. No reference file: everything is generated here.
# Arguments: -DPARAXIS=exe -DMPIEXEC=exe -DPYTHON=exe -DSOURCE_DIR=repo -DWORK_DIR=scratch
foreach(_v PARAXIS MPIEXEC PYTHON SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "check_behaviour_diff.cmake: -D${_v}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/deck.yaml
     "model: {vocab: 16, seq_len: 4, hidden: 8, heads: 2, layers: 2, ffn: 16}\n"
     "train: {global_batch: 2, micro_batch: 1, steps: 2, warmup_steps: 1, precision: fp64}\n"
     "hardware: {calibrate: false}\noutput: {trace: false}\ncomm: {timeout_s: 60}\n")

# Same basename ("run") in three folders: the fingerprint keys runs by basename.
foreach(_case seed1:1 seed1again:1 seed2:2)
  string(REPLACE ":" ";" _pair ${_case})
  list(GET _pair 0 _name)
  list(GET _pair 1 _seed)
  execute_process(
    COMMAND ${MPIEXEC} -n 1 ${PARAXIS} run ${WORK_DIR}/deck.yaml --out ${WORK_DIR}/${_name}/run
            --set train.seed=${_seed}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _log ERROR_VARIABLE _log)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "paraxis run (seed ${_seed}) exited ${_rc}:\n${_log}")
  endif()
  execute_process(
    COMMAND ${PYTHON} ${SOURCE_DIR}/tools/behaviour_fingerprint.py ${WORK_DIR}/${_name}/run
    RESULT_VARIABLE _rc OUTPUT_FILE ${WORK_DIR}/${_name}.json ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "behaviour_fingerprint.py exited ${_rc}: ${_err}")
  endif()
endforeach()

# diff A B EXPECTED_RC: runs behaviour_diff.py, fails unless it exits EXPECTED_RC; output in _out.
function(run_diff a b expected)
  execute_process(
    COMMAND ${PYTHON} ${SOURCE_DIR}/tools/behaviour_diff.py ${WORK_DIR}/${a}.json
            ${WORK_DIR}/${b}.json
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _o ERROR_VARIABLE _o)
  if(NOT _rc EQUAL ${expected})
    message(FATAL_ERROR "behaviour_diff.py ${a} ${b} exited ${_rc}, expected ${expected}:\n${_o}")
  endif()
  set(_out "${_o}" PARENT_SCOPE)
endfunction()

run_diff(seed1 seed1again 0)
if(NOT _out MATCHES "identical")
  message(FATAL_ERROR "same seed: exit 0 but no 'identical' line:\n${_out}")
endif()
run_diff(seed1 seed2 1)
if(NOT _out MATCHES "runs\\.run\\[0\\]\\.steps\\[[0-9]+\\]\\.loss: ")
  message(FATAL_ERROR "different seed: exit 1 but no step loss named by its path:\n${_out}")
endif()
if(_out MATCHES "time_s")
  message(FATAL_ERROR "different seed: a timing was compared:\n${_out}")
endif()
message(STATUS "same seed identical; different seed differs:\n${_out}")
