target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/pipeline/schedule.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/pipeline/pipeline.cc)
