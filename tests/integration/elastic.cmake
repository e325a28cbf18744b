# Elastic jobs under kolorun --elastic, with faults the worker injects
# (tests/integration/elastic_test.cc).
add_executable(elastic_worker ${CMAKE_CURRENT_LIST_DIR}/workers/elastic_worker.cc)
target_include_directories(elastic_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(elastic_worker PRIVATE kolo_core Threads::Threads)

add_executable(elastic_integration_test ${CMAKE_CURRENT_LIST_DIR}/elastic_test.cc)
target_link_libraries(elastic_integration_test PRIVATE kolo_testing
  GTest::gmock GTest::gtest_main)
target_compile_definitions(elastic_integration_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  ELASTIC_WORKER_PATH="$<TARGET_FILE:elastic_worker>")
add_dependencies(elastic_integration_test kolorun elastic_worker)
gtest_discover_tests(elastic_integration_test TEST_PREFIX elastic.
  DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
