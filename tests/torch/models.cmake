kolo_torch_test(models_test ${CMAKE_CURRENT_SOURCE_DIR}/models_test.cc)
