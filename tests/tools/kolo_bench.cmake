# kolo-bench's pure pieces (size sweep, bus-bandwidth factors, expected
# values, table formatting). Included from tests/CMakeLists.txt; a build
# without tools/kolo-bench has no kolo_bench_lib and skips it.
if(TARGET kolo_bench_lib)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  add_executable(kolo_bench_test ${CMAKE_CURRENT_LIST_DIR}/kolo_bench_test.cc)
  target_link_libraries(kolo_bench_test PRIVATE kolo_bench_lib GTest::gtest_main)
  gtest_discover_tests(kolo_bench_test DISCOVERY_TIMEOUT 60)
endif()
