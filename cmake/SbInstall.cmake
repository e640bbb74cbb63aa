# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
# What `make install PREFIX=...` / `cmake --install build --prefix ...` puts where (GNU dirs):
#   lib/libsonicboom.so.0 (+ .so link), include/sonicboom.h, bin/sb, share/sonicboom/<embedded model>,
#   lib/pkgconfig/sonicboom.pc (relocatable: paths relative to the .pc file), and the CMake package
#   lib/cmake/SonicBoom/ (find_package(SonicBoom) → the imported target SonicBoom::sonicboom).
# Only the shared library is installed: the layer libraries are internal.
include(CMakePackageConfigHelpers)

install(TARGETS sonicboom EXPORT SonicBoomTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS sb RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/sonicboom.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(SB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/SonicBoom)
install(EXPORT SonicBoomTargets NAMESPACE SonicBoom:: DESTINATION ${SB_CMAKE_DIR})
configure_package_config_file(cmake/SonicBoomConfig.cmake.in ${CMAKE_BINARY_DIR}/SonicBoomConfig.cmake
                              INSTALL_DESTINATION ${SB_CMAKE_DIR})
# 0.x: a minor version may change the ABI, so only the same major.minor satisfies a request
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SonicBoomConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SonicBoomConfig.cmake ${CMAKE_BINARY_DIR}/SonicBoomConfigVersion.cmake
        DESTINATION ${SB_CMAKE_DIR})

# pkg-config: prefix found from the .pc file's own place, so a moved install still works
file(RELATIVE_PATH SB_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" SB_PC_TO_PREFIX "${SB_PC_TO_PREFIX}")
configure_file(cmake/sonicboom.pc.in ${CMAKE_BINARY_DIR}/sonicboom.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sonicboom.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
