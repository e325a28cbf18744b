# Script for the InstallAndFindPackage test (see find_package.cmake).
set(prefix ${KOLO_BINARY_DIR}/find-package-test/prefix)
set(consumer ${KOLO_BINARY_DIR}/find-package-test/consumer)
file(REMOVE_RECURSE ${KOLO_BINARY_DIR}/find-package-test)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "failed (${code}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${KOLO_BINARY_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${KOLO_SOURCE_DIR}/examples/allreduce -B ${consumer} -G Ninja
    -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${consumer})
run(${KOLORUN} -np 2 ${consumer}/allreduce_example)
message("${last_output}")
