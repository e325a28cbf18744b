# Sanitizer and static-analysis switches for the whole tree.
#
#   KOLO_SANITIZE=address   AddressSanitizer and UndefinedBehaviorSanitizer,
#                           every report fatal (-fno-sanitize-recover=all)
#   KOLO_SANITIZE=thread    ThreadSanitizer
#   KOLO_SANITIZE=          neither (the default)
#
#   KOLO_THREAD_SAFETY_ANALYSIS=ON  clang's -Wthread-safety, which under
#                           -Werror turns a KOLO_GUARDED_BY field touched
#                           without its lock into a build error.
#
# The flags go on every target, the third-party-facing ones included, so
# that an instrumented kolo_core never links into an uninstrumented test.
# scripts/sanitizers.sh builds and runs the core both ways with clang.
set(KOLO_SANITIZE "" CACHE STRING
  "Build with sanitizers: empty, address (ASan+UBSan) or thread (TSan)")
set_property(CACHE KOLO_SANITIZE PROPERTY STRINGS "" address thread)
option(KOLO_THREAD_SAFETY_ANALYSIS "Check lock annotations with clang's -Wthread-safety" OFF)

if(KOLO_SANITIZE STREQUAL "address")
  set(kolo_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all)
elseif(KOLO_SANITIZE STREQUAL "thread")
  set(kolo_sanitize_flags -fsanitize=thread)
elseif(NOT KOLO_SANITIZE STREQUAL "")
  message(FATAL_ERROR
    "KOLO_SANITIZE is '${KOLO_SANITIZE}'; it must be empty, 'address' or 'thread'")
endif()
if(kolo_sanitize_flags)
  # Frame pointers keep the reports' stacks whole without slow unwinding.
  add_compile_options(${kolo_sanitize_flags} -fno-omit-frame-pointer)
  add_link_options(${kolo_sanitize_flags})
  # GCC 12's -Wmaybe-uninitialized misfires on instrumented code (on
  # libstdc++'s std::function inside <regex>, in kolorun's launcher.cc);
  # ASan and UBSan check at run time what it guesses at.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()

if(KOLO_THREAD_SAFETY_ANALYSIS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "KOLO_THREAD_SAFETY_ANALYSIS needs clang; the compiler is "
      "${CMAKE_CXX_COMPILER_ID} (configure with -DCMAKE_CXX_COMPILER=clang++)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety>)
endif()
