# kolo::torch::Trainer (kolo/trainer.h): the epoch loop and its strategies;
# its elastic mode (kolo/elastic_trainer.h).
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/training/trainer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/strategies.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/elastic_trainer.cc)
