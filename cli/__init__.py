"""The `babeleval` command line: thin click commands over the library."""
