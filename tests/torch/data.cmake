# kolo::data tests, one per source of src/torch/data/; they write gzip
# fixtures with zlib themselves.
kolo_torch_test(data_test
  ${CMAKE_CURRENT_SOURCE_DIR}/data/datasets_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/data/sampler_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/data/loader_test.cc)
target_link_libraries(data_test PRIVATE ZLIB::ZLIB)
