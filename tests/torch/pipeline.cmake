add_executable(pipeline_worker ${CMAKE_CURRENT_SOURCE_DIR}/workers/pipeline_worker.cc)
target_link_libraries(pipeline_worker PRIVATE kolo_torch)
kolo_torch_test(pipeline_test ${CMAKE_CURRENT_SOURCE_DIR}/pipeline_test.cc)
target_compile_definitions(pipeline_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  PIPELINE_WORKER_PATH="$<TARGET_FILE:pipeline_worker>")
add_dependencies(pipeline_test kolorun pipeline_worker)
