"""`python -m galahad.flywheel.cli`: the console script (as `python -m galahad.flywheel.cli.main`)."""

import sys

from galahad.flywheel.cli.main import main

sys.exit(main())
