# The model zoo (include/kolo/models.h): two translation units to keep the
# LibTorch compile time down.
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/models/models.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/models/residual.cc)
