"""C++ headers of the compiled stimulus of the fast cycle driver, one per block (package data)."""
