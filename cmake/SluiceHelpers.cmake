# sluice_cc_library(NAME name HDRS ... SRCS ... DEPS ... [CUDA_SRCS ...])
#   Builds target sluice_<name> with alias sluice::<name>. Consumers link the alias only.
#   Public headers are included as "<component>/<header>.h" from the source root.
# sluice_cc_test(NAME name SRCS ... DEPS ... [LABELS ...] [SERIAL])
#   A GoogleTest executable registered with ctest through gtest_discover_tests.
# sluice_cc_binary(NAME name SRCS ... DEPS ... [OUTPUT_NAME n])
# sluice_py_module(NAME name SRCS ... DEPS ... OUTPUT_DIRECTORY dir)
#   A pybind11 extension module (`import name`), symbols hidden, written to dir. Needs pybind11
#   (cmake/SluicePython.cmake finds it).
# Every target these make compiles with the project's warnings (SLUICE_WARNINGS) and host flags;
# _sluice_apply_flags is their private part: CMake files outside this one call the helpers.

set(SLUICE_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  # GCC 12 reports false -Wrestrict errors inside libstdc++'s std::string at -O3 (GCC bug 105329).
  list(APPEND SLUICE_WARNINGS -Wno-restrict)
endif()
if(SLUICE_STRICT)
  list(APPEND SLUICE_WARNINGS -Werror)
endif()

set(SLUICE_HOST_FLAGS "")
if(SLUICE_NATIVE)
  list(APPEND SLUICE_HOST_FLAGS -march=native)
endif()

if(SLUICE_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${SLUICE_SANITIZE}> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=${SLUICE_SANITIZE})
endif()

function(_sluice_apply_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${SLUICE_WARNINGS} ${SLUICE_HOST_FLAGS}>)
endfunction()

function(sluice_cc_library)
  cmake_parse_arguments(L "" "NAME" "HDRS;SRCS;DEPS;CUDA_SRCS" ${ARGN})
  set(target sluice_${L_NAME})
  if(L_SRCS OR L_CUDA_SRCS)
    add_library(${target} STATIC ${L_SRCS} ${L_CUDA_SRCS} ${L_HDRS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} PUBLIC ${L_DEPS})
    _sluice_apply_flags(${target})
  else()
    add_library(${target} INTERFACE ${L_HDRS})
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} INTERFACE ${L_DEPS})
  endif()
  add_library(sluice::${L_NAME} ALIAS ${target})
endfunction()

function(sluice_cc_binary)
  cmake_parse_arguments(B "" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${B_NAME} ${B_SRCS})
  target_link_libraries(${B_NAME} PRIVATE ${B_DEPS})
  _sluice_apply_flags(${B_NAME})
  if(B_OUTPUT_NAME)
    set_target_properties(${B_NAME} PROPERTIES OUTPUT_NAME ${B_OUTPUT_NAME})
  endif()
endfunction()

function(sluice_py_module)
  cmake_parse_arguments(P "" "NAME;OUTPUT_DIRECTORY" "SRCS;DEPS" ${ARGN})
  pybind11_add_module(${P_NAME} MODULE NO_EXTRAS ${P_SRCS})
  target_link_libraries(${P_NAME} PRIVATE ${P_DEPS})
  _sluice_apply_flags(${P_NAME})
  set_target_properties(${P_NAME} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()

include(GoogleTest)
function(sluice_cc_test)
  cmake_parse_arguments(T "SERIAL" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gmock GTest::gtest_main)
  _sluice_apply_flags(${T_NAME})
  target_compile_definitions(${T_NAME} PRIVATE
    SLUICE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" SLUICE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(labels ${T_LABELS})
  if(NOT labels)
    set(labels cpu)
  endif()
  set(serial FALSE)
  if(T_SERIAL)
    set(serial TRUE)  # timed runs: ctest runs them alone
  endif()
  gtest_discover_tests(${T_NAME} PROPERTIES LABELS "${labels}" RUN_SERIAL ${serial}
                       DISCOVERY_TIMEOUT 60)
endfunction()
