# Compiler flags shared by every C++ target of the project.
add_library(torch_webgpu_flags INTERFACE)
target_compile_features(torch_webgpu_flags INTERFACE cxx_std_17)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "" FORCE)
endif()
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(torch_webgpu_flags INTERFACE -Wall -Wno-unused-parameter -fvisibility=hidden)
endif()
