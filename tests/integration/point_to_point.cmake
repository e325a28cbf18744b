# Point-to-point transfers and process groups in real processes under
# kolorun, on every engine.
add_executable(point_to_point_worker ${CMAKE_CURRENT_LIST_DIR}/workers/point_to_point_worker.cc)
target_link_libraries(point_to_point_worker PRIVATE kolo_core)

add_executable(point_to_point_integration_test ${CMAKE_CURRENT_LIST_DIR}/point_to_point_test.cc)
target_include_directories(point_to_point_integration_test PRIVATE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(point_to_point_integration_test PRIVATE kolo_testing kolo_core
  GTest::gmock GTest::gtest_main)
target_compile_definitions(point_to_point_integration_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  POINT_TO_POINT_WORKER_PATH="$<TARGET_FILE:point_to_point_worker>")
add_dependencies(point_to_point_integration_test kolorun point_to_point_worker)
gtest_discover_tests(point_to_point_integration_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
