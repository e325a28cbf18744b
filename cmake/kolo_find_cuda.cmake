# CUDA and NCCL: detected, and overridable with -DKOLO_WITH_CUDA=ON|OFF and
# -DKOLO_WITH_NCCL=ON|OFF.
#
# KOLO_WITH_CUDA defaults to ON where the CUDA toolkit is installed and,
# when kolo builds its LibTorch layer, that LibTorch was built with CUDA
# (PyPI's default torch wheel is; Debian's libtorch-dev is not): a kolo
# with CUDA beside a CPU-only LibTorch could move no tensor of the user's to
# a GPU. KOLO_WITH_NCCL defaults to ON where CUDA is on and NCCL's header
# and library are found (the toolkit's own directories first).
#
# Sets KOLO_CUDA_VERSION ("13.0") and KOLO_NCCL_VERSION ("2.28.9") for
# kolo::BuildInfo, and the targets' inputs: CUDA::cudart, and
# KOLO_NCCL_INCLUDE_DIR with KOLO_NCCL_LIBRARY.
find_package(CUDAToolkit QUIET)
set(kolo_cuda_default OFF)
if(CUDAToolkit_FOUND AND (NOT KOLO_WITH_TORCH OR TARGET torch_cuda))
  set(kolo_cuda_default ON)
endif()
option(KOLO_WITH_CUDA "Build kolo's CUDA support (detected)" ${kolo_cuda_default})

set(KOLO_CUDA_VERSION "")
set(KOLO_NCCL_VERSION "")
if(KOLO_WITH_CUDA)
  if(NOT CUDAToolkit_FOUND)
    message(FATAL_ERROR "KOLO_WITH_CUDA=ON, but no CUDA toolkit was found "
      "(CUDAToolkit_ROOT or nvcc on PATH names one)")
  endif()
  if(KOLO_WITH_TORCH AND NOT TARGET torch_cuda)
    message(FATAL_ERROR "KOLO_WITH_CUDA=ON, but the LibTorch in "
      "${TORCH_INSTALL_PREFIX} was built without CUDA; point "
      "CMAKE_PREFIX_PATH at a CUDA LibTorch or configure with "
      "-DKOLO_WITH_CUDA=OFF")
  endif()
  set(KOLO_CUDA_VERSION "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")

  find_path(KOLO_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(KOLO_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  set(kolo_nccl_default OFF)
  if(KOLO_NCCL_INCLUDE_DIR AND KOLO_NCCL_LIBRARY)
    set(kolo_nccl_default ON)
  endif()
  option(KOLO_WITH_NCCL "Build kolo's NCCL support (detected)" ${kolo_nccl_default})
  if(KOLO_WITH_NCCL)
    if(NOT KOLO_NCCL_INCLUDE_DIR OR NOT KOLO_NCCL_LIBRARY)
      message(FATAL_ERROR "KOLO_WITH_NCCL=ON, but nccl.h or libnccl was not "
        "found (set KOLO_NCCL_INCLUDE_DIR and KOLO_NCCL_LIBRARY)")
    endif()
    file(STRINGS "${KOLO_NCCL_INCLUDE_DIR}/nccl.h" kolo_nccl_defines
      REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    foreach(part MAJOR MINOR PATCH)
      string(REGEX REPLACE ".*NCCL_${part} ([0-9]+).*" "\\1" kolo_nccl_${part}
        "${kolo_nccl_defines}")
    endforeach()
    set(KOLO_NCCL_VERSION "${kolo_nccl_MAJOR}.${kolo_nccl_MINOR}.${kolo_nccl_PATCH}")
  endif()
else()
  set(KOLO_WITH_NCCL OFF)
endif()
message(STATUS "kolo: CUDA ${KOLO_WITH_CUDA} ${KOLO_CUDA_VERSION}, "
  "NCCL ${KOLO_WITH_NCCL} ${KOLO_NCCL_VERSION}")
