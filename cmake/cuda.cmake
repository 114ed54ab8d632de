# cuda.cmake — the CUDA backend (src/cuda), built when nvcc is found and XCONV_CUDA is ON.
# Without nvcc nothing here changes the build: the library then refuses CUDA tensors with
# an UNSUPPORTED error (src/api/validate.c).
#
# Included from CMakeLists.txt after the library targets exist and before the CLI and tests,
# so the compile definition below reaches every target that includes src/ internals.
option(XCONV_CUDA "Build the CUDA backend when nvcc is found" ON)

if(XCONV_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Explicit -gencode flags instead of CMAKE_CUDA_ARCHITECTURES: "90a" (wgmma, setmaxnreg)
    # is spelled differently across CMake versions, the flags are not.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES OFF)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)

    file(GLOB XCONV_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu)
    target_sources(xconv_objects PRIVATE ${XCONV_CUDA_SOURCES})
    set_target_properties(xconv_objects PROPERTIES CUDA_VISIBILITY_PRESET hidden)
    # The library targets exist before CUDA is enabled, so they did not pick up the variable.
    set_target_properties(xconv_objects xconv_static xconv_shared PROPERTIES
      CUDA_ARCHITECTURES OFF)
    # The top level's add_compile_options (warnings, sanitizers) are C compiler flags that
    # nvcc rejects: keep them for C sources only.
    get_target_property(_xconv_opts xconv_objects COMPILE_OPTIONS)
    if(_xconv_opts)
      set(_xconv_c_opts)
      foreach(o ${_xconv_opts})
        if(o MATCHES "^\\$<")
          list(APPEND _xconv_c_opts "${o}")
        else()
          list(APPEND _xconv_c_opts "$<$<COMPILE_LANGUAGE:C>:${o}>")
        endif()
      endforeach()
      set_target_properties(xconv_objects PROPERTIES COMPILE_OPTIONS "${_xconv_c_opts}")
    endif()

    # sm_90a machine code for Hopper (wgmma), PTX of compute_80 for every other GPU.
    set(XCONV_CUDA_FLAGS
      -gencode=arch=compute_90a,code=sm_90a
      -gencode=arch=compute_80,code=compute_80
      --expt-relaxed-constexpr
      -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
    if(XCONV_WERROR)
      list(APPEND XCONV_CUDA_FLAGS -Werror=all-warnings)
    endif()
    target_compile_options(xconv_objects PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:${XCONV_CUDA_FLAGS}>")
    # Every target that includes src/core/internal.h (engines table, tests, tools) must see
    # the CUDA declarations, so the definition is global rather than per target.
    add_compile_definitions(XCONV_HAVE_CUDA)
    target_compile_definitions(xconv_objects PUBLIC XCONV_HAVE_CUDA)
    foreach(t xconv_static xconv_shared)
      target_compile_definitions(${t} PUBLIC XCONV_HAVE_CUDA)
      target_link_libraries(${t} PUBLIC CUDA::cudart)
    endforeach()
    set(XCONV_HAVE_CUDA ON)
    message(STATUS "xconv: CUDA backend ON (${CMAKE_CUDA_COMPILER})")
  else()
    message(STATUS "xconv: CUDA backend OFF (no nvcc found)")
  endif()
else()
  message(STATUS "xconv: CUDA backend OFF (XCONV_CUDA=OFF)")
endif()
