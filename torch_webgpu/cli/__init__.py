"""The `torch-webgpu` command line: compile, run and inspect bundles."""
