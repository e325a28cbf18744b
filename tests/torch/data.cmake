# kolo::data tests; they write gzip fixtures with zlib themselves.
kolo_torch_test(data_test ${CMAKE_CURRENT_SOURCE_DIR}/data_test.cc)
target_link_libraries(data_test PRIVATE ZLIB::ZLIB)
