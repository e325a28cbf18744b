target_sources(kolo_torch PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/distributed/distributed.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/distributed/optimizer_state.cc)
