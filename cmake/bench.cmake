# bench.cmake — the `xconv bench` harness (bench/*.c, tools/cmd_bench.c) and its optional
# peers. Included from CMakeLists.txt after the CLI target xconv_cli exists.
#
#   cJSON    (Debian libcjson-dev)   reads the suite file; without it there is no bench
#   oneDNN   (Debian libdnnl-dev)    peer, option XCONV_BENCH_ONEDNN, ON when found
#   XNNPACK  (Debian libxnnpack-dev, libpthreadpool-dev)
#                                    peer, option XCONV_BENCH_XNNPACK, ON when found
#   cuDNN    (cudnn.h, with the CUDA backend)
#                                    peer of `xconv bench --device cuda`, option
#                                    XCONV_BENCH_CUDNN, ON when the header is found; the
#                                    library is loaded with dlopen at run time, not linked
#
# Without a peer the bench still builds and measures xconv alone.
if(NOT TARGET xconv_cli)
  return()
endif()

find_package(PkgConfig QUIET)

# ---- cJSON ------------------------------------------------------------------------------
set(XCONV_CJSON_FOUND OFF)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(XCONV_CJSON QUIET IMPORTED_TARGET libcjson)
endif()
if(XCONV_CJSON_FOUND)
  set(XCONV_CJSON_TARGET PkgConfig::XCONV_CJSON)
else()
  find_path(XCONV_CJSON_INCLUDE cjson/cJSON.h)
  find_library(XCONV_CJSON_LIB cjson)
  if(XCONV_CJSON_INCLUDE AND XCONV_CJSON_LIB)
    add_library(xconv_bench_cjson INTERFACE)
    target_include_directories(xconv_bench_cjson INTERFACE ${XCONV_CJSON_INCLUDE})
    target_link_libraries(xconv_bench_cjson INTERFACE ${XCONV_CJSON_LIB})
    set(XCONV_CJSON_TARGET xconv_bench_cjson)
    set(XCONV_CJSON_FOUND ON)
  endif()
endif()
if(NOT XCONV_CJSON_FOUND)
  message(STATUS "xconv bench: cJSON not found (Debian: libcjson-dev); `xconv bench` not built")
  return()
endif()

file(GLOB XCONV_BENCH_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/*.c)
target_sources(xconv_cli PRIVATE ${XCONV_BENCH_SOURCES})
target_include_directories(xconv_cli PRIVATE ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(xconv_cli PRIVATE ${XCONV_CJSON_TARGET} Threads::Threads ${CMAKE_DL_LIBS} m)
target_compile_definitions(xconv_cli PRIVATE XCONV_HAVE_BENCH)
# The default suite: ../shared/bench/suite.json beside the source tree.
target_compile_definitions(xconv_cli PRIVATE
  XCONV_BENCH_DEFAULT_SUITE="${PROJECT_SOURCE_DIR}/../shared/bench/suite.json")
# The FMA peak loop must be optimized and uninstrumented whatever the build type, or it
# measures the compiler (sanitizers keep the accumulator array in memory).
set_source_files_properties(${PROJECT_SOURCE_DIR}/bench/fma_peak.c PROPERTIES
  COMPILE_OPTIONS "-O2;-fno-sanitize=all")

# ---- oneDNN ------------------------------------------------------------------------------
find_path(XCONV_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
find_library(XCONV_DNNL_LIB dnnl)
set(XCONV_DNNL_FOUND OFF)
if(XCONV_DNNL_INCLUDE AND XCONV_DNNL_LIB)
  set(XCONV_DNNL_FOUND ON)
endif()
option(XCONV_BENCH_ONEDNN "Benchmark against oneDNN (libdnnl-dev) when found" ${XCONV_DNNL_FOUND})
if(XCONV_BENCH_ONEDNN AND XCONV_DNNL_FOUND)
  target_include_directories(xconv_cli PRIVATE ${XCONV_DNNL_INCLUDE})
  target_link_libraries(xconv_cli PRIVATE ${XCONV_DNNL_LIB})
  target_compile_definitions(xconv_cli PRIVATE XCONV_HAVE_ONEDNN)
  message(STATUS "xconv bench: oneDNN peer ${XCONV_DNNL_LIB}")
elseif(XCONV_BENCH_ONEDNN)
  message(STATUS "xconv bench: oneDNN not found (Debian: libdnnl-dev)")
endif()

# ---- XNNPACK -----------------------------------------------------------------------------
find_path(XCONV_XNNPACK_INCLUDE xnnpack.h)
find_path(XCONV_PTHREADPOOL_INCLUDE pthreadpool.h)
find_library(XCONV_XNNPACK_LIB XNNPACK)
find_library(XCONV_PTHREADPOOL_LIB pthreadpool)
set(XCONV_XNNPACK_FOUND OFF)
if(XCONV_XNNPACK_INCLUDE AND XCONV_PTHREADPOOL_INCLUDE AND XCONV_XNNPACK_LIB AND
   XCONV_PTHREADPOOL_LIB)
  set(XCONV_XNNPACK_FOUND ON)
endif()
option(XCONV_BENCH_XNNPACK "Benchmark against XNNPACK (libxnnpack-dev) when found"
       ${XCONV_XNNPACK_FOUND})
if(XCONV_BENCH_XNNPACK AND XCONV_XNNPACK_FOUND)
  target_include_directories(xconv_cli PRIVATE ${XCONV_XNNPACK_INCLUDE} ${XCONV_PTHREADPOOL_INCLUDE})
  target_link_libraries(xconv_cli PRIVATE ${XCONV_XNNPACK_LIB} ${XCONV_PTHREADPOOL_LIB})
  target_compile_definitions(xconv_cli PRIVATE XCONV_HAVE_XNNPACK)
  message(STATUS "xconv bench: XNNPACK peer ${XCONV_XNNPACK_LIB}")
elseif(XCONV_BENCH_XNNPACK)
  message(STATUS "xconv bench: XNNPACK not found (Debian: libxnnpack-dev libpthreadpool-dev)")
endif()

# ---- cuDNN (xconv bench --device cuda) ----------------------------------------------------
# Only the header is used at build time: bench/peer_cudnn.c opens libcudnn.so.9 with dlopen
# when the bench runs ($XCONV_CUDNN_LIB, the loader's path, or the lib folder of PyTorch's
# nvidia.cudnn wheel), so a binary built against this machine's cuDNN 9 also runs where cuDNN
# ships inside Python. Without the header (or without the CUDA backend) the peer is a stub and
# `xconv bench --device cuda` times xconv alone.
if(XCONV_HAVE_CUDA)
  find_path(XCONV_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_PATH
            PATH_SUFFIXES include)
  find_library(XCONV_CUDNN_LIB cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_PATH
               PATH_SUFFIXES lib lib64)
  set(XCONV_CUDNN_FOUND OFF)
  if(XCONV_CUDNN_INCLUDE)
    set(XCONV_CUDNN_FOUND ON)
  endif()
  option(XCONV_BENCH_CUDNN "Benchmark CUDA against cuDNN (header at build time, dlopen at run time)"
         ${XCONV_CUDNN_FOUND})
  if(XCONV_BENCH_CUDNN AND XCONV_CUDNN_FOUND)
    target_include_directories(xconv_cli SYSTEM PRIVATE ${XCONV_CUDNN_INCLUDE})
    target_compile_definitions(xconv_cli PRIVATE XCONV_HAVE_CUDNN)
    if(XCONV_CUDNN_LIB)
      message(STATUS "xconv bench: cuDNN peer (${XCONV_CUDNN_INCLUDE}/cudnn.h; loaded at run time, here ${XCONV_CUDNN_LIB})")
    else()
      message(STATUS "xconv bench: cuDNN peer (${XCONV_CUDNN_INCLUDE}/cudnn.h; loaded at run time)")
    endif()
  elseif(XCONV_BENCH_CUDNN)
    message(STATUS "xconv bench: cuDNN header not found; bench --device cuda times xconv alone")
  endif()
endif()
