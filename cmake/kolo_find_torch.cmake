# Finds LibTorch: PyPI's torch (CMAKE_PREFIX_PATH or Torch_DIR pointed at
# its share/cmake, as torch.utils.cmake_prefix_path gives), a LibTorch
# archive, or Debian's libtorch-dev.
#
# TorchConfig.cmake looks for libc10 and libtorch with find_library, which
# searches the system's directories before the PATHS it names. With Debian's
# libtorch-dev also installed, a LibTorch 2.x from PyPI would then compile
# against its own headers and link Debian's 1.13 libc10: a build that fails
# to link at best. Setting Torch_ROOT to the prefix of the TorchConfig.cmake
# that is going to be loaded makes those lookups search that prefix first,
# and the check after find_package fails loudly should they still differ.
if(NOT DEFINED Torch_ROOT)
  set(kolo_torch_configs)
  if(Torch_DIR)
    list(APPEND kolo_torch_configs "${Torch_DIR}")
  endif()
  foreach(prefix IN LISTS CMAKE_PREFIX_PATH)
    list(APPEND kolo_torch_configs "${prefix}/Torch" "${prefix}/share/cmake/Torch")
  endforeach()
  foreach(config_dir IN LISTS kolo_torch_configs)
    if(EXISTS "${config_dir}/TorchConfig.cmake")
      get_filename_component(Torch_ROOT "${config_dir}/../../.." ABSOLUTE)
      break()
    endif()
  endforeach()
endif()
find_package(Torch REQUIRED)
# torch_cpu is an imported target whose location Torch's own targets file
# computes from where it lies, so it is right; the libraries found by name
# must sit beside it.
get_target_property(kolo_torch_cpu torch_cpu LOCATION)
get_filename_component(kolo_expected_dir "${kolo_torch_cpu}" DIRECTORY)
get_filename_component(kolo_expected_dir "${kolo_expected_dir}" REALPATH)
foreach(library IN ITEMS TORCH_LIBRARY c10_LIBRARY)
  get_filename_component(kolo_library_dir "${${library}}" DIRECTORY)
  get_filename_component(kolo_library_dir "${kolo_library_dir}" REALPATH)
  if(NOT kolo_library_dir STREQUAL kolo_expected_dir)
    message(FATAL_ERROR "LibTorch ${Torch_VERSION} (${kolo_torch_cpu}) came "
      "with ${library} = ${${library}}, another LibTorch's (one installed on "
      "the system's paths). Configure a new build directory with "
      "-DTorch_ROOT=<the directory above that LibTorch's lib/>.")
  endif()
endforeach()
