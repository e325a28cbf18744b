# The pieces kolo-bench and kolo-train share (tools/report) that have tests
# of their own: the progress line, on memory streams and pseudo-terminals.
# Included from tests/CMakeLists.txt; every test's name has "Progress" in
# it, so `ctest -R Progress` runs them.
if(TARGET kolo_report)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  include(GoogleTest)
  add_executable(progress_line_test ${CMAKE_CURRENT_LIST_DIR}/progress_line_test.cc)
  target_link_libraries(progress_line_test PRIVATE kolo_report GTest::gtest_main)
  gtest_discover_tests(progress_line_test TEST_PREFIX report. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 60)
endif()
