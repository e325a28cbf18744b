# <name>_test, which runs <name>_worker (its path in <NAME>_WORKER_PATH)
# under kolorun (KOLORUN_PATH).
function(kolo_training_job_test name)
  add_executable(${name}_worker ${CMAKE_CURRENT_SOURCE_DIR}/training/${name}_worker.cc)
  target_include_directories(${name}_worker PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name}_worker PRIVATE kolo_torch)
  kolo_torch_test(${name}_test ${CMAKE_CURRENT_SOURCE_DIR}/training/${name}_test.cc)
  string(TOUPPER ${name} upper)
  target_compile_definitions(${name}_test PRIVATE
    KOLORUN_PATH="$<TARGET_FILE:kolorun>"
    ${upper}_WORKER_PATH="$<TARGET_FILE:${name}_worker>")
  add_dependencies(${name}_test kolorun ${name}_worker)
endfunction()

# kolo::torch::Trainer: hooks in one process, and the data-parallel
# equivalence on real ranks under kolorun.
kolo_training_job_test(trainer)

# examples/trainer, as the build compiles it for a user, run on 2 ranks.
add_executable(train_with_trainer ${PROJECT_SOURCE_DIR}/examples/trainer/main.cc)
target_link_libraries(train_with_trainer PRIVATE kolo_torch)
add_test(NAME TrainerExample
  COMMAND $<TARGET_FILE:kolorun> -np 2 $<TARGET_FILE:train_with_trainer>)
set_tests_properties(TrainerExample PROPERTIES TIMEOUT 300 LABELS torch
  PASS_REGULAR_EXPRESSION "\\[1\\]<stdout>: rank 1: accuracy [0-9.]+, learned; parameters identical on 2 ranks")

# The pipeline and parameter-server strategies against one process on the
# whole batch, under kolorun.
kolo_training_job_test(model_parallel)

# kolo::torch::ElasticTrainer under kolorun --elastic, with a worker killed.
kolo_training_job_test(elastic_trainer)
