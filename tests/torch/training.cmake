# kolo::torch::Trainer: hooks in one process, and the data-parallel
# equivalence on real ranks under kolorun.
add_executable(trainer_worker ${CMAKE_CURRENT_SOURCE_DIR}/training/trainer_worker.cc)
target_include_directories(trainer_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(trainer_worker PRIVATE kolo_torch)
kolo_torch_test(trainer_test ${CMAKE_CURRENT_SOURCE_DIR}/training/trainer_test.cc)
target_compile_definitions(trainer_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  TRAINER_WORKER_PATH="$<TARGET_FILE:trainer_worker>")
add_dependencies(trainer_test kolorun trainer_worker)

# examples/trainer, as the build compiles it for a user, run on 2 ranks.
add_executable(train_with_trainer ${PROJECT_SOURCE_DIR}/examples/trainer/main.cc)
target_link_libraries(train_with_trainer PRIVATE kolo_torch)
add_test(NAME TrainerExample
  COMMAND $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:train_with_trainer>)
set_tests_properties(TrainerExample PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "\\[1\\]<stdout>: rank 1: accuracy [0-9.]+, learned; parameters identical on 2 ranks")

# The pipeline and parameter-server strategies against one process on the
# whole batch, under kolorun.
add_executable(model_parallel_worker ${CMAKE_CURRENT_SOURCE_DIR}/training/model_parallel_worker.cc)
target_include_directories(model_parallel_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(model_parallel_worker PRIVATE kolo_torch)
kolo_torch_test(model_parallel_test ${CMAKE_CURRENT_SOURCE_DIR}/training/model_parallel_test.cc)
target_compile_definitions(model_parallel_test PRIVATE
  KOLORUN_PATH="$<TARGET_FILE:kolorun>"
  MODEL_PARALLEL_WORKER_PATH="$<TARGET_FILE:model_parallel_worker>")
add_dependencies(model_parallel_test kolorun model_parallel_worker)
