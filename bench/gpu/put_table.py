#!/usr/bin/env python3
"""Puts a table into a markdown document between its two marker lines, replacing what was there.

Usage: put_table.py DOC TABLE [--name NAME]
The markers are <!-- NAME:begin --> and <!-- NAME:end --> (NAME defaults to cuda-kernels-table);
DOC must hold each exactly once, begin before end. bench/gpu/run.sh uses it to write its table
into docs/benchmarks.md.
"""
import argparse
import sys


def put(doc, table, name):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    lines = doc.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(starts) != 1 or len(ends) != 1 or starts[0] > ends[0]:
        raise ValueError(f"the document must hold '{begin}' once, then '{end}' once "
                         f"(found {len(starts)} and {len(ends)})")
    if not table.endswith("\n"):
        table += "\n"
    return "".join(lines[:starts[0] + 1]) + table + "".join(lines[ends[0]:])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("doc")
    parser.add_argument("table")
    parser.add_argument("--name", default="cuda-kernels-table")
    args = parser.parse_args()
    with open(args.doc) as f:
        doc = f.read()
    with open(args.table) as f:
        table = f.read()
    try:
        updated = put(doc, table, args.name)
    except ValueError as e:
        sys.exit(f"put_table.py: {args.doc}: {e}")
    with open(args.doc, "w") as f:
        f.write(updated)


if __name__ == "__main__":
    main()
