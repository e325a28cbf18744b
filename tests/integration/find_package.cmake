# Installs kolo into a scratch prefix, builds examples/allreduce against it
# with find_package(kolo), and runs it on two ranks under kolorun.
add_test(NAME InstallAndFindPackage
  COMMAND ${CMAKE_COMMAND}
    -DKOLO_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    -DKOLO_BINARY_DIR=${PROJECT_BINARY_DIR}
    -DKOLORUN=$<TARGET_FILE:kolorun>
    -P ${CMAKE_CURRENT_LIST_DIR}/find_package_test.cmake)
set_tests_properties(InstallAndFindPackage PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "rank 1 of 2: average of ranks = 0.5")
