# Tests of scripts/netns_cluster.sh and NetnsCluster (tests/testing/). They
# need root; they set up namespaces, bridges and sshds, which is global to
# the machine, so they run one at a time: ctest -L netns.
add_executable(netns_cluster_test ${CMAKE_CURRENT_LIST_DIR}/netns_cluster_test.cc)
target_link_libraries(netns_cluster_test PRIVATE kolo_testing GTest::gmock GTest::gtest_main)
gtest_discover_tests(netns_cluster_test TEST_PREFIX netns. DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 120 LABELS netns RUN_SERIAL TRUE)
