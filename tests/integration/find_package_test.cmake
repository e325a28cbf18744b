# Script of the InstallAndFindPackage tests (see find_package.cmake): every
# step must succeed, kolorun must exit 0, and each rank must print its line
# (RANK_LINE with RANK replaced by the rank), so a program that fails on
# one rank fails the test.
set(prefix ${SCRATCH}/prefix)
set(consumer ${SCRATCH}/consumer)
file(REMOVE_RECURSE ${SCRATCH})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "failed (exit ${code}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${KOLO_BINARY_DIR} --prefix ${prefix})
# Only the install prefix is given, and the LibTorch kolo was built with as a
# LibTorch user gives theirs: kolo's package finds its own dependencies
# (Gloo, MPI, CUDA and NCCL, LibTorch for kolo_torch).
# (LibTorch's prefix travels in the environment's CMAKE_PREFIX_PATH, which
# find_package searches as it does the variable: a list would not survive
# run()'s arguments.)
run(${CMAKE_COMMAND} -E env "CMAKE_PREFIX_PATH=${TORCH_PREFIX}"
    ${CMAKE_COMMAND} -S ${KOLO_SOURCE_DIR}/examples/${EXAMPLE} -B ${consumer} -G Ninja
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${consumer})
run(${KOLORUN} -np 2 ${consumer}/${PROGRAM})
message("${last_output}")
foreach(rank 0 1)
  string(REPLACE "RANK" "${rank}" line "${RANK_LINE}")
  if(NOT last_output MATCHES "\\[${rank}\\]<stdout>: ${line}")
    message(FATAL_ERROR "rank ${rank} did not print '${line}':\n${last_output}")
  endif()
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
