target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/parameter_server/placement.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/parameter_server/parameter_server.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/parameter_server/server.cc)
