# The pieces kolo-bench and kolo-train share (tools/report) that have tests
# of their own: the progress line, on memory streams and pseudo-terminals,
# and the training result schema.
# Included from tests/CMakeLists.txt; every test's name starts with
# "report.", so `ctest -R '^report\.'` runs them.
if(TARGET kolo_report)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  include(GoogleTest)
  add_executable(progress_line_test ${CMAKE_CURRENT_LIST_DIR}/progress_line_test.cc)
  target_link_libraries(progress_line_test PRIVATE kolo_report GTest::gtest_main)
  gtest_discover_tests(progress_line_test TEST_PREFIX report. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 60)

  # The training result schema kolo-train writes and kolo-bench reads.
  add_executable(train_result_test ${CMAKE_CURRENT_LIST_DIR}/train_result_test.cc)
  target_link_libraries(train_result_test PRIVATE kolo_report GTest::gtest_main)
  gtest_discover_tests(train_result_test TEST_PREFIX report. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 60)
endif()
