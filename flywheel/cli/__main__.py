"""`python -m galahad.flywheel.cli.main`: the console script."""

import sys

from galahad.flywheel.cli.main.main import main

sys.exit(main())
