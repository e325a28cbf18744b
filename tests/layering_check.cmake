# Checks that kolo's layers point one way, by reading every quoted #include
# under src/ and tools/. Run as a test:
#   cmake -DKOLO_SOURCE_DIR=<tree> -P tests/layering_check.cmake
#
# src/: a file in src/<layer>/ may include headers of its own layer and of
# the layers below it, never above:
#   common <- net <- metrics <- store <- transport <- cuda <- collectives
#     <- runtime
#     <- (src/*.cc and any folder not listed: elastic, process, ...) <- torch
#     <- internal
# tools/: a tool includes the public kolo/ headers, the internal interface
# kolo_internal/ (src/internal/), and its own files; never a src/ folder.
cmake_minimum_required(VERSION 3.18)
if(NOT KOLO_SOURCE_DIR)
  message(FATAL_ERROR "pass -DKOLO_SOURCE_DIR=<the kolo source tree>")
endif()

set(layers common net metrics store transport cuda collectives runtime)
# Folders not named above sit here, just above runtime, with src/*.cc.
set(top_rank 8)
set(rank_torch 9)
set(rank_internal 10)
set(i 0)
foreach(layer IN LISTS layers)
  set(rank_${layer} ${i})
  math(EXPR i "${i} + 1")
endforeach()

function(layer_rank folder out)
  if(DEFINED rank_${folder})
    set(${out} ${rank_${folder}} PARENT_SCOPE)
  else()
    set(${out} ${top_rank} PARENT_SCOPE)
  endif()
endfunction()

file(GLOB src_folders RELATIVE ${KOLO_SOURCE_DIR}/src ${KOLO_SOURCE_DIR}/src/*)
set(folders "")
foreach(f IN LISTS src_folders)
  if(IS_DIRECTORY ${KOLO_SOURCE_DIR}/src/${f})
    list(APPEND folders ${f})
  endif()
endforeach()

set(violations "")
file(GLOB_RECURSE sources RELATIVE ${KOLO_SOURCE_DIR}
  ${KOLO_SOURCE_DIR}/src/*.h ${KOLO_SOURCE_DIR}/src/*.cc
  ${KOLO_SOURCE_DIR}/tools/*.h ${KOLO_SOURCE_DIR}/tools/*.cc)
foreach(file IN LISTS sources)
  file(STRINGS ${KOLO_SOURCE_DIR}/${file} includes REGEX "^#include \"[^\"]+\"")
  string(REGEX MATCH "^[^/]+" tree "${file}")
  set(own "")  # src/kolo.cc and the like: the top of the core
  if(file MATCHES "^src/([^/]+)/")
    set(own ${CMAKE_MATCH_1})
  endif()
  layer_rank("${own}" own_rank)
  foreach(line IN LISTS includes)
    string(REGEX MATCH "^#include \"([^/\"]+)/" match "${line}")
    if(NOT match)
      continue()
    endif()
    set(folder ${CMAKE_MATCH_1})
    list(FIND folders ${folder} known)
    if(known EQUAL -1)
      continue()  # kolo/ (public) or a tool's own subfolder
    endif()
    if(tree STREQUAL "tools")
      list(APPEND violations
        "${file}: ${line}: tools see src/ only through kolo_internal/ (src/internal/)")
    else()
      layer_rank(${folder} their_rank)
      if(their_rank GREATER own_rank)
        list(APPEND violations
          "${file}: ${line}: ${own} must not depend on ${folder}, a layer above it")
      endif()
    endif()
  endforeach()
endforeach()

list(LENGTH violations count)
if(count GREATER 0)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "${count} include(s) break kolo's layering:\n  ${text}")
endif()
message(STATUS "layering: ${CMAKE_CURRENT_LIST_FILE} found no include against the layers")
