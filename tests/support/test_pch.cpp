// SPDX-License-Identifier: Apache-2.0
// The program that compiles the tests' shared precompiled header (tests/CMakeLists.txt); it
// does nothing when run.
int main() {
  return 0;
}
