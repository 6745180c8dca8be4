// m0serve: the binary. Everything is in src/app (m0::app::run).
#include "app/app.hpp"

int main(int argc, char** argv) { return m0::app::run(argc, argv); }
