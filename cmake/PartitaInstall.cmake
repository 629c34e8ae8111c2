# `cmake --install`: the tools, the libraries, the public headers and .td
# files (sources and generated), the reference docs, the example models,
# and a package config
# that out-of-tree plugins and tools find with find_package(Partita).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PARTITA_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/partita")
set(PARTITA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Partita")

install(TARGETS PartitaPlan ${PARTITA_COMPILER_LIBS} EXPORT PartitaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${PARTITA_INSTALL_INCLUDEDIR})
install(TARGETS plan-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(DIRECTORY plan/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(dir dialects compiler passes support)
  install(DIRECTORY ${dir} DESTINATION ${PARTITA_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
endforeach()
foreach(dir dialects passes)
  install(DIRECTORY ${PROJECT_BINARY_DIR}/${dir}
    DESTINATION ${PARTITA_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h.inc" PATTERN "*.cpp.inc"
    PATTERN "CMakeFiles" EXCLUDE)
endforeach()

if(PARTITA_HAVE_RUNTIME)
  install(TARGETS PartitaRuntime EXPORT PartitaTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(TARGETS plan-run partita-comm-check partita-gemm-bench
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY runtime/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()

# The docs under share/doc/partita, and the example models (specs and the
# HF configs they point at, side by side as in the source tree) under
# share/partita/examples: a plugin built in an empty folder runs on them.
install(DIRECTORY docs/ ${PARTITA_DOCS_DIR}/
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/partita
  FILES_MATCHING PATTERN "*.md")
install(DIRECTORY examples/models examples/hf
  DESTINATION ${CMAKE_INSTALL_DATADIR}/partita/examples)

install(EXPORT PartitaTargets NAMESPACE Partita::
  DESTINATION ${PARTITA_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/PartitaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/PartitaConfig.cmake
  INSTALL_DESTINATION ${PARTITA_INSTALL_CMAKEDIR}
  PATH_VARS PARTITA_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PartitaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/PartitaConfig.cmake
  ${PROJECT_BINARY_DIR}/PartitaConfigVersion.cmake
  cmake/AddPartita.cmake
  DESTINATION ${PARTITA_INSTALL_CMAKEDIR})
