target_sources(kolo_torch PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/elastic/torch_state.cc)
