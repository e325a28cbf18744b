# Installs kolo into a scratch prefix, builds a user project from examples/
# against it with find_package(kolo) alone, runs it on two ranks under
# kolorun, and checks kolorun's exit code and every rank's line.
function(kolo_install_test name example program rank_line)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND}
      -DKOLO_SOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DKOLO_BINARY_DIR=${PROJECT_BINARY_DIR}
      -DKOLORUN=$<TARGET_FILE:kolorun>
      -DEXAMPLE=${example}
      -DPROGRAM=${program}
      -DRANK_LINE=${rank_line}
      -DSCRATCH=${PROJECT_BINARY_DIR}/find-package-test/${name}
      -DTORCH_PREFIX=${TORCH_INSTALL_PREFIX}
      -P ${CMAKE_CURRENT_LIST_DIR}/find_package_test.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 600)
endfunction()

# The raw-buffer API: kolo::kolo_core.
kolo_install_test(InstallAndFindPackage allreduce allreduce_example
  "rank RANK of 2: average of ranks = 0.5")
# A LibTorch program that trains with DistributedOptimizer: kolo::kolo_torch,
# with LibTorch found through kolo's package.
if(KOLO_WITH_TORCH)
  kolo_install_test(InstallAndFindPackageTorch train_lenet train_lenet
    "rank RANK: held-out loss [0-9.]+ -> [0-9.]+, learned; parameters identical on 2 ranks")
endif()
