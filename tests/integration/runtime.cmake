# The runtime in real processes under kolorun, on both backends.
add_executable(runtime_worker ${CMAKE_CURRENT_LIST_DIR}/workers/runtime_worker.cc)
target_include_directories(runtime_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(runtime_worker PRIVATE kolo_core Threads::Threads)

add_executable(runtime_integration_test ${CMAKE_CURRENT_LIST_DIR}/runtime_test.cc)
target_link_libraries(runtime_integration_test PRIVATE kolo_testing nlohmann_json::nlohmann_json
  GTest::gmock GTest::gtest_main)
target_compile_definitions(runtime_integration_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  RUNTIME_WORKER_PATH="$<TARGET_FILE:runtime_worker>")
add_dependencies(runtime_integration_test kolorun runtime_worker)
gtest_discover_tests(runtime_integration_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
