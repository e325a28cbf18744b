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

# Init/Shutdown cycles in one process (tests/integration/reinit_test.cc).
add_executable(reinit_worker ${CMAKE_CURRENT_LIST_DIR}/workers/reinit_worker.cc)
target_include_directories(reinit_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(reinit_worker PRIVATE kolo_core Threads::Threads)
add_executable(reinit_integration_test ${CMAKE_CURRENT_LIST_DIR}/reinit_test.cc)
target_link_libraries(reinit_integration_test PRIVATE kolo_testing nlohmann_json::nlohmann_json
  GTest::gmock GTest::gtest_main)
target_compile_definitions(reinit_integration_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  REINIT_WORKER_PATH="$<TARGET_FILE:reinit_worker>")
add_dependencies(reinit_integration_test kolorun reinit_worker)
gtest_discover_tests(reinit_integration_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
