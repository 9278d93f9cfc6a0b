"""`python -m torch_webgpu`: the `torch-webgpu` command line."""

import sys

from torch_webgpu.cli.main import main

sys.exit(main())
