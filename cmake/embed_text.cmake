# Embeds a text file in C++ as a function that returns it, for files that
# ship inside a binary (the job page, src/metrics/job_page.html). Run at
# build time, so editing the file rebuilds what includes it:
#
#   cmake -DINPUT=page.html -DOUTPUT=page.cc -DHEADER=metrics/job_page.h
#         -DFUNCTION=kolo::metrics::JobPageHtml -P embed_text.cmake
#
# The text goes in a raw string literal whose delimiter must not occur in
# it; where it does, this fails rather than cut the text short.
foreach(var INPUT OUTPUT HEADER FUNCTION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_text.cmake: -D${var}=... is missing")
  endif()
endforeach()

set(delimiter "kolo_embedded")
file(READ "${INPUT}" text)
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed_text.cmake: ${INPUT} contains "
    "')${delimiter}\"', the end of the raw string literal that would embed "
    "it; reword that place in the file")
endif()

# kolo::metrics::JobPageHtml -> namespace kolo::metrics, function JobPageHtml
string(REGEX MATCH "^(.*)::([A-Za-z_][A-Za-z0-9_]*)$" qualified "${FUNCTION}")
if(NOT qualified)
  message(FATAL_ERROR "embed_text.cmake: FUNCTION '${FUNCTION}' is not "
    "namespace::Name")
endif()
set(namespace "${CMAKE_MATCH_1}")
set(name "${CMAKE_MATCH_2}")

set(code "// Generated from ${INPUT} by cmake/embed_text.cmake: edit that file.
#include \"${HEADER}\"

namespace ${namespace} {

const char* ${name}() {
  return R\"${delimiter}(${text})${delimiter}\";
}

}  // namespace ${namespace}
")
# Rewritten only when it changes, so a rebuild compiles it only then.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
  if(old STREQUAL code)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${code}")
