# partita_find_header_and_library(PREFIX HEADER NAMES names... HINTS dirs...):
# PREFIX_INCLUDE, the first of the HINTS (or the system's folders) holding
# HEADER, and PREFIX_LIBRARY, the library of one of the names beside it
# (../lib, ../lib64) if there is one, else found as CMake finds libraries:
# a machine may have two versions, and headers of one with the library of
# the other fail at run time (cuDNN refuses to run). Both are cached: a
# build folder keeps what it found until they are cleared.
function(partita_find_header_and_library prefix header)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "NAMES;HINTS")
  find_path(${prefix}_INCLUDE ${header} HINTS ${arg_HINTS})
  if(${prefix}_INCLUDE)
    # Only there, before CMAKE_PREFIX_PATH and the like, which a find
    # searches ahead of its hints.
    find_library(${prefix}_LIBRARY NAMES ${arg_NAMES} NAMES_PER_DIR
                 PATHS ${${prefix}_INCLUDE}/../lib ${${prefix}_INCLUDE}/../lib64
                 NO_DEFAULT_PATH)
  endif()
  find_library(${prefix}_LIBRARY NAMES ${arg_NAMES} NAMES_PER_DIR
               HINTS ${CUDAToolkit_LIBRARY_DIR})
endfunction()
