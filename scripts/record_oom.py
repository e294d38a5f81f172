"""An out-of-memory trace for the ground-truth corpus, recorded on a GPU from the repo root:

    python3 scripts/record_oom.py OUT

profile_memory and record_shapes; three 1024² fp32 matmul + add steps in record_function
"step_N", then a caught 400 GiB ``torch.empty`` inside "too_big" (one "[OutOfMemory]" instant).
Writes OUT/cuda_oom.json.gz and, beside it, torch's key_averages (CSV, by shape) and table
texts (``scripts/record_groundtruth.save_answers``), the files tests/data/groundtruth/cuda holds.
"""

import gzip
import os
import shutil
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_groundtruth import save_answers  # noqa: E402


def main(out: Path) -> None:
    x = torch.randn(1024, 1024, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True,
                 record_shapes=True) as prof:
        for step in range(3):
            with record_function(f"step_{step}"):
                y = x @ x
                z = y + 1
                del y, z
        with record_function("too_big"):
            try:
                torch.empty(400 * 2**30, dtype=torch.uint8, device="cuda")  # 400 GiB on a 141 GB card
            except torch.cuda.OutOfMemoryError as exc:
                print("caught:", str(exc).splitlines()[0][:120])
        torch.cuda.synchronize()
    path = out / "cuda_oom.json"
    prof.export_chrome_trace(str(path))
    print(save_answers(prof, out, "cuda_oom", record_shapes=True, cuda=True))
    with open(path, "rb") as f, gzip.open(f"{path}.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
