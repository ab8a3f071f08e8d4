"""The Python half of tests/it/interop.rs (run by it with the project venv's python).

Reads a JSON job list from argv[1]; for each job it writes `py_out` from `records` with the
`array_record` package and the job's options, and reads `rust_file` (written by guideloom)
with `ArrayRecordReader` and, when grain is installed, grain's `ArrayRecordDataSource`,
comparing every record with `records`. Prints one JSON object: the failures and what ran.
"""

import json
import random
import struct
import sys

from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter

try:
    from grain.python import ArrayRecordDataSource
except Exception:  # grain is optional unless the test asks for it
    ArrayRecordDataSource = None


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (count,) = struct.unpack_from("<Q", data, 0)
    at, out = 8, []
    for _ in range(count):
        (n,) = struct.unpack_from("<Q", data, at)
        out.append(data[at + 8:at + 8 + n])
        at += 8 + n
    return out


def main():
    jobs = json.load(open(sys.argv[1]))
    failures, grain_checked = [], 0
    for job in jobs:
        records = load(job["records"])
        w = ArrayRecordWriter(job["py_out"], job["options"])
        for r in records:
            w.write(r)
        w.close()
        name = job["rust_file"]
        try:
            reader = ArrayRecordReader(name)
            if reader.num_records() != len(records):
                failures.append(f"{name}: {reader.num_records()} records, expected {len(records)}")
                continue
            if reader.read_all() != records:
                failures.append(f"{name}: read_all differs")
            picks = random.Random(len(records)).sample(range(len(records)), min(len(records), 5))
            if picks and reader.read(picks) != [records[i] for i in picks]:
                failures.append(f"{name}: read({picks}) differs")
            reader.close()
            if ArrayRecordDataSource is not None:
                ds = ArrayRecordDataSource([name])
                if len(ds) != len(records) or any(ds[i] != records[i] for i in picks):
                    failures.append(f"{name}: grain's ArrayRecordDataSource differs")
                grain_checked += 1
        except Exception as e:  # report, do not stop: the Rust side prints every failure
            failures.append(f"{name}: {type(e).__name__}: {e}")
    print(json.dumps({"failures": failures, "jobs": len(jobs), "grain_checked": grain_checked,
                      "grain": ArrayRecordDataSource is not None}))


if __name__ == "__main__":
    main()
