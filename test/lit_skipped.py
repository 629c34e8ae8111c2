#!/usr/bin/env python3
"""Lists the lit tests that did not run, from lit's --output result files:

  lit_skipped.py RESULTS.json...

so that ctest shows them: exits 77 (the lit-skipped entry's skip code) when
any test was unsupported or skipped, naming each and the features it lacks.
"""

import json
import re
import sys


def main():
    skipped = []
    for path in sys.argv[1:]:
        try:
            results = json.load(open(path))
        except OSError:
            continue  # that lit entry did not run
        for test in results.get("tests", []):
            if test["code"] in ("UNSUPPORTED", "SKIPPED"):
                lacks = re.search(r"unavailable features: (.*)",
                                  test.get("output", ""))
                why = f" (needs {lacks.group(1).strip()})" if lacks else ""
                skipped.append(f"{test['name']}{why}")
    for line in skipped:
        print(f"did not run: {line}")
    print(f"{len(skipped)} lit tests did not run")
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
