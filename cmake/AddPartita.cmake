# Helpers for code built against an installed Partita (find_package).

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)
# mlir_tablegen reads the directory's include paths.
include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
include_directories(${PARTITA_INCLUDE_DIR})

# partita_add_pass_plugin(<name> <source>...)
#
# A shared module that plan-opt loads with --load-pass-plugin (passes,
# search rules, cost-model overrides) or --load-dialect-plugin. It links no
# Partita or MLIR library: plan-opt exports every symbol of both, and one
# copy of each registry must serve the tool and its plugins.
function(partita_add_pass_plugin name)
  add_library(${name} MODULE ${ARGN})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
  target_compile_features(${name} PRIVATE cxx_std_17)
  separate_arguments(defs NATIVE_COMMAND "${LLVM_DEFINITIONS}")
  target_compile_definitions(${name} PRIVATE ${defs})
  if(NOT PARTITA_LLVM_RTTI)
    target_compile_options(${name} PRIVATE -fno-rtti)
  endif()
  set_target_properties(${name} PROPERTIES PREFIX "lib")
endfunction()
