"""Shared libraries: which file each ELF object would load (elf: the reader, ldcache: the
system's ld.so.cache, loader: a model of glibc's search), and which distribution provides or
needs which library (index)."""
