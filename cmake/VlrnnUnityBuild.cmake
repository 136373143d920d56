# NOTE [ Unity builds ]: every file that includes LibTorch compiles the same templates and
# inline functions of its headers again, even with the precompiled header. Compiled 16 to a
# unit (CMake's UNITY_BUILD, in every target defined after this), the build does that work a
# sixteenth as often (the timings: docs/architecture.md).
#
# What it asks of the code: every anonymous namespace in a unit is the same namespace, so a
# name defined at file scope in one, or `static`, must be unique within its target, not only
# its file, and which files share a unit shifts as files are added. Name a file's helpers for
# what they do (or share them in a header), and keep `using namespace` out of anonymous
# namespaces. A file with its own compile definitions is compiled alone.
# VLRNN_UNITY_BUILD=OFF compiles file by file, for one who rebuilds a test file many times.
if(VLRNN_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)
endif()
