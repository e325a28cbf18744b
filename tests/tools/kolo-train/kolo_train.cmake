# kolo-train: its arithmetic directly, and the program end to end under
# kolorun on Fashion-MNIST (tests that need the data skip without it).
# Included from tests/CMakeLists.txt; a build without LibTorch has no
# kolo-train and skips it.
if(TARGET kolo-train AND TARGET kolorun AND TARGET kolo_testing)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  find_package(nlohmann_json REQUIRED)
  include(GoogleTest)
  add_executable(kolo_train_test ${CMAKE_CURRENT_LIST_DIR}/kolo_train_test.cc)
  # plan.h only: the test needs neither LibTorch nor the trainer.
  target_include_directories(kolo_train_test PRIVATE ${PROJECT_SOURCE_DIR}/tools/kolo-train)
  target_sources(kolo_train_test PRIVATE ${PROJECT_SOURCE_DIR}/tools/kolo-train/plan.cc)
  target_link_libraries(kolo_train_test PRIVATE
    kolo_testing kolo_training nlohmann_json::nlohmann_json GTest::gmock
    GTest::gtest_main)
  target_compile_definitions(kolo_train_test PRIVATE
    KOLORUN_PATH="$<TARGET_FILE:kolorun>"
    KOLO_TRAIN_PATH="$<TARGET_FILE:kolo-train>"
    KOLO_FASHION_MNIST_DIR="/usr/share/datasets/fashion-mnist"
    KOLO_TEST_WITH_GLOO=$<BOOL:${KOLO_WITH_GLOO}>)
  add_dependencies(kolo_train_test kolorun kolo-train)
  gtest_discover_tests(kolo_train_test TEST_PREFIX kolo_train. DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 300 LABELS torch)
endif()

# What a person sees of kolo-train's progress under kolorun: in place in a
# tmux terminal, one line per epoch in a file. Needs tmux (skipped without
# it, a failure under CI=true).
if(TARGET kolo-train AND TARGET kolorun AND TARGET kolo_testing)
  add_executable(kolo_train_progress_test ${CMAKE_CURRENT_LIST_DIR}/progress_test.cc)
  target_link_libraries(kolo_train_progress_test PRIVATE
    kolo_testing GTest::gmock GTest::gtest_main)
  target_compile_definitions(kolo_train_progress_test PRIVATE
    KOLORUN_PATH="$<TARGET_FILE:kolorun>"
    KOLO_TRAIN_PATH="$<TARGET_FILE:kolo-train>")
  add_dependencies(kolo_train_progress_test kolorun kolo-train)
  gtest_discover_tests(kolo_train_progress_test TEST_PREFIX kolo_train.
    DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180 LABELS torch)
endif()

# The checkpoint's header checks, against archives the test writes.
if(TARGET kolo_train_lib AND TARGET kolo_testing)
  add_executable(kolo_train_checkpoint_test
    ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cc)
  target_include_directories(kolo_train_checkpoint_test PRIVATE
    ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(kolo_train_checkpoint_test PRIVATE kolo_train_lib
    GTest::gmock GTest::gtest_main)
  gtest_discover_tests(kolo_train_checkpoint_test TEST_PREFIX kolo_train.
    DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 120)
endif()

# The checkpoint header's checks as fields: checkpoint_header.cc alone,
# which needs no LibTorch, so this test is built with or without it.
if(TARGET kolo_core)
  if(NOT TARGET GTest::gtest_main)
    find_package(GTest REQUIRED)
  endif()
  find_package(nlohmann_json REQUIRED)
  include(GoogleTest)
  add_executable(kolo_train_checkpoint_header_test
    ${CMAKE_CURRENT_LIST_DIR}/checkpoint_header_test.cc
    ${PROJECT_SOURCE_DIR}/tools/kolo-train/checkpoint_header.cc)
  target_include_directories(kolo_train_checkpoint_header_test PRIVATE
    ${PROJECT_SOURCE_DIR}/tools/kolo-train)
  target_link_libraries(kolo_train_checkpoint_header_test PRIVATE kolo_core
    nlohmann_json::nlohmann_json GTest::gmock GTest::gtest_main)
  gtest_discover_tests(kolo_train_checkpoint_header_test TEST_PREFIX kolo_train.
    DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 60)
endif()
