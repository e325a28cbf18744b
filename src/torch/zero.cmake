find_package(nlohmann_json REQUIRED)
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/zero/zero_optimizer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/zero/zero_checkpoint.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/zero/zero_manifest.cc)
# Header-only, used inside the build: nothing for an installed kolo's users
# to find.
target_link_libraries(kolo_torch PRIVATE $<BUILD_INTERFACE:nlohmann_json::nlohmann_json>)
