add_executable(zero_worker ${CMAKE_CURRENT_SOURCE_DIR}/workers/zero_worker.cc)
target_link_libraries(zero_worker PRIVATE kolo_torch)
kolo_torch_test(zero_test ${CMAKE_CURRENT_SOURCE_DIR}/zero_test.cc)
target_link_libraries(zero_test PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(zero_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  ZERO_WORKER_PATH="$<TARGET_FILE:zero_worker>")
add_dependencies(zero_test kolorun zero_worker)
# The manifest's parsing alone (zero_manifest.cc needs no LibTorch); it
# replays the fuzzer's findings from fuzz/regressions/.
kolo_unit_test(zero_manifest_test ${CMAKE_CURRENT_SOURCE_DIR}/zero/zero_manifest_test.cc
  ${PROJECT_SOURCE_DIR}/src/torch/zero/zero_manifest.cc)
target_link_libraries(zero_manifest_test PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(zero_manifest_test PRIVATE KOLO_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
