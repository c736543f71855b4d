import sys

from torch_wge.cli import main

sys.exit(main())
