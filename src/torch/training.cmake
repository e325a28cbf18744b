# kolo::torch::Trainer (kolo/trainer.h): the epoch loop and its strategies.
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/training/trainer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/strategies.cc)
