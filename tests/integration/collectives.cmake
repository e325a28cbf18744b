# Every collective in real processes under kolorun, on both backends.
add_executable(collectives_worker ${CMAKE_CURRENT_LIST_DIR}/workers/collectives_worker.cc)
target_include_directories(collectives_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(collectives_worker PRIVATE kolo_core)

add_executable(collectives_integration_test ${CMAKE_CURRENT_LIST_DIR}/collectives_test.cc)
# Jobs that mpirun starts, and the mpi engine's: only where MPI is built.
if(KOLO_WITH_MPI)
  target_sources(collectives_integration_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/mpirun_test.cc)
endif()
target_include_directories(collectives_integration_test PRIVATE
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(collectives_integration_test PRIVATE kolo_testing kolo_core
  GTest::gmock GTest::gtest_main)
target_compile_definitions(collectives_integration_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  COLLECTIVES_WORKER_PATH="$<TARGET_FILE:collectives_worker>"
  MPIEXEC_PATH="${MPIEXEC_EXECUTABLE}")
add_dependencies(collectives_integration_test kolorun collectives_worker)
gtest_discover_tests(collectives_integration_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
