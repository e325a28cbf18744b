# The live job page (src/metrics/job_page.html) in headless Chromium while a
# real two-rank kolo-train job runs under kolorun --metrics-port: ctest -R
# JobPage. A build without LibTorch has no kolo-train and no such test; a
# machine without chromium or Fashion-MNIST skips it (fails under CI=true).
if(TARGET kolorun AND TARGET kolo-train AND TARGET kolo_testing)
  add_executable(job_page_test ${CMAKE_CURRENT_LIST_DIR}/job_page_test.cc)
  # net/socket.h: the test reads api/job itself to know when to look.
  target_include_directories(job_page_test PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(job_page_test PRIVATE kolo_testing
    nlohmann_json::nlohmann_json GTest::gmock GTest::gtest_main)
  target_compile_definitions(job_page_test PRIVATE
    KOLORUN_PATH="$<TARGET_FILE:kolorun>"
    KOLO_TRAIN_PATH="$<TARGET_FILE:kolo-train>"
    KOLO_FASHION_MNIST_DIR="/usr/share/datasets/fashion-mnist")
  add_dependencies(job_page_test kolorun kolo-train)
  gtest_discover_tests(job_page_test DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT 180 LABELS job_page)
endif()
