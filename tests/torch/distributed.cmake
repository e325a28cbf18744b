add_executable(distributed_worker ${CMAKE_CURRENT_SOURCE_DIR}/workers/distributed_worker.cc)
target_link_libraries(distributed_worker PRIVATE kolo_torch)
kolo_torch_test(distributed_test ${CMAKE_CURRENT_SOURCE_DIR}/distributed_test.cc)
target_compile_definitions(distributed_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  DISTRIBUTED_WORKER_PATH="$<TARGET_FILE:distributed_worker>")
add_dependencies(distributed_test kolorun distributed_worker)
kolo_torch_test(torch_compat_test ${CMAKE_CURRENT_SOURCE_DIR}/compat_test.cc)
