kolo_torch_test(elastic_state_test ${CMAKE_CURRENT_SOURCE_DIR}/elastic/elastic_state_test.cc)
