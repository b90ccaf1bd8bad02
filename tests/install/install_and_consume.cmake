# Run by CTest (see CMakeLists.txt here) as: cmake -D... -P install_and_consume.cmake
# Installs the build, then builds and runs examples/consumer through find_package(Cascade) and
# through pkg-config (cascade.pc).

foreach(var CASCADE_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_and_consume: ${var} not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step name)
  message(STATUS "[install_and_consume] ${name}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_and_consume: step '${name}' failed (${rc})")
  endif()
endfunction()

step("install into ${prefix}"
  "${CMAKE_COMMAND}" --install "${CASCADE_BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  # Only the scratch prefix may satisfy find_package(Cascade), never a registry entry.
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
  "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
if(MPI_CXX_COMPILER)
  list(APPEND configure_args "-DMPI_CXX_COMPILER=${MPI_CXX_COMPILER}")
endif()
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
step("configure examples/consumer" "${CMAKE_COMMAND}" ${configure_args})

# The package must have come from the prefix just installed.
file(STRINGS "${build}/CMakeCache.txt" cascade_dir REGEX "^Cascade_DIR:")
string(REGEX REPLACE "^Cascade_DIR:[A-Z]+=" "" cascade_dir "${cascade_dir}")
file(REAL_PATH "${cascade_dir}" cascade_dir)
file(REAL_PATH "${prefix}" real_prefix)
string(FIND "${cascade_dir}/" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install_and_consume: Cascade was found in '${cascade_dir}', "
                      "not in the installed prefix '${real_prefix}'")
endif()

step("build examples/consumer" "${CMAKE_COMMAND}" --build "${build}" --config "${CONFIG}")

set(app "${build}/app")
if(NOT EXISTS "${app}" AND EXISTS "${build}/${CONFIG}/app")
  set(app "${build}/${CONFIG}/app")
endif()
step("run the consumer" "${app}")

# The same program built without CMake, through the installed cascade.pc.
find_program(PKG_CONFIG_EXECUTABLE pkg-config)
if(NOT PKG_CONFIG_EXECUTABLE)
  message(FATAL_ERROR "install_and_consume: pkg-config not found (Debian: apt-get install pkg-config)")
endif()
file(GLOB_RECURSE pc_files "${prefix}/*/cascade.pc")
list(LENGTH pc_files n_pc)
if(NOT n_pc EQUAL 1)
  message(FATAL_ERROR "install_and_consume: expected one cascade.pc under ${prefix}, found '${pc_files}'")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
execute_process(COMMAND "${PKG_CONFIG_EXECUTABLE}" --cflags --libs cascade
  OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_and_consume: pkg-config --cflags --libs cascade failed (${rc})")
endif()
message(STATUS "[install_and_consume] pkg-config: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(extra_cxx UNIX_COMMAND "${CXX_FLAGS} ${LINK_FLAGS}")
step("build examples/consumer with pkg-config"
  "${CXX_COMPILER}" ${extra_cxx} -O1 "${CONSUMER_SOURCE_DIR}/main.cpp" -o "${WORK_DIR}/app_pc" ${pc_flags})
step("run the pkg-config consumer" "${WORK_DIR}/app_pc")
message(STATUS "[install_and_consume] OK")
