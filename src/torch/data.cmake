# kolo::data: dataset readers, DistributedSampler, DataLoader (kolo/data.h).
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/data/datasets.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/data/sampler.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/data/loader.cc)
