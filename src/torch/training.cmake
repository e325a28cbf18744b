# kolo::torch::Trainer (kolo/trainer.h): the epoch loop and its strategies;
# its elastic mode (kolo/elastic_trainer.h).
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/training/trainer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/strategies.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/elastic_trainer.cc)
# The model-parallel strategies (kolo/trainer_model_parallel.h).
target_sources(kolo_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/training/training_peers.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/pipeline_strategy.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/training/parameter_server_strategy.cc)
