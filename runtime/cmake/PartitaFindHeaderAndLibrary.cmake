# partita_find_header_and_library(PREFIX HEADER NAMES names... HINTS dirs...):
# PREFIX_INCLUDE, the first of the HINTS (or the system's folders) holding
# HEADER, and PREFIX_LIBRARY, the library of one of the names found beside
# it (../lib, ../lib64) before anywhere else: a machine may have two
# versions, and headers of one with the library of the other fail at run
# time (cuDNN refuses to run).
function(partita_find_header_and_library prefix header)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "NAMES;HINTS")
  find_path(${prefix}_INCLUDE ${header} HINTS ${arg_HINTS})
  set(beside "")
  if(${prefix}_INCLUDE)
    set(beside ${${prefix}_INCLUDE}/../lib ${${prefix}_INCLUDE}/../lib64)
  endif()
  find_library(${prefix}_LIBRARY NAMES ${arg_NAMES} NAMES_PER_DIR
               HINTS ${beside} ${CUDAToolkit_LIBRARY_DIR})
endfunction()
