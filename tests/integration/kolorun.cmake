# kolorun's tests. kolorun_test runs the real kolorun on kolorun_worker, a
# small program that does what each test asks of a rank; kolorun_unit_test
# checks its flag parsing, job building and output relay directly.
if(TARGET kolorun)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  include(GoogleTest)

  add_executable(kolorun_worker ${CMAKE_CURRENT_LIST_DIR}/workers/kolorun_worker.cc)
  target_include_directories(kolorun_worker PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(kolorun_worker PRIVATE kolo_core)

  add_executable(kolorun_test ${CMAKE_CURRENT_LIST_DIR}/kolorun_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/kolorun_metrics_test.cc)
  # kolorun_lib: the test reads the usable cores the way kolorun does.
  target_link_libraries(kolorun_test PRIVATE kolorun_lib kolo_testing GTest::gmock
    GTest::gtest_main)
  target_compile_definitions(kolorun_test PRIVATE
    KOLORUN_PATH="$<TARGET_FILE:kolorun>"
    KOLORUN_WORKER_PATH="$<TARGET_FILE:kolorun_worker>")
  if(KOLO_WITH_MPI)
    target_compile_definitions(kolorun_test PRIVATE KOLORUN_TEST_WITH_MPI=1)
  endif()
  add_dependencies(kolorun_test kolorun kolorun_worker)
  gtest_discover_tests(kolorun_test TEST_PREFIX kolorun. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 120)

  set(KOLORUN_UNIT_TEST_DIR ${PROJECT_SOURCE_DIR}/tests/tools/kolorun)
  add_executable(kolorun_unit_test
    ${KOLORUN_UNIT_TEST_DIR}/agent_link_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/agent_messages_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/child_watcher_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/elastic_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/hosts_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/remote_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/job_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/options_test.cc
    ${KOLORUN_UNIT_TEST_DIR}/output_test.cc)
  target_include_directories(kolorun_unit_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(kolorun_unit_test PRIVATE kolorun_lib GTest::gmock GTest::gtest_main)
  gtest_discover_tests(kolorun_unit_test TEST_PREFIX kolorun. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 120)
endif()
