# kolorun across hosts: jobs started by one kolorun (or one per node) on
# clusters of network namespaces (tests/testing/netns_cluster.h), through
# --remote-shell 'ip netns exec {host}', a hostfile, ssh and the per-node
# form. They need root (skipped otherwise); namespaces are global to the
# machine, so they run one at a time: ctest -L multihost.
if(TARGET kolorun AND TARGET collectives_worker AND TARGET kolorun_worker
   AND TARGET elastic_worker)
  find_package(nlohmann_json REQUIRED)  # kolo-train's --json result
  add_executable(multihost_test ${CMAKE_CURRENT_LIST_DIR}/multihost_test.cc)
  target_link_libraries(multihost_test PRIVATE kolo_testing
    nlohmann_json::nlohmann_json GTest::gmock GTest::gtest_main)
  target_compile_definitions(multihost_test PRIVATE
    KOLORUN_PATH="$<TARGET_FILE:kolorun>"
    COLLECTIVES_WORKER_PATH="$<TARGET_FILE:collectives_worker>"
    KOLORUN_WORKER_PATH="$<TARGET_FILE:kolorun_worker>"
    ELASTIC_WORKER_PATH="$<TARGET_FILE:elastic_worker>")
  add_dependencies(multihost_test kolorun collectives_worker kolorun_worker
    elastic_worker)
  # A build without LibTorch has no kolo-train; its test is then not
  # compiled (a skip would pass silently under CI).
  if(TARGET kolo-train)
    target_compile_definitions(multihost_test PRIVATE
      KOLO_TRAIN_PATH="$<TARGET_FILE:kolo-train>"
      KOLO_FASHION_MNIST_DIR="/usr/share/datasets/fashion-mnist")
    add_dependencies(multihost_test kolo-train)
  endif()
  # LABELS twice: gtest_discover_tests flattens a list value ("netns;multihost")
  # into separate words, and ctest appends each LABELS to the test's labels.
  gtest_discover_tests(multihost_test TEST_PREFIX multihost. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 180 LABELS netns LABELS multihost RUN_SERIAL TRUE)
endif()
