# kolo-bench's pure pieces (size sweep, bus-bandwidth factors, expected
# values, table formatting; fusion's model table and checks; --peer's list,
# memcpy line, comparison and JSON; link's statistics; the report's charts
# and reading; zero's command lines, checks and ratios; pipeline's reading,
# bubbles and report section; ps-vs-allreduce's plan and closing table;
# checkpoint's reading, check and ratios; the peers' interpreter; soak's
# schedule and tally), fusion,
# collectives --peer and link run end to end under kolorun, each PyTorch
# peer (DDP, ZeRO-1, FSDP2, pipelining, DCP) in a short real run, and the
# report end to end and in a browser. Included from
# tests/CMakeLists.txt; a build without tools/kolo-bench has no
# kolo_bench_lib and skips it. Every test's name
# starts with kolo_bench., so `ctest -R kolo_bench` runs them all.
if(TARGET kolo_bench_lib)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  # The interpreter the tests run the PyTorch peers in
  # (peer_python_testing.h): the one kolo-bench was configured with (the
  # cache variable KOLO_PYTHON, tools/kolo-bench/CMakeLists.txt), else the
  # system's, as kolo-bench falls back to.
  if(KOLO_PYTHON)
    set(kolo_bench_test_python "${KOLO_PYTHON}")
  elseif(EXISTS /usr/bin/python3)
    set(kolo_bench_test_python /usr/bin/python3)
  else()
    set(kolo_bench_test_python python3)
  endif()

  add_executable(kolo_bench_test
    ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/collectives_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/command_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/elastic_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/fusion_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/job_runner_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/link_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/peer_python_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/peers_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/pipeline_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/report_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/soak_plan_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/zero_test.cc)
  target_link_libraries(kolo_bench_test PRIVATE kolo_bench_lib GTest::gmock
    GTest::gtest_main)
  # peer_python_test.cc compares kolo-bench's default with the configured
  # interpreter, and skips its probe through testing/requirements.h.
  target_compile_definitions(kolo_bench_test PRIVATE
    KOLO_PEER_PYTHON="${KOLO_PYTHON}")
  target_include_directories(kolo_bench_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  gtest_discover_tests(kolo_bench_test TEST_PREFIX kolo_bench.
    DISCOVERY_TIMEOUT 60)

  if(TARGET kolorun AND TARGET kolo_testing)
    add_executable(kolo_bench_fusion_run_test
      ${CMAKE_CURRENT_LIST_DIR}/fusion_run_test.cc)
    target_link_libraries(kolo_bench_fusion_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gtest_main)
    target_compile_definitions(kolo_bench_fusion_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>")
    add_dependencies(kolo_bench_fusion_run_test kolorun kolo-bench)
    gtest_discover_tests(kolo_bench_fusion_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT 240)

    add_executable(kolo_bench_peers_run_test
      ${CMAKE_CURRENT_LIST_DIR}/peers_run_test.cc)
    target_link_libraries(kolo_bench_peers_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gtest_main)
    target_compile_definitions(kolo_bench_peers_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>")
    add_dependencies(kolo_bench_peers_run_test kolorun kolo-bench)
    gtest_discover_tests(kolo_bench_peers_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT 200)

    # link on loopback under kolorun; on a namespace cluster (root only,
    # skipped elsewhere), which like every netns test runs alone.
    add_executable(kolo_bench_link_run_test
      ${CMAKE_CURRENT_LIST_DIR}/link_run_test.cc)
    target_link_libraries(kolo_bench_link_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_link_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>")
    add_dependencies(kolo_bench_link_run_test kolorun kolo-bench)
    gtest_discover_tests(kolo_bench_link_run_test TEST_PREFIX kolo_bench.
      TEST_FILTER "LinkRunTest.*" DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT 120)
    gtest_discover_tests(kolo_bench_link_run_test TEST_PREFIX kolo_bench.
      TEST_FILTER "LinkNetnsTest.*" DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT 120 LABELS netns RUN_SERIAL TRUE)
  endif()

  # kolo-bench zero end to end: skipped, saying why, where kolo-train is not
  # built (KOLO_WITH_TORCH=OFF) or has no --zero-stage, or the peers'
  # interpreter has no torch.
  if(TARGET kolorun AND TARGET kolo_testing)
    if(TARGET kolo-train)
      set(kolo_bench_zero_kolo_train "$<TARGET_FILE:kolo-train>")
    else()
      set(kolo_bench_zero_kolo_train "")
    endif()
    add_executable(kolo_bench_zero_run_test
      ${CMAKE_CURRENT_LIST_DIR}/zero_run_test.cc)
    target_link_libraries(kolo_bench_zero_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_zero_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>"
      KOLO_TRAIN_PATH="${kolo_bench_zero_kolo_train}"
      KOLO_TEST_PYTHON="${kolo_bench_test_python}")
    add_dependencies(kolo_bench_zero_run_test kolorun kolo-bench)
    if(TARGET kolo-train)
      add_dependencies(kolo_bench_zero_run_test kolo-train)
    endif()
    gtest_discover_tests(kolo_bench_zero_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 450)
  endif()

  if(TARGET kolorun AND TARGET kolo_testing)
    # kolo-bench python --quick: kolo.torch, DDP and plain PyTorch from the
    # peers' interpreter, and the latency jobs.
    add_executable(kolo_bench_python_run_test
      ${CMAKE_CURRENT_LIST_DIR}/python_run_test.cc)
    target_link_libraries(kolo_bench_python_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_python_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>"
      KOLO_TEST_PYTHON="${kolo_bench_test_python}")
    add_dependencies(kolo_bench_python_run_test kolorun kolo-bench)
    gtest_discover_tests(kolo_bench_python_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 450)
  endif()

  if(TARGET kolorun AND TARGET kolo-train AND TARGET kolo_testing)
    add_executable(kolo_bench_train_test
      ${CMAKE_CURRENT_LIST_DIR}/train_test.cc)
    target_link_libraries(kolo_bench_train_test PRIVATE
      kolo_bench_lib kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_train_test PRIVATE
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>"
      KOLO_TEST_PYTHON="${kolo_bench_test_python}")
    add_dependencies(kolo_bench_train_test kolorun kolo-bench kolo-train)
    gtest_discover_tests(kolo_bench_train_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)

    # The study presets' plans, accuracy-mode command lines, the DDP peer's
    # --epochs mode and small-cnn --quick end to end.
    add_executable(kolo_bench_study_test
      ${CMAKE_CURRENT_LIST_DIR}/study_test.cc)
    target_link_libraries(kolo_bench_study_test PRIVATE
      kolo_bench_lib kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_study_test PRIVATE
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>"
      KOLO_DDP_SCRIPT="${PROJECT_SOURCE_DIR}/bench/peers/torch_ddp.py"
      KOLO_TEST_PYTHON="${kolo_bench_test_python}")
    add_dependencies(kolo_bench_study_test kolorun kolo-bench kolo-train)
    # The suite's longest test (about a minute): COST starts it first, so
    # that shorter tests fill the other slot instead of it ending the run.
    gtest_discover_tests(kolo_bench_study_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180 COST 60)
  endif()

  # kolo-bench soak: 30 s of chaos on a namespace cluster (root only,
  # skipped elsewhere), which like every netns test runs alone; and its
  # refusal without root.
  if(TARGET kolorun AND TARGET kolo-train AND TARGET kolo_testing)
    add_executable(kolo_bench_soak_run_test
      ${CMAKE_CURRENT_LIST_DIR}/soak_run_test.cc)
    target_link_libraries(kolo_bench_soak_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_soak_run_test PRIVATE
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>")
    add_dependencies(kolo_bench_soak_run_test kolorun kolo-bench kolo-train)
    gtest_discover_tests(kolo_bench_soak_run_test TEST_PREFIX kolo_bench.
      TEST_FILTER "SoakRunTest.*" DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT 60)
    gtest_discover_tests(kolo_bench_soak_run_test TEST_PREFIX kolo_bench.
      TEST_FILTER "SoakNetnsTest.*" DISCOVERY_TIMEOUT 60
      PROPERTIES TIMEOUT 360 LABELS netns RUN_SERIAL TRUE)
  endif()

  # kolo-bench pipeline --quick (with and without the torch-pipelining
  # peer) and study ps-vs-allreduce --quick end to end; each test skips,
  # saying why, while kolo-train lacks its flags or the peer its torch.
  if(TARGET kolorun AND TARGET kolo-train AND TARGET kolo_testing)
    add_executable(kolo_bench_pipeline_run_test
      ${CMAKE_CURRENT_LIST_DIR}/pipeline_run_test.cc)
    target_link_libraries(kolo_bench_pipeline_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_pipeline_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>"
      KOLO_TRAIN_PATH="$<TARGET_FILE:kolo-train>"
      KOLO_TEST_PYTHON="${kolo_bench_test_python}")
    add_dependencies(kolo_bench_pipeline_run_test kolorun kolo-bench
      kolo-train)
    gtest_discover_tests(kolo_bench_pipeline_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
  endif()

  # kolo-bench checkpoint end to end: kolo's ZeRO checkpoints saved at np 2
  # and loaded at np 1 and 3, alone and beside PyTorch Distributed
  # Checkpoint; skipped, saying why, without the LibTorch worker
  # (KOLO_WITH_TORCH=OFF) or without torch in the peers' interpreter.
  if(TARGET kolorun AND TARGET kolo_testing)
    if(TARGET kolo-bench-checkpoint-worker)
      set(kolo_bench_checkpoint_worker
        "$<TARGET_FILE:kolo-bench-checkpoint-worker>")
    else()
      set(kolo_bench_checkpoint_worker "")
    endif()
    add_executable(kolo_bench_checkpoint_run_test
      ${CMAKE_CURRENT_LIST_DIR}/checkpoint_run_test.cc)
    target_link_libraries(kolo_bench_checkpoint_run_test PRIVATE
      kolo_testing nlohmann_json::nlohmann_json GTest::gmock
      GTest::gtest_main)
    target_compile_definitions(kolo_bench_checkpoint_run_test PRIVATE
      KOLORUN_PATH="$<TARGET_FILE:kolorun>"
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>"
      KOLO_CHECKPOINT_WORKER_PATH="${kolo_bench_checkpoint_worker}"
      KOLO_TEST_PYTHON="${kolo_bench_test_python}")
    add_dependencies(kolo_bench_checkpoint_run_test kolorun kolo-bench)
    if(TARGET kolo-bench-checkpoint-worker)
      add_dependencies(kolo_bench_checkpoint_run_test
        kolo-bench-checkpoint-worker)
    endif()
    gtest_discover_tests(kolo_bench_checkpoint_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180)
  endif()

  # The report page: written by the real binary, then rendered by headless
  # Chromium, whose screenshot is decoded with zlib.
  if(TARGET kolo_testing)
    find_package(ZLIB REQUIRED)
    add_executable(kolo_bench_report_run_test
      ${CMAKE_CURRENT_LIST_DIR}/report_run_test.cc)
    target_link_libraries(kolo_bench_report_run_test PRIVATE
      kolo_testing ZLIB::ZLIB GTest::gmock GTest::gtest_main)
    target_compile_definitions(kolo_bench_report_run_test PRIVATE
      KOLO_BENCH_PATH="$<TARGET_FILE:kolo-bench>")
    add_dependencies(kolo_bench_report_run_test kolo-bench)
    gtest_discover_tests(kolo_bench_report_run_test TEST_PREFIX kolo_bench.
      DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 180)
  endif()
endif()
