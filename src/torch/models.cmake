# The model zoo (include/kolo/models.h): two translation units to keep the
# LibTorch compile time down, and the sequential forms for pipelines.
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/models/models.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/models/residual.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/models/sequential.cc)
