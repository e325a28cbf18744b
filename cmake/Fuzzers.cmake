# libFuzzer targets (fuzz/): KOLO_BUILD_FUZZERS=ON builds one program per
# parser of bytes that come from outside the process, under AddressSanitizer
# and UndefinedBehaviorSanitizer. scripts/fuzz.sh configures and runs them.
#
# Every target of the tree gets -fsanitize=fuzzer-no-link, so libFuzzer
# sees the coverage of the library code a fuzzer calls, not only of the
# fuzzer's own file; only the fuzzers link libFuzzer's main().
option(KOLO_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (clang only)" OFF)

if(KOLO_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KOLO_BUILD_FUZZERS needs clang (libFuzzer); the compiler is "
      "${CMAKE_CXX_COMPILER_ID} (configure with -DCMAKE_CXX_COMPILER=clang++, "
      "or run scripts/fuzz.sh)")
  endif()
  if(NOT KOLO_SANITIZE STREQUAL "address")
    message(FATAL_ERROR "KOLO_BUILD_FUZZERS needs -DKOLO_SANITIZE=address: a fuzzer "
      "finds memory errors only when ASan and UBSan watch the parser")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
