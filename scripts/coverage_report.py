#!/usr/bin/env python3
"""The coverage table of scripts/coverage.sh.

  coverage_report.py BUILD ROOT REPORT DIR...

Runs gcov (JSON output) on every .gcda under BUILD and, for each file under
the directories DIR of the repository ROOT, counts the lines that ran. A
line inside a template counts once for each instantiation (gcov's function
of the line), summed over the objects that compiled it; a line outside
functions, once. Prints the table and writes it, with each line that did
not run under its function's name, to REPORT.
"""
import collections
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile


def gcov_files(build):
    for directory, _, names in os.walk(build):
        for name in names:
            if name.endswith(".gcda"):
                yield os.path.join(directory, name)


def function_key(mangled):
    """One key for a constructor's or destructor's variants (C1/C2/C3,
    D0/D1/D2: the same source, emitted as several functions)."""
    return re.sub(r"([CD])[0-3](?=[EI])", r"\g<1>1", mangled)


def counts(build, root, dirs):
    """{(file, function, line): count} over every object's gcov data."""
    total = collections.Counter()
    with tempfile.TemporaryDirectory() as scratch:
        for data in gcov_files(build):
            subprocess.run(
                ["gcov", "--json-format", "-o", os.path.dirname(data), data],
                cwd=scratch, check=True, stdout=subprocess.DEVNULL)
            for name in os.listdir(scratch):
                path = os.path.join(scratch, name)
                with gzip.open(path, "rt") as f:
                    report = json.load(f)
                os.remove(path)
                for entry in report["files"]:
                    source = os.path.relpath(os.path.realpath(
                        os.path.join(report["current_working_directory"],
                                     entry["file"])), root)
                    if not any(source.startswith(d + os.sep) for d in dirs):
                        continue
                    for line in entry["lines"]:
                        key = (source,
                               function_key(line.get("function_name", "")),
                               line["line_number"])
                        total[key] += line["count"]
    return total


def demangled(names):
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), text=True,
                         capture_output=True, check=True).stdout.splitlines()
    return dict(zip(names, out))


def main():
    build, root, report = sys.argv[1:4]
    # gcov runs in a scratch directory.
    build, root = os.path.realpath(build), os.path.realpath(root)
    dirs = [os.path.normpath(d) for d in sys.argv[4:]]
    total = counts(build, root, dirs)
    if not total:
        sys.exit("coverage_report: no gcov data for %s under %s" %
                 (" ".join(dirs), build))
    files = collections.defaultdict(lambda: [0, 0])
    missed = collections.defaultdict(list)
    for (source, function, line), count in sorted(total.items()):
        files[source][1] += 1
        if count:
            files[source][0] += 1
        else:
            missed[(source, function)].append(line)
    names = demangled(sorted({f for _, f in missed if f}))
    ran = sum(r for r, _ in files.values())
    lines = sum(n for _, n in files.values())
    # "counted": a line once per instantiation of the template it is in.
    table = ["%-52s %7s %7s %7s" % ("file", "counted", "ran", "")]
    for source, (r, n) in sorted(files.items()):
        table.append("%-52s %7d %7d %6.1f%%" % (source, n, r, 100.0 * r / n))
    table.append("%-52s %7d %7d %6.1f%%" % ("all", lines, ran,
                                            100.0 * ran / lines))
    print("\n".join(table))
    with open(report, "w") as f:
        f.write("\n".join(table) + "\n\nlines that did not run\n")
        for (source, function), numbers in sorted(missed.items()):
            f.write("%s: %s: %s\n" % (source, names.get(function, function)
                                      or "(outside functions)",
                                      " ".join(map(str, numbers))))
    print("coverage.sh: lines that did not run: %s" % report)


if __name__ == "__main__":
    main()
