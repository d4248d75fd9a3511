"""Hidden suite (completion only, run at recertification): another word, another wrap."""
import os
import sys

sys.path.insert(0, os.getcwd())
from caesar import encode  # noqa: E402

sys.exit(0 if encode("zebra") == "difve" else 1)
