# NOTE [ Unity builds ]: every file that includes LibTorch spends seconds on what every other
# file spends them on too (the templates and inline functions of its headers, instantiated
# and compiled again in each), even with the precompiled header. Compiled 8 to a unit
# (CMake's UNITY_BUILD, in every target defined after this), the build does that work an
# eighth as often. A clean build on 2 cores (configure included) took 272 and 280 s against
# 860 s file by file, run back to back; the compilers' seconds summed over all jobs: 528
# against 1705. A unit takes ~1.6 GiB to compile, as one file did (scripts/build.sh caps the
# jobs at one per 2 GiB).
#
# What it asks of the code: one unit holds several files, and every anonymous namespace in a
# unit is the same namespace. So a name defined at file scope in an anonymous namespace, or
# `static`, must be unique within its target, not only within its file: two files defining
# `tolerance()` fail to compile once they share a unit, and which files share one shifts
# as files are added. Give a file's helpers names that say what they are for (or share them
# in a header), and keep `using namespace` out of anonymous namespaces where the names it
# brings in could meet another file's. A file with its own compile definitions
# (set_source_files_properties) is compiled alone. VLRNN_UNITY_BUILD=OFF compiles file by
# file, for a developer who rebuilds one test file many times (a unit of 8 takes ~20 s).
if(VLRNN_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()
