add_executable(parameter_server_worker ${CMAKE_CURRENT_SOURCE_DIR}/workers/parameter_server_worker.cc)
target_link_libraries(parameter_server_worker PRIVATE kolo_torch)
kolo_torch_test(parameter_server_test ${CMAKE_CURRENT_SOURCE_DIR}/parameter_server_test.cc)
target_compile_definitions(parameter_server_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  PARAMETER_SERVER_WORKER_PATH="$<TARGET_FILE:parameter_server_worker>")
add_dependencies(parameter_server_test kolorun parameter_server_worker)
