# FindSlurm: Slurm's public headers (slurm/slurm.h, slurm/spank.h, slurm/slurm_version.h) and libslurm.
# A site builds against its own Slurm with -DSlurm_ROOT=<prefix> (the prefix Slurm was installed to, the one
# holding include/slurm and lib/libslurm.so); without it, the system's (Debian: libslurm-dev).
#
# Sets Slurm_FOUND, Slurm_INCLUDE_DIR, Slurm_LIBRARY, Slurm_VERSION (22.05.8), Slurm_VERSION_MAJOR (22),
# Slurm_VERSION_MINOR (5) and Slurm_RELEASE ("22.05", the major.minor a SPANK plugin must match).
find_path(Slurm_INCLUDE_DIR slurm/slurm.h DOC "Where slurm/slurm.h is (Slurm's include directory)")
find_library(Slurm_LIBRARY slurm DOC "libslurm.so, which dlaunch opens by its SONAME at run time")

if(Slurm_INCLUDE_DIR AND EXISTS ${Slurm_INCLUDE_DIR}/slurm/slurm_version.h)
  file(STRINGS ${Slurm_INCLUDE_DIR}/slurm/slurm_version.h _slurm_version_line
       REGEX "define[ \t]+SLURM_VERSION_NUMBER[ \t]+0x")
  if(_slurm_version_line MATCHES "0x([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])([0-9a-fA-F][0-9a-fA-F])")
    math(EXPR Slurm_VERSION_MAJOR "0x${CMAKE_MATCH_1}")
    math(EXPR Slurm_VERSION_MINOR "0x${CMAKE_MATCH_2}")
    math(EXPR _slurm_micro "0x${CMAKE_MATCH_3}")
    set(_slurm_minor_2 ${Slurm_VERSION_MINOR})
    if(Slurm_VERSION_MINOR LESS 10)
      set(_slurm_minor_2 "0${Slurm_VERSION_MINOR}")
    endif()
    set(Slurm_RELEASE "${Slurm_VERSION_MAJOR}.${_slurm_minor_2}")
    set(Slurm_VERSION "${Slurm_RELEASE}.${_slurm_micro}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Slurm REQUIRED_VARS Slurm_INCLUDE_DIR Slurm_LIBRARY Slurm_VERSION
                                  VERSION_VAR Slurm_VERSION)
mark_as_advanced(Slurm_INCLUDE_DIR Slurm_LIBRARY)
