"""Worker: write the files of the JSON object in argv[1] ({path: text}) into the workspace."""
import json
import pathlib
import sys

for name, text in json.loads(pathlib.Path(sys.argv[1]).read_text()).items():
    path = pathlib.Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
